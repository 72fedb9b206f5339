package policy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"

	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/backend"
)

// Collectives is what a ShardedAdamW asks of the data-parallel job it is
// one rank of: collectives over whole buffers of the model's backend,
// summing. Package dist's BufferComm implements it over NCCL (a GPU's
// memory, in place) and MPI (through host copies).
type Collectives interface {
	// Rank is this rank, in [0, Size()).
	Rank() int
	// Size is the number of ranks.
	Size() int
	// ReduceScatter sums send (Size()·recv.Len() elements) over the
	// ranks and leaves block Rank() of the sum in recv.
	ReduceScatter(ctx context.Context, send, recv backend.Buffer) error
	// AllGather concatenates every rank's send, in rank order, into recv
	// (Size()·send.Len() elements).
	AllGather(ctx context.Context, send, recv backend.Buffer) error
	// AllReduceSum sums v over the ranks in place.
	AllReduceSum(ctx context.Context, v []float64) error
}

// Sharding stages of ShardOptions.Stage, after DeepSpeed's ZeRO.
const (
	// ShardOptimizer (ZeRO-1): the AdamW moments are sharded; every rank
	// keeps the whole gradient until the update reduce-scatters it.
	ShardOptimizer = 1
	// ShardGradients (ZeRO-2): the gradients too: the backward hands each
	// layer's gradients to the reduce-scatter as soon as they are final,
	// and no rank holds the whole gradient at once.
	ShardGradients = 2
)

// DefaultShardUnitElements is ShardOptions.UnitElements' default: 25
// MiB of float32, PyTorch DDP's bucket.
const DefaultShardUnitElements = 25 << 20 / 4

// ShardOptions configure Model.NewShardedAdamW.
type ShardOptions struct {
	// Stage is ShardOptimizer (1) or ShardGradients (2).
	Stage int
	// UnitElements is the size of a partition unit — what one
	// reduce-scatter sums and one all-gather assembles, the bucket of
	// the collectives — rounded down to a multiple of the number of
	// ranks (and no larger than the parameters need); 0 means
	// DefaultShardUnitElements.
	UnitElements int
	// Overlap (stage 2) runs each unit's reduce-scatter in a goroutine
	// while the backward goes on to the next layers, instead of in line.
	// It pays where the reduction does not share the backward's
	// resources: MPI between machines, or spare cores. On a GPU whose
	// collectives run on the compute stream (dist over NCCL) the two
	// are serialised either way.
	Overlap bool
	// BF16Weights keeps the model's trainable weights in bfloat16 only,
	// 2 bytes a parameter, and their float32 master copy as this rank's
	// shard in the optimizer, beside the moments (DeepSpeed's bf16 ZeRO):
	// each rank updates its master shard, rounds it to bf16 and
	// all-gathers the bf16 weights, which are what the forward reads. Per
	// rank: 2P of weights and 12P/N of master and moments instead of 4P
	// and 8P/N. The forward computes what BF16 precision computes from
	// float32 weights holding the same bf16-rounded values: the products
	// multiplied those in bf16 already; the embedding, the norms' weights
	// and the biases, which a float32 forward reads unrounded, now read
	// them rounded too. It needs a backend with backend.BF16Weights (the
	// GPU backend in BF16 precision; the error wraps
	// errors.ErrUnsupported elsewhere, the CPU backend computing in
	// float32, and with a LoRA adapter). The model's weights, which Params
	// gives, are the bf16 ones; the state files (SaveStateFile) hold the
	// master shard.
	BF16Weights bool
}

// ShardedAdamW is AdamW with its state sharded over the ranks of a
// data-parallel job (DeepSpeed's ZeRO stages 1 and 2; Rajbhandari et
// al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter
// Models", 2020): each rank keeps the moments of its shard of the
// parameters only, updates that shard, and the ranks all-gather the
// updated weights. At stage 2 the gradients are sharded too.
//
// # The partition
//
// The trainable parameters, in Params order, form one flat vector of P
// floats. It is cut into K = ⌈P/U⌉ units of U floats (UnitElements, a
// multiple of the N ranks; the last unit is padded with zeros), and
// every unit into N blocks of U/N: rank r owns block r of every unit.
// So every rank's shard is K·U/N floats, P/N up to the last unit's
// padding (less than U/N per rank), whatever the tensors' sizes: the
// partition is balanced in bytes. A unit is what one reduce-scatter
// sums and one all-gather assembles. Units, rather than one contiguous
// range per rank, let a reduction start as soon as the gradients of its
// unit are final: the backward finishes them from the end of the flat
// vector (the LM head) to its start (the embedding), so every unit's
// turn comes while the backward goes on (FSDP's layout, a flat
// parameter per unit sharded across the ranks).
//
// # A step
//
// Stage 1 (ShardOptimizer): the backward accumulates the whole gradient
// on every rank, as without sharding; ReduceGradients reduce-scatters
// it unit by unit, each rank receiving the sum of its blocks. Stage 2
// (ShardGradients): each backward hands every layer's gradients over as
// soon as they are final; they are copied into the staging buffer of
// their unit, and a unit complete is reduce-scattered (with
// ShardOptions.Overlap, in a goroutine while the backward goes on) and
// added to this rank's gradient shard; the layer's gradient buffers
// then serve the next layer. Then, at either stage, the gradient norm
// is the square root of the ranks' sums of squares of their shards
// (all-reduced: the unsharded norm, up to the float64 order of the
// sum), the clip scales the shards, and each rank applies AdamW
// (backend.AdamWUpdate, elementwise: bit for bit the unsharded update of
// the same gradient) to its blocks and all-gathers the updated weights
// unit by unit into every rank's model.
//
// The weights the forward reads are float32 on both of this project's
// backends (a GPU in bf16 precision converts them on the fly, keeping
// bf16 copies in its weight cache), so they are the master weights
// too: every rank holds them whole, and the all-gather moves float32.
// (DeepSpeed's bf16 training keeps bf16 weights for the forward and
// shards a float32 master copy; the backends' float32 Buffer does not
// express bf16 weights yet.)
//
// Per rank, for P trained parameters: weights 4P, gradients 4P (stage
// 1, plus the reduced shard 4P/N during the update) or 4P/N plus the
// buffers of the layers in flight (stage 2), moments 8P/N. Memory
// measures them.
//
// A ShardedAdamW is the model's training state on its backend, as a
// DeviceAdamW is (Params, LoadParams, Save and the samplers see the
// whole, current weights on every rank), and is ended as one is. Every
// rank calls its collective methods — ReduceGradients, GradNormContext,
// ClipGradNormContext, StepContext and their forms without a context,
// and at stage 2 every backward of the model — in the same order. It is
// not safe for concurrent use.
type ShardedAdamW struct {
	core    *DeviceAdamW // the model, its trainable tensors, the step count and the lock
	coll    Collectives
	stage   int
	overlap bool
	lay     shardLayout
	groups  *gradGroups // stage 2: the backward's gradient-ready groups
	// mom and vel are the moments of this rank's blocks, one buffer of
	// lay.block floats per unit; grad the summed gradient of the blocks
	// (stage 2: always; stage 1: from ReduceGradients to ZeroGrad).
	mom, vel, grad []backend.Buffer
	// fresh[k]: grad[k] holds zeros since ZeroGrad, so the next
	// reduction writes it instead of adding to it.
	fresh  []bool
	stream *gradStream // stage 2's sink of the backward
	meter  gradMeter   // gradient floats held beyond the shards
	// hw (ShardOptions.BF16Weights): the backend's bf16 buffers, which
	// hold the model's trainable weights; master the float32 master
	// weights of this rank's blocks, one buffer of lay.block floats per
	// unit (the padding zero). Nil without the option.
	hw     backend.BF16Weights
	master []backend.Buffer
}

var _ Optimizer = (*ShardedAdamW)(nil)

// NewShardedAdamW moves the model's training state to its backend, as
// NewDeviceAdamW does, with AdamW's state sharded over the ranks of c as
// o says (see ShardedAdamW). Every rank of the job makes its own with
// the same configuration, over a model with the same trainable
// parameters. It fails as NewDeviceAdamW does (a backend without
// backend.Optimizer is an error wrapping errors.ErrUnsupported), and for
// a stage other than 1 or 2 or a nil c.
func (m *Model) NewShardedAdamW(cfg AdamWConfig, c Collectives, o ShardOptions) (*ShardedAdamW, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	switch {
	case c == nil:
		return nil, fmt.Errorf("%w: sharded AdamW without collectives", ErrInput)
	case o.Stage != ShardOptimizer && o.Stage != ShardGradients:
		return nil, fmt.Errorf("%w: sharding stage %d, want %d (the optimizer state) or %d (and the gradients)", ErrInput, o.Stage, ShardOptimizer, ShardGradients)
	case c.Size() < 1 || c.Rank() < 0 || c.Rank() >= c.Size():
		return nil, fmt.Errorf("%w: rank %d of %d", ErrInput, c.Rank(), c.Size())
	case o.UnitElements < 0:
		return nil, fmt.Errorf("%w: ShardOptions.UnitElements %d, want ≥ 0", ErrInput, o.UnitElements)
	}
	opt, ok := m.be.(backend.Optimizer)
	if !ok {
		return nil, fmt.Errorf("%w: backend %s cannot run the optimizer (backend.Optimizer)", errors.ErrUnsupported, m.be.Name())
	}
	var hw backend.BF16Weights
	if o.BF16Weights {
		if hw, ok = m.be.(backend.BF16Weights); !ok {
			return nil, fmt.Errorf("%w: backend %s cannot hold weights in bfloat16 (backend.BF16Weights): ShardOptions.BF16Weights", errors.ErrUnsupported, m.be.Name())
		}
	}
	unit := o.UnitElements
	if unit == 0 {
		unit = DefaultShardUnitElements
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.devOpt != nil {
		m.devOpt.free()
		m.devOpt = nil
	}
	if m.w.closed() {
		return nil, fmt.Errorf("%w: the model is closed", ErrInput)
	}
	if hw != nil && len(m.w.adapter) > 0 {
		return nil, fmt.Errorf("%w: ShardOptions.BF16Weights with a LoRA adapter (the adapter's products read float32 weights; its tensors are small anyway)", errors.ErrUnsupported)
	}
	params := m.w.trainable()
	sizes := make([]int, len(params))
	for i, p := range params {
		sizes[i] = len(p.data)
	}
	s := &ShardedAdamW{coll: c, stage: o.Stage, overlap: o.Overlap, lay: newShardLayout(sizes, c.Size(), c.Rank(), unit)}
	s.core = &DeviceAdamW{model: m, opt: opt, cfg: cfg, params: params, shard: s}
	k := s.lay.units
	for _, dst := range []*[]backend.Buffer{&s.mom, &s.vel} {
		*dst = make([]backend.Buffer, k)
		for u := range k {
			b, err := m.be.Alloc(s.lay.block)
			if err != nil {
				s.free()
				return nil, fmt.Errorf("policy: allocating the moments' shard: %w", err)
			}
			(*dst)[u] = b
		}
	}
	s.grad, s.fresh = make([]backend.Buffer, k), make([]bool, k)
	m.w.moveToBackend()
	if s.stage == ShardGradients {
		for u := range k {
			b, err := m.be.Alloc(s.lay.block)
			if err != nil {
				s.free()
				return nil, fmt.Errorf("policy: allocating the gradient shard: %w", err)
			}
			s.grad[u], s.fresh[u] = b, true
		}
		s.groups = m.gradGroups()
		s.stream = newGradStream(s, params)
		m.w.streamGradients()
	}
	if hw != nil {
		if err := s.toBF16(hw); err != nil {
			s.free()
			return nil, err
		}
	}
	m.devOpt = s.core
	return s, nil
}

// toBF16 (ShardOptions.BF16Weights) copies this rank's blocks of the
// model's float32 weights into the master shard, then replaces every
// trainable weight buffer by a bf16 one holding its rounded values. The
// caller holds the model's lock.
func (s *ShardedAdamW) toBF16(hw backend.BF16Weights) error {
	m := s.core.model
	be := m.be
	if err := m.w.sync(); err != nil {
		return err
	}
	s.hw = hw
	lay := s.lay
	s.master = make([]backend.Buffer, lay.units)
	for u := range lay.units {
		b, err := be.Alloc(lay.block)
		if err != nil {
			return fmt.Errorf("policy: allocating the master weights' shard: %w", err)
		}
		s.master[u] = b
		lo, hi := lay.own(lay.rank, u)
		base := u*lay.unit + lay.rank*lay.block
		for _, pc := range lay.pieces(lo, hi) {
			if err := be.Copy(b, lo-base+pc.at, s.core.params[pc.i].w, pc.off, pc.n); err != nil {
				return err
			}
		}
	}
	for _, p := range s.core.params {
		h, err := hw.AllocBF16(p.w.Len())
		if err != nil {
			return fmt.Errorf("policy: allocating the bf16 weights of %s: %w", p.spec.Name, err)
		}
		if err := be.Copy(h, 0, p.w, 0, p.w.Len()); err != nil {
			_ = be.Free(h)
			return fmt.Errorf("policy: rounding %s to bf16: %w", p.spec.Name, err)
		}
		_ = be.Free(p.w)
		p.w = h
	}
	return nil
}

// toFloat32 gives the model float32 weight buffers again, widened from
// the bf16 ones (the values the forward read), when the optimizer ends;
// a buffer that cannot be widened (no memory) stays bf16, which the
// kernels read as they did.
func (s *ShardedAdamW) toFloat32() {
	be := s.core.model.be
	for _, p := range s.core.params {
		if p.w == nil || !s.hw.IsBF16(p.w) {
			continue
		}
		f, err := be.Alloc(p.w.Len())
		if err != nil {
			continue
		}
		if err := be.Copy(f, 0, p.w, 0, p.w.Len()); err != nil {
			_ = be.Free(f)
			continue
		}
		_ = be.Free(p.w)
		p.w = f
	}
}

// free releases the shards; the model's streamed gradients end with
// them.
func (s *ShardedAdamW) free() {
	be := s.core.model.be
	if s.hw != nil {
		s.toFloat32()
	}
	for _, b := range append(append(append(append([]backend.Buffer(nil), s.mom...), s.vel...), s.grad...), s.master...) {
		if b != nil {
			_ = be.Free(b)
		}
	}
	s.mom, s.vel, s.grad, s.master = nil, nil, nil, nil
	if s.stream != nil {
		s.stream.freeSpare()
	}
	s.core.model.w.streamGrads = false
}

// Stage is the sharding stage, ShardOptimizer or ShardGradients.
func (s *ShardedAdamW) Stage() int { return s.stage }

// BF16Weights reports whether the optimizer was made with
// ShardOptions.BF16Weights: the model's weights are bf16 and the
// optimizer keeps the float32 master weights of this rank's blocks,
// which LoadStateFile reads from a state that holds them.
func (s *ShardedAdamW) BF16Weights() bool { return s.hw != nil }

// Config returns the hyperparameters, zero fields resolved.
func (s *ShardedAdamW) Config() AdamWConfig { return s.core.cfg }

// Steps is the number of updates applied so far.
func (s *ShardedAdamW) Steps() int64 { return s.core.step }

// LR is the learning rate the next Step will use.
func (s *ShardedAdamW) LR() float64 { return s.core.LR() }

// Params copies the backend's current weights (whole: every rank holds
// them) into the model's host slices and returns them. Their Grad
// slices hold this rank's local gradient at stage 1 and zeros at stage
// 2, whose gradient exists only as the ranks' shards.
func (s *ShardedAdamW) Params() ([]lm.Param, error) { return s.core.Params() }

// LoadParams calls load with the current parameters and uploads what it
// wrote (a checkpoint's restore, or rank 0's weights at the start of a
// job): every rank loads the same values.
//
// With ShardOptions.BF16Weights the model's weights are the values
// rounded to bf16, and this rank's master shard takes them unrounded.
func (s *ShardedAdamW) LoadParams(load func([]lm.Param) error) error {
	if err := s.core.LoadParams(load); err != nil || s.master == nil {
		return err
	}
	// The host slices hold the loaded float32 values (the upload rounded
	// only the backend's copies).
	return s.core.locked(func() error {
		be := s.core.model.be
		lay := s.lay
		for u := range lay.units {
			lo, hi := lay.own(lay.rank, u)
			base := u*lay.unit + lay.rank*lay.block
			for _, pc := range lay.pieces(lo, hi) {
				p := s.core.params[pc.i]
				if err := be.Upload(s.master[u], lo-base+pc.at, p.data[pc.off:pc.off+pc.n]); err != nil {
					return fmt.Errorf("policy: uploading the master weights of %s: %w", p.spec.Name, err)
				}
			}
		}
		// The host slices are not the backend's (rounded) weights.
		s.core.model.w.stepped()
		return nil
	})
}

// ZeroGrad sets the gradients to zero: the model's (stage 1) and this
// rank's gradient shard.
func (s *ShardedAdamW) ZeroGrad() error {
	return s.core.locked(func() error {
		be := s.core.model.be
		if s.stage == ShardOptimizer {
			for _, p := range s.core.params {
				if err := be.Fill(p.dw, 0); err != nil {
					return err
				}
			}
			s.core.model.w.gradsWritten()
			for u, b := range s.grad {
				if b != nil {
					_ = be.Free(b)
					s.grad[u] = nil
					s.meter.add(-int64(s.lay.block))
				}
			}
			return nil
		}
		for u, b := range s.grad {
			if err := be.Fill(b, 0); err != nil {
				return err
			}
			s.fresh[u] = true
		}
		return nil
	})
}

// ReduceGradients (stage 1) reduce-scatters the gradient the backward
// passes accumulated on this rank, unit by unit: each rank receives the
// ranks' sum over its blocks, which GradNorm, ClipGradNorm and Step then
// use. At stage 2 the backward has done it already: it does nothing.
func (s *ShardedAdamW) ReduceGradients(ctx context.Context) error {
	if s.stage != ShardOptimizer {
		return nil
	}
	return s.core.locked(func() error {
		be := s.core.model.be
		staging, err := be.Alloc(s.lay.unit)
		if err != nil {
			return fmt.Errorf("policy: allocating the reduction's staging: %w", err)
		}
		s.meter.add(int64(s.lay.unit))
		defer func() {
			_ = be.Free(staging)
			s.meter.add(-int64(s.lay.unit))
		}()
		for u := range s.lay.units {
			lo, hi := s.lay.unitRange(u)
			if hi-lo < s.lay.unit {
				if err := be.Fill(staging, 0); err != nil { // the last unit's padding
					return err
				}
			}
			for _, pc := range s.lay.pieces(lo, hi) {
				if err := be.Copy(staging, pc.at, s.core.params[pc.i].dw, pc.off, pc.n); err != nil {
					return err
				}
			}
			if s.grad[u] == nil {
				if s.grad[u], err = be.Alloc(s.lay.block); err != nil {
					return fmt.Errorf("policy: allocating the gradient shard: %w", err)
				}
				s.meter.add(int64(s.lay.block))
			}
			if err := s.coll.ReduceScatter(ctx, staging, s.grad[u]); err != nil {
				return fmt.Errorf("policy: reduce-scatter of unit %d of %d: %w", u+1, s.lay.units, err)
			}
		}
		return nil
	})
}

// shards returns the gradient shard's buffers, or an error when stage 1
// has not reduced its gradients since ZeroGrad.
func (s *ShardedAdamW) shards() ([]backend.Buffer, error) {
	for _, b := range s.grad {
		if b == nil {
			return nil, fmt.Errorf("%w: the gradients of this sharded optimizer are not reduced: call ReduceGradients after the backward passes", ErrInput)
		}
	}
	return s.grad, nil
}

// GradNormContext is the L2 norm of the ranks' summed gradient: the
// square root of the sum over the ranks of their shards' sums of
// squares (float64), which every rank computes alike.
func (s *ShardedAdamW) GradNormContext(ctx context.Context) (float64, error) {
	var norm float64
	err := s.core.locked(func() error {
		var err error
		norm, err = s.gradNorm(ctx)
		return err
	})
	return norm, err
}

func (s *ShardedAdamW) gradNorm(ctx context.Context) (float64, error) {
	grads, err := s.shards()
	if err != nil {
		return 0, err
	}
	local, err := s.core.opt.GradNorm(grads...)
	if err != nil {
		return 0, err
	}
	sq := []float64{local * local}
	if err := s.coll.AllReduceSum(ctx, sq); err != nil {
		return 0, fmt.Errorf("policy: all-reduce of the gradient norm: %w", err)
	}
	return math.Sqrt(sq[0]), nil
}

// GradNorm is GradNormContext without a deadline but the collectives'
// own (a communicator's timeout).
func (s *ShardedAdamW) GradNorm() (float64, error) { return s.GradNormContext(context.Background()) }

// ClipGradNormContext scales the gradient shards so that the norm of
// the ranks' summed gradient is at most maxNorm, with ClipGradNorm's
// formula, and returns the norm before. A NaN or infinite norm returns
// ErrNonFinite and leaves the gradients unchanged, on every rank alike.
func (s *ShardedAdamW) ClipGradNormContext(ctx context.Context, maxNorm float64) (float64, error) {
	if !(maxNorm > 0) {
		return 0, fmt.Errorf("policy: ClipGradNorm: maxNorm = %g, want > 0", maxNorm)
	}
	var norm float64
	err := s.core.locked(func() error {
		var err error
		if norm, err = s.gradNorm(ctx); err != nil {
			return err
		}
		if math.IsNaN(norm) || math.IsInf(norm, 0) {
			return fmt.Errorf("%w: gradient norm %g", ErrNonFinite, norm)
		}
		if coef := maxNorm / (norm + 1e-6); coef < 1 {
			for _, b := range s.grad {
				if err := s.core.opt.Scale(float32(coef), b); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return norm, err
}

// ClipGradNorm is ClipGradNormContext without a deadline but the
// collectives' own.
func (s *ShardedAdamW) ClipGradNorm(maxNorm float64) (float64, error) {
	return s.ClipGradNormContext(context.Background(), maxNorm)
}

// StepContext applies one AdamW update to this rank's blocks from its
// gradient shard and all-gathers the updated weights unit by unit into
// every rank's model; it returns the learning rate it used.
func (s *ShardedAdamW) StepContext(ctx context.Context) (float64, error) {
	o := s.core
	lr := o.LR()
	if math.IsNaN(lr) || math.IsInf(lr, 0) || lr < 0 {
		return 0, fmt.Errorf("%w: learning rate %g at step %d", ErrNonFinite, lr, o.step)
	}
	c := o.cfg
	st := backend.AdamWStep{LR: lr, Beta1: c.Beta1, Beta2: c.Beta2, Eps: c.Eps, WeightDecay: c.WeightDecay, Step: o.step + 1}
	if _, err := st.Scalars(); err != nil {
		return 0, err
	}
	err := o.locked(func() error {
		grads, err := s.shards()
		if err != nil {
			return err
		}
		be := o.model.be
		lay := s.lay
		alloc := be.Alloc
		if s.hw != nil {
			alloc = s.hw.AllocBF16 // the update's bf16 block and the unit gathered
		}
		w, err := alloc(lay.block)
		if err != nil {
			return fmt.Errorf("policy: allocating the update's scratch: %w", err)
		}
		defer be.Free(w)
		all, err := alloc(lay.unit)
		if err != nil {
			return fmt.Errorf("policy: allocating the all-gather's buffer: %w", err)
		}
		defer be.Free(all)
		// From here on the model's weights are being written: a failure
		// leaves them partly updated, as the backend holds them.
		defer o.model.w.stepped()
		for u := range lay.units {
			if s.master != nil {
				// The master shard is updated in place and rounded into
				// the bf16 block that the ranks gather.
				if err := o.opt.AdamW(st, s.master[u], grads[u], s.mom[u], s.vel[u]); err != nil {
					return fmt.Errorf("policy: AdamW on unit %d: %w", u+1, err)
				}
				if err := be.Copy(w, 0, s.master[u], 0, lay.block); err != nil {
					return err
				}
			} else {
				lo, hi := lay.own(lay.rank, u)
				base := u*lay.unit + lay.rank*lay.block
				for _, pc := range lay.pieces(lo, hi) {
					if err := be.Copy(w, lo-base+pc.at, o.params[pc.i].w, pc.off, pc.n); err != nil {
						return err
					}
				}
				if err := o.opt.AdamW(st, w, grads[u], s.mom[u], s.vel[u]); err != nil {
					return fmt.Errorf("policy: AdamW on unit %d: %w", u+1, err)
				}
			}
			if err := s.coll.AllGather(ctx, w, all); err != nil {
				return fmt.Errorf("policy: all-gather of unit %d of %d: %w", u+1, lay.units, err)
			}
			ulo, uhi := lay.unitRange(u)
			for _, pc := range lay.pieces(ulo, uhi) {
				if err := be.Copy(o.params[pc.i].w, pc.off, all, pc.at, pc.n); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	o.step++
	return lr, nil
}

// Step is StepContext without a deadline but the collectives' own.
func (s *ShardedAdamW) Step() (float64, error) { return s.StepContext(context.Background()) }

// Memory counts this rank's buffers: the model's weights (whole), the
// gradients it holds between updates (the model's at stage 1, with the
// reduced shard while there is one; the shard at stage 2), their most
// at once so far (the buffers held throughout plus the most the
// backward's layer buffers, the reductions' staging and the reduced
// shard held at once), the moments' shard, and the activations' peak.
func (s *ShardedAdamW) Memory() (Memory, error) {
	var mem Memory
	err := s.core.locked(func() error {
		mem.Weights = s.core.weightBytes()
		for _, p := range s.core.params {
			mem.Gradients += bufferBytes(p.dw)
		}
		shard := bufferBytes(s.grad...)
		if s.stage == ShardGradients {
			// The shard is held throughout; the meter counts the
			// backward's layer buffers and the staging.
			mem.GradientsPeak = mem.Gradients + shard + 4*s.meter.max()
		} else {
			// The model's whole gradient is held throughout; the meter
			// counts the reduced shard and the staging.
			mem.GradientsPeak = mem.Gradients + 4*s.meter.max()
		}
		mem.Gradients += shard
		mem.Optimizer = bufferBytes(s.mom...) + bufferBytes(s.vel...)
		mem.Master = bufferBytes(s.master...)
		mem.Activations = s.core.actPeak
		return nil
	})
	return mem, err
}

// ShardLayout describes a ShardedAdamW's partition (see its doc).
type ShardLayout struct {
	// Ranks and Rank: the job's size and this rank.
	Ranks, Rank int
	// Elements is P, the trainable floats; Unit the floats of a unit,
	// Block its share of one rank (Unit/Ranks), Units their number.
	Elements, Unit, Block, Units int
}

// Layout returns the partition.
func (s *ShardedAdamW) Layout() ShardLayout {
	l := s.lay
	return ShardLayout{Ranks: l.ranks, Rank: l.rank, Elements: l.total, Unit: l.unit, Block: l.block, Units: l.units}
}

// shardLayout is the flat partition of a ShardedAdamW.
type shardLayout struct {
	ranks, rank int
	total       int // P
	unit, block int // U, U/N
	units       int // K
	// starts[i] is parameter i's offset in the flat vector; starts[len]
	// is total.
	starts []int
}

// newShardLayout partitions parameters of the given sizes over ranks
// in units of at most unit floats (rounded down to a multiple of ranks,
// at least ranks, at most what one unit of all the parameters needs).
func newShardLayout(sizes []int, ranks, rank, unit int) shardLayout {
	l := shardLayout{ranks: ranks, rank: rank, starts: make([]int, len(sizes)+1)}
	for i, n := range sizes {
		l.starts[i+1] = l.starts[i] + n
	}
	l.total = l.starts[len(sizes)]
	unit = max(ranks, unit/ranks*ranks)
	unit = min(unit, max(ranks, (l.total+ranks-1)/ranks*ranks))
	l.unit, l.block = unit, unit/ranks
	l.units = (l.total + unit - 1) / unit
	return l
}

// unitRange is unit k's range of the flat vector, padding excluded.
func (l shardLayout) unitRange(k int) (lo, hi int) {
	return k * l.unit, min((k+1)*l.unit, l.total)
}

// own is rank r's block of unit k in the flat vector, padding excluded
// (empty, lo = hi, when it is all padding).
func (l shardLayout) own(r, k int) (lo, hi int) {
	lo = min(k*l.unit+r*l.block, l.total)
	return lo, min(lo+l.block, l.total)
}

// owned is the number of floats rank r owns, padding excluded.
func (l shardLayout) owned(r int) int {
	n := 0
	for k := range l.units {
		lo, hi := l.own(r, k)
		n += hi - lo
	}
	return n
}

// flatPiece is n floats of parameter i from its element off, at
// position at of the range they were cut from.
type flatPiece struct{ i, off, n, at int }

// pieces cuts the flat range [lo, hi) along the parameters.
func (l shardLayout) pieces(lo, hi int) []flatPiece {
	if hi <= lo {
		return nil
	}
	var out []flatPiece
	i := sort.Search(len(l.starts)-1, func(i int) bool { return l.starts[i+1] > lo })
	for pos := lo; pos < hi && i < len(l.starts)-1; i++ {
		end := min(hi, l.starts[i+1])
		if end > pos {
			out = append(out, flatPiece{i: i, off: pos - l.starts[i], n: end - pos, at: pos - lo})
			pos = end
		}
	}
	return out
}

// gradStream is stage 2's sink of a backward (gradSink): it stages each
// final gradient into its unit's buffer and reduce-scatters a unit
// when it is complete, in line or in a goroutine (overlap), adding the
// rank's block into its gradient shard.
type gradStream struct {
	s *ShardedAdamW
	// unitPieces[i] are parameter i's pieces by unit: at is the position
	// in the unit.
	unitPieces [][]unitPiece
	index      map[*param]int

	// Per backward (begin to end).
	left    []int            // floats of each unit not staged yet
	staging []backend.Buffer // each unit's staging buffer, from its first piece to its reduction
	work    chan int         // units to reduce (overlap)
	slots   chan struct{}    // one per unit handed to the worker and not yet reduced
	wg      sync.WaitGroup

	mu    sync.Mutex
	spare []backend.Buffer // free staging buffers
	tmp   backend.Buffer   // a reduction's block, added into the shard
	err   error            // the first failure of the worker
}

// unitPiece is n floats of a parameter from element off, at position at
// of unit k.
type unitPiece struct{ k, off, n, at int }

// maxInFlight bounds the units handed to the worker and not yet reduced
// (overlap): the backward waits rather than stage more, so that the
// staging held stays a few units (double buffering) however slow the
// reductions are.
const maxInFlight = 2

func newGradStream(s *ShardedAdamW, params []*param) *gradStream {
	g := &gradStream{s: s, index: make(map[*param]int, len(params)), unitPieces: make([][]unitPiece, len(params))}
	for i, p := range params {
		g.index[p] = i
	}
	for k := range s.lay.units {
		lo, hi := s.lay.unitRange(k)
		for _, pc := range s.lay.pieces(lo, hi) {
			g.unitPieces[pc.i] = append(g.unitPieces[pc.i], unitPiece{k: k, off: pc.off, n: pc.n, at: pc.at})
		}
	}
	return g
}

func (g *gradStream) meter() *gradMeter { return &g.s.meter }

func (g *gradStream) begin(ctx context.Context) error {
	lay := g.s.lay
	g.left = make([]int, lay.units)
	for k := range lay.units {
		lo, hi := lay.unitRange(k)
		g.left[k] = hi - lo
	}
	g.staging = make([]backend.Buffer, lay.units)
	g.err = nil
	if g.s.overlap {
		g.work = make(chan int, lay.units)
		g.slots = make(chan struct{}, maxInFlight)
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			for k := range g.work {
				g.mu.Lock()
				failed := g.err != nil
				g.mu.Unlock()
				var err error
				if !failed {
					err = g.reduce(ctx, k)
				}
				g.release(k)
				<-g.slots
				if err != nil {
					g.mu.Lock()
					g.err = err
					g.mu.Unlock()
				}
			}
		}()
	}
	return nil
}

// accept stages the final gradients of ps and dispatches the units they
// complete.
func (g *gradStream) accept(ctx context.Context, ps []*param) error {
	be := g.s.core.model.be
	for _, p := range ps {
		i, ok := g.index[p]
		if !ok || p.dw == nil {
			continue
		}
		for _, pc := range g.unitPieces[i] {
			buf, err := g.take(pc.k)
			if err != nil {
				return err
			}
			if err := be.Copy(buf, pc.at, p.dw, pc.off, pc.n); err != nil {
				return err
			}
			if g.left[pc.k] -= pc.n; g.left[pc.k] == 0 {
				if err := g.dispatch(ctx, pc.k); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// take returns unit k's staging buffer, a zeroed one at its first piece.
func (g *gradStream) take(k int) (backend.Buffer, error) {
	if b := g.staging[k]; b != nil {
		return b, nil
	}
	be := g.s.core.model.be
	g.mu.Lock()
	var b backend.Buffer
	if n := len(g.spare); n > 0 {
		b, g.spare = g.spare[n-1], g.spare[:n-1]
	}
	g.mu.Unlock()
	if b == nil {
		var err error
		if b, err = be.Alloc(g.s.lay.unit); err != nil {
			return nil, fmt.Errorf("policy: allocating a reduction's staging: %w", err)
		}
		g.s.meter.add(int64(g.s.lay.unit))
	} else if lo, hi := g.s.lay.unitRange(k); hi-lo < g.s.lay.unit {
		if err := be.Fill(b, 0); err != nil { // the padding of the last unit
			return nil, err
		}
	}
	g.staging[k] = b
	return b, nil
}

// dispatch reduces unit k now, or hands it to the worker (overlap).
func (g *gradStream) dispatch(ctx context.Context, k int) error {
	if g.work != nil {
		g.slots <- struct{}{} // waits while maxInFlight units are being reduced
		g.work <- k
		return nil
	}
	err := g.reduce(ctx, k)
	g.release(k)
	return err
}

// release returns unit k's staging buffer to the spares.
func (g *gradStream) release(k int) {
	g.mu.Lock()
	g.spare = append(g.spare, g.staging[k])
	g.mu.Unlock()
	g.staging[k] = nil
}

// reduce reduce-scatters unit k's staging and adds this rank's block
// into the gradient shard (writes it, after ZeroGrad).
func (g *gradStream) reduce(ctx context.Context, k int) error {
	s := g.s
	be := s.core.model.be
	send := g.staging[k]
	if s.fresh[k] {
		if err := s.coll.ReduceScatter(ctx, send, s.grad[k]); err != nil {
			return fmt.Errorf("reduce-scatter of unit %d of %d: %w", k+1, s.lay.units, err)
		}
		s.fresh[k] = false
		return nil
	}
	if g.tmp == nil {
		b, err := be.Alloc(s.lay.block)
		if err != nil {
			return fmt.Errorf("policy: allocating a reduction's block: %w", err)
		}
		g.tmp = b
		s.meter.add(int64(s.lay.block))
	}
	if err := s.coll.ReduceScatter(ctx, send, g.tmp); err != nil {
		return fmt.Errorf("reduce-scatter of unit %d of %d: %w", k+1, s.lay.units, err)
	}
	return be.Axpy(1, g.tmp, s.grad[k])
}

// end waits for the reductions, checks that every unit was reduced, and
// frees the staging buffers: between backward passes only the shard is
// held.
func (g *gradStream) end(ctx context.Context) error {
	if g.work != nil {
		close(g.work)
		g.wg.Wait()
		g.work = nil
	}
	err := g.err
	if err == nil {
		for k, n := range g.left {
			if n != 0 {
				err = fmt.Errorf("policy: the backward left %d gradient floats of unit %d of %d unreduced", n, k+1, len(g.left))
				break
			}
		}
	}
	for k, b := range g.staging {
		if b != nil {
			g.spare = append(g.spare, b)
			g.staging[k] = nil
		}
	}
	g.freeSpare()
	return err
}

// freeSpare frees the staging spares and the reduction's block.
func (g *gradStream) freeSpare() {
	be := g.s.core.model.be
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, b := range g.spare {
		g.s.meter.add(-int64(b.Len()))
		_ = be.Free(b)
	}
	g.spare = nil
	if g.tmp != nil {
		g.s.meter.add(-int64(g.tmp.Len()))
		_ = be.Free(g.tmp)
		g.tmp = nil
	}
}
