package agentrl

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/agentrl/agentrl/checkpoint"
	"github.com/agentrl/agentrl/dist"
	"github.com/agentrl/agentrl/eval"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/backend"
)

// DataParallel makes a trainer one rank of a data-parallel job: every
// rank holds the whole model and the whole optimizer state, rolls out
// (or reads) its shard of each batch, and the ranks sum their gradients
// before every update, so that the optimizer steps identically
// everywhere. Rank 0 writes the metrics log, the checkpoints and the
// weight publications; every rank resumes from the same checkpoint.
// With ZeRO the optimizer state, and at stage 2 the gradients, are
// sharded over the ranks instead (policy.ShardedAdamW).
//
// The zero value — and a Comm of one rank — trains alone, exactly as
// without it.
type DataParallel struct {
	// Comm connects the ranks (dist.Open). nil or one rank: no data
	// parallelism.
	Comm dist.Comm
	// BucketBytes is the size of the gradient buckets: gradients are
	// packed into buckets and each bucket is all-reduced in one
	// collective. 0 means 25 MiB, PyTorch DDP's bucket_cap_mb.
	BucketBytes int
	// AllowWorldSizeChange lets a trainer resume a checkpoint written by
	// a job of another number of ranks. The state is complete — every
	// rank's, or the ranks' shards together, which a sharded optimizer
	// reads under its own partition and any other optimizer whole — so
	// the resumed run is sound, but it is not the run an uninterrupted
	// job would have made: the batches' shards and the order of the
	// gradient sums change. By default such a checkpoint is refused.
	AllowWorldSizeChange bool
	// ZeRO shards the training state over the ranks (DeepSpeed's ZeRO
	// stages, policy.ShardedAdamW): 1 (ShardOptimizer) the AdamW
	// moments, each rank updating its shard of the parameters and the
	// ranks all-gathering the weights; 2 (ShardGradients) the gradients
	// too, reduce-scattered layer by layer as the backward produces them
	// (in buckets of BucketBytes), so that no rank holds the whole
	// gradient. 0 shards nothing. It needs a policy that keeps its
	// training state on its backend (*policy.Model); with one rank there
	// is nothing to shard and it is ignored. Every rank writes its shard
	// of a checkpoint, in parallel, into the folder rank 0 makes (which
	// every rank must see, as it must to resume); the weights stay whole
	// on every rank, so publications and saved models are the full model.
	ZeRO int
	// ZeROBF16Weights (with ZeRO 1 or 2) keeps the trained weights in
	// bfloat16 only, whole on every rank, and shards their float32
	// master copy with the moments (policy.ShardOptions.BF16Weights;
	// DeepSpeed's bf16 ZeRO): 2 bytes a parameter of weights instead of
	// 4, and 4/N of master. It needs a backend that holds bf16 weights
	// (the GPU in bf16 precision). Saved models and publications are the
	// bf16 weights (widened to float32 in the files); the checkpoints'
	// optimizer shards hold the master, so a resume continues from it:
	// a job with this option loads its shard of it, and a trainer
	// without it — one process, or a ZeRO job with float32 weights,
	// resuming at another number of ranks with AllowWorldSizeChange if
	// need be — takes the master as its weights.
	ZeROBF16Weights bool
}

// The stages of DataParallel.ZeRO.
const (
	// ShardOptimizer shards the optimizer state (ZeRO-1).
	ShardOptimizer = policy.ShardOptimizer
	// ShardGradients shards the gradients too (ZeRO-2).
	ShardGradients = policy.ShardGradients
)

// DefaultBucketBytes is DataParallel.BucketBytes' default.
const DefaultBucketBytes = 25 << 20

// job is the data-parallel job a trainer is one rank of, as its steps
// see it: a trainer alone is a job of one (alone), whose methods do what
// one process does; several ranks share a communicator (*ranks). The
// trainers call it at the same points whichever it is, so that a step
// reads the same for one process and for many.
type job interface {
	// size is the number of ranks, rank this one's (0 alone), and leader
	// whether this rank writes the job's files (rank 0).
	size() int
	rank() int
	leader() bool
	// share returns this rank's contiguous share [lo, hi) of n items.
	share(n int) (lo, hi int)
	// join, at the first step, checks that every rank was configured
	// alike (fingerprint: named values that must agree) and gives every
	// rank rank 0's weights, as PyTorch's DDP does when it wraps a model.
	join(ctx context.Context, opt policy.Optimizer, fingerprint []namedValue) error
	// sumGradients sums the ranks' gradients in place, on every rank.
	sumGradients(ctx context.Context, opt policy.Optimizer) error
	// reduce all-reduces v with op in place.
	reduce(ctx context.Context, v []float64, op dist.Op) error
	// agree tells every rank whether any rank's err is set: it returns
	// err on the ranks that failed and, on the others, an error naming
	// the ranks that did (what says what they were doing). agreeReady
	// also tells whether every rank is ready. Every rank calls them at
	// the same point.
	agree(ctx context.Context, err error, what string) error
	agreeReady(ctx context.Context, err error, ready bool, what string) (bool, error)
	// takeCounters returns and resets the step's seconds waiting for the
	// slowest rank before the gradient sums, seconds summing and bytes
	// summed.
	takeCounters() (wait, seconds float64, bytes int64)
	// newOptimizer makes the optimizer of the trainer's policy — sharded
	// with ZeRO — and keeps it for memory.
	newOptimizer(p lm.Trainable, cfg policy.AdamWConfig) (policy.Optimizer, error)
	// sharding returns what a step of the job held and moved beyond the
	// all-reduces: the memory of the rank that holds the most, by kind,
	// and the collectives of sharded training (reset).
	sharding(ctx context.Context) (RankMemory, ZeROMetrics, error)
	// stepMetrics makes m, this rank's metrics of its share of a step's
	// batch, the job's.
	stepMetrics(ctx context.Context, m *StepMetrics, batch []*sample) error
	// gatherRecords concatenates every rank's validation records in
	// rank order, once every rank has them (err: this rank's failure).
	gatherRecords(ctx context.Context, recs []eval.Record, err error) ([]eval.Record, error)
	// gatherMismatch concatenates every rank's mismatch rows in rank
	// order.
	gatherMismatch(ctx context.Context, rows mismatchRows) (mismatchRows, error)
	// saveCheckpoint writes step's checkpoint under root with saveTo on
	// the leader (keeping the newest keep) — with a sharded optimizer on
	// every rank, in parallel, each its shard — and every rank returns
	// its folder.
	saveCheckpoint(ctx context.Context, root checkpoint.Root, step, keep int, saveTo func(dir string) error) (string, error)
	// close frees what the job holds on the backend.
	close() error
}

// newJob checks d and returns the job it describes: alone unless its
// Comm has several ranks.
func newJob(d DataParallel, field string) (job, error) {
	if d.BucketBytes < 0 {
		return nil, fmt.Errorf("%w: %s.BucketBytes %d, want ≥ 0", ErrTrainerConfig, field, d.BucketBytes)
	}
	if d.ZeRO < 0 || d.ZeRO > ShardGradients {
		return nil, fmt.Errorf("%w: %s.ZeRO %d, want 0 (no sharding), %d (the optimizer state) or %d (and the gradients)", ErrTrainerConfig, field, d.ZeRO, ShardOptimizer, ShardGradients)
	}
	if d.ZeROBF16Weights && d.ZeRO == 0 {
		return nil, fmt.Errorf("%w: %s.ZeROBF16Weights needs ZeRO 1 or 2 (the master weights are sharded with the optimizer state)", ErrTrainerConfig, field)
	}
	if d.Comm == nil || d.Comm.Size() <= 1 {
		return &alone{}, nil
	}
	b := d.BucketBytes
	if b == 0 {
		b = DefaultBucketBytes
	}
	return &ranks{comm: d.Comm, me: d.Comm.Rank(), n: d.Comm.Size(), bucket: max(b/4, 1), zero: d.ZeRO, bf16: d.ZeROBF16Weights, field: field}, nil
}

// recordedSize is the world size a checkpoint records: 0 (omitted)
// alone.
func recordedSize(j job) int {
	if j.size() == 1 {
		return 0
	}
	return j.size()
}

// alone is the job of a trainer by itself: nothing to check with
// others, nothing to sum, every item its own.
type alone struct {
	opt policy.Optimizer // the trainer's, for its memory
}

func (*alone) size() int                               { return 1 }
func (*alone) rank() int                               { return 0 }
func (*alone) leader() bool                            { return true }
func (*alone) share(n int) (int, int)                  { return 0, n }
func (*alone) takeCounters() (float64, float64, int64) { return 0, 0, 0 }
func (*alone) close() error                            { return nil }

func (*alone) join(context.Context, policy.Optimizer, []namedValue) error { return nil }

func (*alone) sumGradients(context.Context, policy.Optimizer) error { return nil }

func (*alone) reduce(context.Context, []float64, dist.Op) error { return nil }

func (*alone) agree(_ context.Context, err error, _ string) error { return err }

func (*alone) agreeReady(_ context.Context, err error, ready bool, _ string) (bool, error) {
	return ready, err
}

func (j *alone) stepMetrics(ctx context.Context, m *StepMetrics, _ []*sample) error {
	var err error
	m.Memory, m.ZeRO, err = j.sharding(ctx)
	return err
}

func (*alone) gatherRecords(_ context.Context, recs []eval.Record, err error) ([]eval.Record, error) {
	return recs, err
}

func (*alone) gatherMismatch(_ context.Context, rows mismatchRows) (mismatchRows, error) {
	return rows, nil
}

func (*alone) saveCheckpoint(ctx context.Context, root checkpoint.Root, step, keep int, saveTo func(dir string) error) (string, error) {
	return saveCheckpoint(ctx, root, step, keep, saveTo)
}

func (j *alone) newOptimizer(p lm.Trainable, cfg policy.AdamWConfig) (policy.Optimizer, error) {
	opt, err := newOptimizer(p, cfg)
	j.opt = opt
	return opt, err
}

func (j *alone) sharding(context.Context) (RankMemory, ZeROMetrics, error) {
	mem, err := memoryOf(j.opt)
	return mem, ZeROMetrics{}, err
}

// ranks is this rank's part of a job of several over a communicator.
type ranks struct {
	comm   dist.Comm
	me, n  int  // this rank, the number of ranks
	bucket int  // float32 elements per bucket
	joined bool // the ranks' configurations checked and weights broadcast
	zero   int  // DataParallel.ZeRO
	bf16   bool // DataParallel.ZeROBF16Weights
	field  string

	opt   policy.Optimizer // the trainer's
	shard *policy.ShardedAdamW
	coll  *dist.BufferComm // the sharded optimizer's collectives

	host []float32      // host bucket
	dev  backend.Buffer // device bucket (NCCL)
	be   backend.Backend

	// Per step: the seconds waiting for the slowest rank before the
	// gradient all-reduces, the seconds and bytes of the all-reduces.
	wait, seconds float64
	bytes         int64
}

func (j *ranks) size() int    { return j.n }
func (j *ranks) rank() int    { return j.me }
func (j *ranks) leader() bool { return j.me == 0 }

func (j *ranks) share(n int) (lo, hi int) {
	return j.me * n / j.n, (j.me + 1) * n / j.n
}

func (j *ranks) join(ctx context.Context, opt policy.Optimizer, fingerprint []namedValue) error {
	if j.joined {
		return nil
	}
	params, err := opt.Params()
	if err != nil {
		return err
	}
	var n float64
	for _, p := range params {
		n += float64(len(p.Data))
	}
	fingerprint = append(fingerprint, namedValue{"the number of trained parameters", n}, namedValue{"the number of parameter tensors", float64(len(params))},
		namedValue{"DataParallel.ZeRO", float64(j.zero)}, namedValue{"DataParallel.ZeROBF16Weights", float64(b2f(j.bf16))})
	if err := j.same(ctx, fingerprint); err != nil {
		return err
	}
	err = opt.LoadParams(func(ps []lm.Param) error {
		for _, p := range ps {
			if err := j.comm.Broadcast(ctx, dist.Float32s(p.Data), 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("agentrl: broadcasting rank 0's weights: %w", err)
	}
	j.joined = true
	return nil
}

// namedValue is one item of a configuration fingerprint.
type namedValue struct {
	name  string
	value float64
}

// same fails, on every rank, when a value differs between ranks.
func (j *ranks) same(ctx context.Context, vals []namedValue) error {
	v := make(dist.Float64s, 2*len(vals))
	for i, nv := range vals {
		v[2*i], v[2*i+1] = nv.value, -nv.value
	}
	if err := j.comm.AllReduce(ctx, v, dist.Max); err != nil {
		return err
	}
	for i, nv := range vals {
		if hi, lo := v[2*i], -v[2*i+1]; hi != lo {
			return fmt.Errorf("%w: the ranks disagree on %s (from %v to %v; this rank has %v): start every rank with the same configuration and data",
				ErrTrainer, nv.name, lo, hi, nv.value)
		}
	}
	return nil
}

func (j *ranks) agree(ctx context.Context, err error, what string) error {
	_, err = j.agreeReady(ctx, err, true, what)
	return err
}

// agreeReady exchanges one flag per rank (failed) and one for the job
// (some rank is not ready) in a single all-reduce.
func (j *ranks) agreeReady(ctx context.Context, err error, ready bool, what string) (bool, error) {
	flags := make(dist.Float64s, j.n+1)
	if err != nil {
		flags[j.me] = 1
	}
	if !ready {
		flags[j.n] = 1
	}
	if cerr := j.comm.AllReduce(ctx, flags, dist.Max); cerr != nil {
		return false, errors.Join(err, cerr)
	}
	if err != nil {
		return false, err
	}
	var failed []int
	for r, f := range flags[:j.n] {
		if f != 0 {
			failed = append(failed, r)
		}
	}
	if len(failed) > 0 {
		return false, fmt.Errorf("agentrl: %s failed on rank(s) %v (their own error is in their output)", what, failed)
	}
	return flags[j.n] == 0, nil
}

func (j *ranks) reduce(ctx context.Context, v []float64, op dist.Op) error {
	if len(v) == 0 {
		return nil
	}
	return j.comm.AllReduce(ctx, dist.Float64s(v), op)
}

func (j *ranks) takeCounters() (wait, seconds float64, bytes int64) {
	wait, seconds, bytes = j.wait, j.seconds, j.bytes
	j.wait, j.seconds, j.bytes = 0, 0, 0
	return
}

func (j *ranks) saveCheckpoint(ctx context.Context, root checkpoint.Root, step, keep int, saveTo func(dir string) error) (string, error) {
	if j.shard != nil {
		return j.saveSharded(ctx, root, step, keep, saveTo)
	}
	dir := filepath.Join(root.Dir, checkpoint.DirName(step))
	var err error
	if j.leader() {
		dir, err = saveCheckpoint(ctx, root, step, keep, saveTo)
	}
	return dir, j.agree(ctx, err, "writing the checkpoint")
}

func (j *ranks) gatherRecords(ctx context.Context, recs []eval.Record, err error) ([]eval.Record, error) {
	if err := j.agree(ctx, err, "validation"); err != nil {
		return nil, err
	}
	type records struct{ R []eval.Record }
	parts, err := gatherGob(ctx, j, records{recs})
	if err != nil {
		return nil, fmt.Errorf("agentrl: validation records: %w", err)
	}
	var out []eval.Record
	for _, p := range parts {
		out = append(out, p.R...)
	}
	return out, nil
}

func (j *ranks) gatherMismatch(ctx context.Context, rows mismatchRows) (mismatchRows, error) {
	parts, err := gatherGob(ctx, j, rows)
	if err != nil {
		return mismatchRows{}, fmt.Errorf("agentrl: mismatch rows: %w", err)
	}
	var out mismatchRows
	for _, p := range parts {
		out.Old = append(out.Old, p.Old...)
		out.Rollout = append(out.Rollout, p.Rollout...)
		out.Mask = append(out.Mask, p.Mask...)
		out.Sources = append(out.Sources, p.Sources...)
	}
	return out, nil
}

// gatherGob returns every rank's v in rank order, sent gob-encoded
// through one all-gather of equal-width byte blocks.
func gatherGob[T any](ctx context.Context, j *ranks, v T) ([]T, error) {
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(v); err != nil {
		return nil, err
	}
	lens := make([]float64, j.n)
	lens[j.me] = float64(buf.Len())
	if err := j.reduce(ctx, lens, dist.Max); err != nil {
		return nil, err
	}
	width := int(slices.Max(lens))
	mine := make(dist.Bytes, width)
	copy(mine, buf.Bytes())
	all := make(dist.Bytes, width*j.n)
	if err := j.comm.AllGather(ctx, mine, all); err != nil {
		return nil, err
	}
	out := make([]T, j.n)
	for r := range j.n {
		if err := gob.NewDecoder(bytes.NewReader(all[r*width : r*width+int(lens[r])])).Decode(&out[r]); err != nil {
			return nil, fmt.Errorf("rank %d's part: %w", r, err)
		}
	}
	return out, nil
}

// close frees the device bucket.
func (j *ranks) close() error {
	if j.dev == nil {
		return nil
	}
	err := j.be.Free(j.dev)
	j.dev = nil
	return err
}

// gradReducer is an optimizer whose gradients are backend buffers
// (*policy.DeviceAdamW).
type gradReducer interface {
	ReduceGrads(reduce func(be backend.Backend, grads []backend.Buffer) error) error
}

// sumGradients sums the ranks' gradients in buckets of j.bucket elements:
// on the backend's memory when the communicator runs there (NCCL), in a
// host bucket otherwise (MPI).
//
// A barrier first separates the wait for the slowest rank (its rollouts
// or its backward took longer) from the all-reduce itself, so that the
// metrics tell load imbalance from communication.
func (j *ranks) sumGradients(ctx context.Context, opt policy.Optimizer) error {
	if s, ok := opt.(*policy.ShardedAdamW); ok && s.Stage() == ShardGradients {
		return nil // reduce-scattered by the backward already
	}
	arrived := time.Now()
	if err := j.comm.Barrier(ctx); err != nil {
		return err
	}
	start := time.Now()
	j.wait += start.Sub(arrived).Seconds()
	if s, ok := opt.(*policy.ShardedAdamW); ok {
		return s.ReduceGradients(ctx) // counted by the collectives
	}
	defer func() { j.seconds += time.Since(start).Seconds() }()
	if r, ok := opt.(gradReducer); ok {
		return r.ReduceGrads(func(be backend.Backend, grads []backend.Buffer) error {
			lens := make([]int, len(grads))
			for i, g := range grads {
				lens[i] = g.Len()
			}
			if dc, ok := j.comm.(dist.DeviceComm); ok && dc.Backend() == be {
				return j.reduceDevice(ctx, be, grads, lens)
			}
			return j.reduceHost(ctx, lens,
				func(p piece, dst []float32) error { return be.Download(dst, grads[p.i], p.off) },
				func(p piece, src []float32) error { return be.Upload(grads[p.i], p.off, src) })
		})
	}
	params, err := opt.Params()
	if err != nil {
		return err
	}
	lens := make([]int, len(params))
	for i, p := range params {
		lens[i] = len(p.Grad)
	}
	return j.reduceHost(ctx, lens,
		func(p piece, dst []float32) error { copy(dst, params[p.i].Grad[p.off:p.off+p.n]); return nil },
		func(p piece, src []float32) error { copy(params[p.i].Grad[p.off:p.off+p.n], src); return nil })
}

// piece is n elements at off of tensor i, at pos in its bucket.
type piece struct{ i, off, n, pos int }

// buckets cuts tensors of lengths lens, in order, into buckets of at
// most size elements; a tensor larger than a bucket spans several.
func buckets(lens []int, size int) [][]piece {
	var out [][]piece
	var cur []piece
	fill := 0
	for i, n := range lens {
		for off := 0; off < n; {
			k := min(n-off, size-fill)
			cur = append(cur, piece{i: i, off: off, n: k, pos: fill})
			off += k
			fill += k
			if fill == size {
				out, cur, fill = append(out, cur), nil, 0
			}
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// reduceHost sums tensors through a host bucket: get copies a piece in,
// put copies the sum back.
func (j *ranks) reduceHost(ctx context.Context, lens []int, get, put func(p piece, buf []float32) error) error {
	if j.host == nil {
		total := 0
		for _, n := range lens {
			total += n
		}
		j.host = make([]float32, min(j.bucket, max(total, 1)))
	}
	for _, b := range buckets(lens, len(j.host)) {
		last := b[len(b)-1]
		fill := last.pos + last.n
		for _, p := range b {
			if err := get(p, j.host[p.pos:p.pos+p.n]); err != nil {
				return err
			}
		}
		if err := j.comm.AllReduce(ctx, dist.Float32s(j.host[:fill]), dist.Sum); err != nil {
			return err
		}
		j.bytes += 4 * int64(fill)
		for _, p := range b {
			if err := put(p, j.host[p.pos:p.pos+p.n]); err != nil {
				return err
			}
		}
	}
	return nil
}

// reduceDevice sums backend buffers through a bucket in the backend's
// memory (device-to-device copies around each NCCL all-reduce).
func (j *ranks) reduceDevice(ctx context.Context, be backend.Backend, grads []backend.Buffer, lens []int) error {
	if j.dev == nil || j.be != be {
		total := 0
		for _, n := range lens {
			total += n
		}
		b, err := be.Alloc(min(j.bucket, max(total, 1)))
		if err != nil {
			return fmt.Errorf("agentrl: gradient bucket: %w", err)
		}
		j.dev, j.be = b, be
	}
	for _, b := range buckets(lens, j.dev.Len()) {
		last := b[len(b)-1]
		fill := last.pos + last.n
		for _, p := range b {
			if err := be.Copy(j.dev, p.pos, grads[p.i], p.off, p.n); err != nil {
				return err
			}
		}
		if err := j.comm.AllReduce(ctx, dist.Device{Buffer: j.dev, N: fill}, dist.Sum); err != nil {
			return err
		}
		j.bytes += 4 * int64(fill)
		for _, p := range b {
			if err := be.Copy(grads[p.i], p.off, j.dev, p.pos, p.n); err != nil {
				return err
			}
		}
	}
	return nil
}
