package agentrl

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/agentrl/agentrl/checkpoint"
	"github.com/agentrl/agentrl/dist"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/backend"
)

// RankMemory is the memory a rank holds for training, by kind, in
// bytes: with several ranks the most any rank holds of each kind. The
// figures are the optimizer's (policy.Memory), counted from the buffers
// allocated: Weights the model's weights (every rank holds them whole);
// Gradients those held between updates (the whole gradient, or the
// rank's shard with DataParallel.ZeRO 2), GradientsPeak their most at
// once (with ZeRO 2, the shard plus the layers a backward holds and the
// reductions' staging); Optimizer the AdamW moments (the rank's shard
// with ZeRO); Master the float32 master weights held apart from the
// weights (the rank's shard with DataParallel.ZeROBF16Weights, whose
// Weights are bf16; 0 otherwise); Activations the most a training pass
// held at once (0 where the policy does not say: a policy other than
// *policy.Model).
type RankMemory struct {
	Weights, Gradients, GradientsPeak, Optimizer, Master, Activations int64
}

// b2f is 1 for true, 0 for false.
func b2f(b bool) int {
	if b {
		return 1
	}
	return 0
}

// addTo writes the figures under memory/… into a metrics map.
func (r RankMemory) addTo(out map[string]float64) {
	if r == (RankMemory{}) {
		return
	}
	out["memory/weights_bytes"] = float64(r.Weights)
	out["memory/gradients_bytes"] = float64(r.Gradients)
	out["memory/gradients_peak_bytes"] = float64(r.GradientsPeak)
	out["memory/optimizer_bytes"] = float64(r.Optimizer)
	if r.Master != 0 {
		out["memory/master_bytes"] = float64(r.Master)
	}
	out["memory/activations_bytes"] = float64(r.Activations)
}

// ZeROMetrics are a step's collectives of sharded training
// (DataParallel.ZeRO), per rank: the bytes of the gradients
// reduce-scattered (4 per trained parameter per update: the send
// buffers) and of the weights all-gathered (4 per trained parameter per
// update: the receive buffers) — together what one all-reduce of the
// gradients moves on the wire, (N−1)/N of each in a ring — and the
// slowest rank's seconds in each. At stage 2 the reduce-scatters run
// during the backward (overlapping it on the CPU), so their seconds are
// part of the training time, not after it.
type ZeROMetrics struct {
	Stage                                  int
	ReduceScatterBytes, AllGatherBytes     int64
	ReduceScatterSeconds, AllGatherSeconds float64
}

// addTo writes the figures under dist/… and timing_s/… into a metrics
// map.
func (z ZeROMetrics) addTo(out map[string]float64) {
	if z.Stage == 0 {
		return
	}
	out["dist/zero_stage"] = float64(z.Stage)
	out["dist/grad_reduce_scatter_bytes"] = float64(z.ReduceScatterBytes)
	out["dist/weight_allgather_bytes"] = float64(z.AllGatherBytes)
	out["timing_s/grad_reduce_scatter"] = z.ReduceScatterSeconds
	out["timing_s/weight_allgather"] = z.AllGatherSeconds
}

// memoryOf is opt's memory, when it says (every optimizer of package
// policy does).
func memoryOf(opt policy.Optimizer) (RankMemory, error) {
	m, ok := opt.(interface{ Memory() (policy.Memory, error) })
	if !ok {
		return RankMemory{}, nil
	}
	mem, err := m.Memory()
	if err != nil {
		return RankMemory{}, fmt.Errorf("agentrl: memory: %w", err)
	}
	return RankMemory{Weights: mem.Weights, Gradients: mem.Gradients, GradientsPeak: mem.GradientsPeak, Optimizer: mem.Optimizer, Master: mem.Master,
		Activations: mem.Activations}, nil
}

// ShardingPolicy is a policy whose training state can be sharded over
// the ranks of a job (DataParallel.ZeRO): *policy.Model.
type ShardingPolicy interface {
	NewShardedAdamW(cfg policy.AdamWConfig, c policy.Collectives, o policy.ShardOptions) (*policy.ShardedAdamW, error)
	Backend() backend.Backend
}

// newOptimizer makes the trainer's optimizer: with ZeRO a
// ShardedAdamW over the job's communicator on the policy's backend, in
// units of the bucket size, overlapping the reductions with the
// backward when they go through host memory (MPI).
func (j *ranks) newOptimizer(p lm.Trainable, cfg policy.AdamWConfig) (policy.Optimizer, error) {
	if j.zero == 0 {
		opt, err := newOptimizer(p, cfg)
		j.opt = opt
		return opt, err
	}
	sp, ok := p.(ShardingPolicy)
	if !ok {
		return nil, fmt.Errorf("%w: %s.ZeRO %d needs a policy that keeps its training state on its backend (*policy.Model, ShardingPolicy); %T does not", ErrTrainerConfig, j.field, j.zero, p)
	}
	be := sp.Backend()
	j.coll = dist.Buffers(j.comm, be)
	dc, onDevice := j.comm.(dist.DeviceComm)
	onDevice = onDevice && dc.Backend() == be
	s, err := sp.NewShardedAdamW(cfg, j.coll, policy.ShardOptions{Stage: j.zero, UnitElements: j.bucket, Overlap: !onDevice, BF16Weights: j.bf16})
	if err != nil {
		return nil, fmt.Errorf("%w: sharded optimizer: %w", ErrTrainer, err)
	}
	j.opt, j.shard = s, s
	return s, nil
}

// sharding reduces the ranks' memory (the most of each kind) and the
// slowest rank's seconds of the sharded collectives.
func (j *ranks) sharding(ctx context.Context) (RankMemory, ZeROMetrics, error) {
	mem, err := memoryOf(j.opt)
	if err != nil {
		return mem, ZeROMetrics{}, err
	}
	z := ZeROMetrics{Stage: j.zero}
	if j.coll != nil {
		c := j.coll.TakeCounters()
		z.ReduceScatterBytes, z.AllGatherBytes = c.ReduceScatterBytes, c.AllGatherBytes
		z.ReduceScatterSeconds, z.AllGatherSeconds = c.ReduceScatterSeconds, c.AllGatherSeconds
	}
	v := []float64{float64(mem.Weights), float64(mem.Gradients), float64(mem.GradientsPeak), float64(mem.Optimizer), float64(mem.Activations),
		z.ReduceScatterSeconds, z.AllGatherSeconds, float64(mem.Master)}
	if err := j.reduce(ctx, v, dist.Max); err != nil {
		return mem, z, err
	}
	mem = RankMemory{Weights: int64(v[0]), Gradients: int64(v[1]), GradientsPeak: int64(v[2]), Optimizer: int64(v[3]), Activations: int64(v[4]),
		Master: int64(v[7])}
	z.ReduceScatterSeconds, z.AllGatherSeconds = v[5], v[6]
	return mem, z, nil
}

// saveSharded writes step's checkpoint with every rank's shard written
// in parallel: rank 0 makes the folder through root.Save and tells the
// others where it is; each rank writes its files (saveTo: rank 0 the
// parameters, the trainer's state and its shard; the others their
// shard); rank 0 commits the folder once every rank is done, and every
// rank learns whether it did. A failure on any rank fails every rank,
// naming it.
func (j *ranks) saveSharded(ctx context.Context, root checkpoint.Root, step, keep int, saveTo func(dir string) error) (string, error) {
	const writing = "writing the checkpoint's shards"
	if !j.leader() {
		tmp, err := j.receiveString(ctx, "making the checkpoint's folder")
		if err != nil {
			return "", err
		}
		if err := j.agree(ctx, saveTo(tmp), writing); err != nil {
			return "", err
		}
		return filepath.Join(root.Dir, checkpoint.DirName(step)), j.agree(ctx, nil, "committing the checkpoint")
	}
	made, written := false, false
	dir, err := saveCheckpoint(ctx, root, step, keep, func(tmp string) error {
		made = true
		if err := j.sendString(ctx, tmp, nil); err != nil {
			return err
		}
		if err := j.agree(ctx, saveTo(tmp), writing); err != nil {
			return err
		}
		written = true
		return nil
	})
	switch {
	case !made:
		// The folder was never made: the other ranks wait for its name.
		if err == nil {
			err = errors.New("agentrl: the checkpoint's folder was not made")
		}
		return "", errors.Join(err, j.sendString(ctx, "", err))
	case !written:
		// The ranks failed together (or the communicator did): none
		// waits for the commit.
		return "", err
	}
	return dir, j.agree(ctx, err, "committing the checkpoint")
}

// sendString broadcasts s from rank 0, or the failure err (the other
// ranks' receiveString then fails naming rank 0).
func (j *ranks) sendString(ctx context.Context, s string, err error) error {
	head := dist.Float64s{float64(len(s)), 0}
	if err != nil {
		head[1] = 1
	}
	if err := j.comm.Broadcast(ctx, head, 0); err != nil {
		return err
	}
	if err != nil || len(s) == 0 {
		return nil
	}
	return j.comm.Broadcast(ctx, dist.Bytes(s), 0)
}

// receiveString is the other ranks' side of sendString.
func (j *ranks) receiveString(ctx context.Context, what string) (string, error) {
	head := make(dist.Float64s, 2)
	if err := j.comm.Broadcast(ctx, head, 0); err != nil {
		return "", err
	}
	if head[1] != 0 {
		return "", fmt.Errorf("agentrl: %s failed on rank(s) [0] (their own error is in their output)", what)
	}
	b := make(dist.Bytes, int(head[0]))
	if len(b) == 0 {
		return "", nil
	}
	if err := j.comm.Broadcast(ctx, b, 0); err != nil {
		return "", err
	}
	return string(b), nil
}

// collectiveOptimizer is an optimizer whose norm and step are
// collectives, which take the step's context (policy.ShardedAdamW).
type collectiveOptimizer interface {
	GradNormContext(ctx context.Context) (float64, error)
	ClipGradNormContext(ctx context.Context, maxNorm float64) (float64, error)
	StepContext(ctx context.Context) (float64, error)
}

// stepOptimizer is opt's Step, under ctx when it is a collective.
func stepOptimizer(ctx context.Context, opt policy.Optimizer) (float64, error) {
	if c, ok := opt.(collectiveOptimizer); ok {
		return c.StepContext(ctx)
	}
	return opt.Step()
}

// shardOnly reports whether a rank writes only its shard of a
// checkpoint: a sharded optimizer on a rank other than 0.
func shardOnly(j job, opt policy.Optimizer) bool {
	_, sharded := opt.(*policy.ShardedAdamW)
	return sharded && !j.leader()
}
