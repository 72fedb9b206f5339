package policy

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"

	"github.com/agentrl/agentrl/internal/atomicfile"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy/backend"
)

// Optimizer is what the trainers step: AdamW over host parameters
// (*AdamW, NewAdamW) or over a model's backend-resident training state
// (*DeviceAdamW, Model.NewDeviceAdamW). Both compute the same update
// (backend.AdamWUpdate) and write the same state file.
type Optimizer interface {
	// Step applies one update from the gradients and returns the
	// learning rate it used; it does not clear the gradients.
	Step() (lr float64, err error)
	// LR is the learning rate the next Step will use.
	LR() float64
	// Steps is the number of updates applied so far.
	Steps() int64
	// Config returns the hyperparameters, zero fields resolved.
	Config() AdamWConfig
	// ZeroGrad sets every gradient to zero.
	ZeroGrad() error
	// GradNorm is the L2 norm of all gradients together (float64
	// accumulation); NaN or Inf when a gradient is not finite.
	GradNorm() (float64, error)
	// ClipGradNorm scales the gradients to a joint norm of at most
	// maxNorm and returns the norm before, as the package function
	// ClipGradNorm (an ErrNonFinite norm leaves them unchanged).
	ClipGradNorm(maxNorm float64) (float64, error)
	// SaveStateFile and LoadStateFile write and read the moments and
	// step count (StateFileName in dir).
	SaveStateFile(dir string) error
	LoadStateFile(dir string) error
	// Params are the parameters it updates, as host slices holding
	// their current values (what a checkpoint saves).
	Params() ([]lm.Param, error)
	// LoadParams calls load with the parameters to write them (a
	// checkpoint's restore); the writes take effect when it returns.
	LoadParams(load func([]lm.Param) error) error
}

var (
	_ Optimizer = (*AdamW)(nil)
	_ Optimizer = (*DeviceAdamW)(nil)
)

// Params returns the parameters the optimizer updates (the slices it
// was made with).
func (o *AdamW) Params() ([]lm.Param, error) { return append([]lm.Param(nil), o.params...), nil }

// LoadParams calls load with the optimizer's params, which it writes in
// place.
func (o *AdamW) LoadParams(load func([]lm.Param) error) error {
	return load(append([]lm.Param(nil), o.params...))
}

// Memory counts the host slices AdamW holds: the parameters' values and
// gradients and the moments. AdamW sees no activations (0).
func (o *AdamW) Memory() (Memory, error) {
	var mem Memory
	for i, p := range o.params {
		mem.Weights += 4 * int64(len(p.Data))
		mem.Gradients += 4 * int64(len(p.Grad))
		mem.Optimizer += 4 * int64(len(o.m[i])+len(o.v[i]))
	}
	mem.GradientsPeak = mem.Gradients
	return mem, nil
}

// ZeroGrad sets the optimizer's gradients to zero (ZeroGrad of its params).
func (o *AdamW) ZeroGrad() error {
	ZeroGrad(o.params)
	return nil
}

// GradNorm is GradNorm of the optimizer's params.
func (o *AdamW) GradNorm() (float64, error) { return GradNorm(o.params), nil }

// ClipGradNorm is ClipGradNorm of the optimizer's params.
func (o *AdamW) ClipGradNorm(maxNorm float64) (float64, error) {
	return ClipGradNorm(o.params, maxNorm)
}

// DeviceAdamW is AdamW whose whole training state lives where the model
// computes: the trainable weights, their gradients and the moments are
// backend buffers, the update and the gradient norm run as backend kernels
// (backend.Optimizer), and nothing crosses to the host per step. On a GPU
// that removes the per-step upload of every weight and download of every
// gradient; on the CPU backend it removes the same memcpys. The update is
// backend.AdamWUpdate, bit for bit the one NewAdamW's optimizer makes
// from the same gradients, and the state file is the same, so either can
// resume the other's run. One backward's gradients are the same too; over
// several accumulated backward passes a tied embedding's two
// contributions are summed in another order (float32 rounding).
//
// A DeviceAdamW is not safe for concurrent use; its model may be.
type DeviceAdamW struct {
	model    *Model
	opt      backend.Optimizer
	cfg      AdamWConfig
	params   []*param // the model's trainable parameters, in Params order
	mom, vel []backend.Buffer
	step     int64
	// shard is the sharded optimizer this one is the core of (its
	// model, parameters, step count and lock; no moments of its own):
	// nil for a DeviceAdamW.
	shard *ShardedAdamW
	// actPeak is the most bytes of activations a training pass of the
	// model has held at once since this optimizer was made.
	actPeak int64
}

// NewDeviceAdamW moves the model's training state to its backend, which
// must implement backend.Optimizer (the CPU and CUDA backends do; another
// is an error wrapping errors.ErrUnsupported), and returns the optimizer
// over it. From then on Params, Save and SaveAdapter copy from the
// backend when they are called (attaching an adapter ends the optimizer:
// the adapters' training makes its own), and the model is trained
// through its DeviceAdamW only (an AdamW over Params
// would update host copies that are not uploaded again). A model has one
// DeviceAdamW at a time: a new one, with fresh moments, replaces the
// previous, whose methods then fail.
func (m *Model) NewDeviceAdamW(cfg AdamWConfig) (*DeviceAdamW, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	opt, ok := m.be.(backend.Optimizer)
	if !ok {
		return nil, fmt.Errorf("%w: backend %s cannot run the optimizer (backend.Optimizer)", errors.ErrUnsupported, m.be.Name())
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.devOpt != nil {
		// A new training stage (RL after SFT) starts with fresh moments;
		// the previous optimizer stops working.
		m.devOpt.free()
		m.devOpt = nil
	}
	if m.w.closed() {
		return nil, fmt.Errorf("%w: the model is closed", ErrInput)
	}
	o := &DeviceAdamW{model: m, opt: opt, cfg: cfg, params: m.w.trainable()}
	fail := func(err error) (*DeviceAdamW, error) {
		o.free()
		return nil, err
	}
	for _, p := range o.params {
		for _, dst := range []*[]backend.Buffer{&o.mom, &o.vel} {
			b, err := m.be.Alloc(len(p.data))
			if err != nil {
				return fail(fmt.Errorf("policy: allocating the moments of %s: %w", p.spec.Name, err))
			}
			*dst = append(*dst, b)
		}
	}
	// The host held the state until now: the next computation uploads
	// the weights and the gradients accumulated so far.
	m.w.moveToBackend()
	m.devOpt = o
	return o, nil
}

// free releases the moments (a sharded optimizer's shards), after
// which the optimizer's methods fail.
func (o *DeviceAdamW) free() {
	for _, b := range append(o.mom, o.vel...) {
		_ = o.model.be.Free(b)
	}
	o.mom, o.vel = nil, nil
	if o.shard != nil {
		o.shard.free()
		o.shard = nil
	}
}

// ended reports whether free was called.
func (o *DeviceAdamW) ended() bool { return o.mom == nil && o.shard == nil }

// Config returns the hyperparameters, zero fields resolved.
func (o *DeviceAdamW) Config() AdamWConfig { return o.cfg }

// Steps is the number of updates applied so far.
func (o *DeviceAdamW) Steps() int64 { return o.step }

// LR is the learning rate the next Step will use.
func (o *DeviceAdamW) LR() float64 { return o.cfg.lrAt(o.step) }

// locked runs f with the model's lock held and its backend buffers
// current (handed-out host slices uploaded), allocating missing
// gradients (zero).
func (o *DeviceAdamW) locked(f func() error) error {
	m := o.model
	m.mu.Lock()
	defer m.mu.Unlock()
	if o.ended() {
		return fmt.Errorf("%w: the device optimizer has ended: its model was closed, took an adapter or a newer optimizer, or gave its training to the host (Model.Params does; DeviceAdamW.Params is the view that does not)", ErrInput)
	}
	if err := m.w.sync(); err != nil {
		return err
	}
	for _, p := range o.params {
		if m.w.streamGrads {
			break // the model holds no gradient between backward passes
		}
		if err := m.w.gradBuffer(p); err != nil {
			return err
		}
	}
	return f()
}

// Memory is what a model's training holds in memory, by kind, in bytes,
// counted from the buffers (or host slices) allocated when it is
// called — not computed from the model's shape.
type Memory struct {
	// Weights are the model's weight buffers, trainable and frozen (the
	// float32 values the forward reads; a GPU's bf16 copies of them, its
	// weight cache, are the backend's and not counted).
	Weights int64
	// Gradients are the gradient buffers held now, between updates: the
	// whole gradient, or this rank's shard of it (ShardedAdamW at stage
	// 2, whose model holds none outside a backward).
	Gradients int64
	// GradientsPeak is the most gradient bytes held at once so far: with
	// streamed gradients the shard plus the layers' buffers of a
	// backward and the reductions' staging; otherwise Gradients.
	GradientsPeak int64
	// Optimizer is the optimizer's state: AdamW's two moments, or this
	// rank's shard of them.
	Optimizer int64
	// Master is the float32 master weights held apart from the weights
	// the forward reads: this rank's shard of them with
	// ShardOptions.BF16Weights (whose Weights are then bf16, 2 bytes a
	// parameter); 0 otherwise, the weights being their own master.
	Master int64
	// Activations is the most a training pass of the model has held at
	// once so far (its forward's activations kept for the backward, with
	// the backward's own buffers); 0 before the first, and for a model
	// this package does not run.
	Activations int64
}

// weightBytes sums the model's weight buffers; the caller holds the lock.
func (o *DeviceAdamW) weightBytes() int64 {
	hw, _ := o.model.be.(backend.BF16Weights)
	var n int64
	for _, p := range o.model.w.all() {
		switch {
		case p.w == nil:
		case hw != nil && hw.IsBF16(p.w):
			n += 2 * int64(p.w.Len())
		default:
			n += 4 * int64(p.w.Len())
		}
	}
	return n
}

// bufferBytes sums the lengths of bufs, 4 bytes a float.
func bufferBytes(bufs ...backend.Buffer) int64 {
	var n int64
	for _, b := range bufs {
		if b != nil {
			n += 4 * int64(b.Len())
		}
	}
	return n
}

// Memory counts the backend buffers of the training state: the model's
// weights and gradients, the moments, and the activations' peak.
func (o *DeviceAdamW) Memory() (Memory, error) {
	var mem Memory
	err := o.locked(func() error {
		mem.Weights = o.weightBytes()
		for _, p := range o.params {
			mem.Gradients += bufferBytes(p.dw)
		}
		mem.GradientsPeak = mem.Gradients
		mem.Optimizer = bufferBytes(o.mom...) + bufferBytes(o.vel...)
		mem.Activations = o.actPeak
		return nil
	})
	return mem, err
}

// Step applies one AdamW update on the backend and returns the learning
// rate it used.
func (o *DeviceAdamW) Step() (float64, error) {
	lr := o.LR()
	if math.IsNaN(lr) || math.IsInf(lr, 0) || lr < 0 {
		return 0, fmt.Errorf("%w: learning rate %g at step %d", ErrNonFinite, lr, o.step)
	}
	c := o.cfg
	s := backend.AdamWStep{LR: lr, Beta1: c.Beta1, Beta2: c.Beta2, Eps: c.Eps, WeightDecay: c.WeightDecay, Step: o.step + 1}
	err := o.locked(func() error {
		for i, p := range o.params {
			if err := o.opt.AdamW(s, p.w, p.dw, o.mom[i], o.vel[i]); err != nil {
				return fmt.Errorf("policy: AdamW on %s: %w", p.spec.Name, err)
			}
		}
		o.model.w.stepped()
		return nil
	})
	if err != nil {
		return 0, err
	}
	o.step++
	return lr, nil
}

// ZeroGrad sets the gradients on the backend to zero.
func (o *DeviceAdamW) ZeroGrad() error {
	return o.locked(func() error {
		for _, p := range o.params {
			if err := o.model.be.Fill(p.dw, 0); err != nil {
				return err
			}
		}
		o.model.w.gradsWritten()
		return nil
	})
}

// GradNorm is the joint L2 norm of the gradients, computed on the backend.
func (o *DeviceAdamW) GradNorm() (float64, error) {
	var norm float64
	err := o.locked(func() error {
		var err error
		norm, err = o.gradNorm()
		return err
	})
	return norm, err
}

func (o *DeviceAdamW) gradNorm() (float64, error) {
	grads := make([]backend.Buffer, len(o.params))
	for i, p := range o.params {
		grads[i] = p.dw
	}
	return o.opt.GradNorm(grads...)
}

// ReduceGrads calls reduce with the model's backend and the gradient
// buffers of the trainable parameters, in Params order, under the
// model's lock; what reduce writes into them is the gradient from then
// on. A data-parallel trainer sums the ranks' gradients through it
// (package dist: NCCL on the GPU's buffers, MPI through host copies).
func (o *DeviceAdamW) ReduceGrads(reduce func(be backend.Backend, grads []backend.Buffer) error) error {
	return o.locked(func() error {
		grads := make([]backend.Buffer, len(o.params))
		for i, p := range o.params {
			grads[i] = p.dw
		}
		err := reduce(o.model.be, grads)
		o.model.w.gradsWritten()
		return err
	})
}

// ClipGradNorm scales the gradients on the backend so that their joint
// norm is at most maxNorm, with ClipGradNorm's formula (scale
// min(1, maxNorm/(norm + 1e-6))), and returns the norm before. A NaN or
// infinite norm returns ErrNonFinite and leaves the gradients unchanged.
func (o *DeviceAdamW) ClipGradNorm(maxNorm float64) (float64, error) {
	if !(maxNorm > 0) {
		return 0, fmt.Errorf("policy: ClipGradNorm: maxNorm = %g, want > 0", maxNorm)
	}
	var norm float64
	err := o.locked(func() error {
		var err error
		if norm, err = o.gradNorm(); err != nil {
			return err
		}
		if math.IsNaN(norm) || math.IsInf(norm, 0) {
			return fmt.Errorf("%w: gradient norm %g", ErrNonFinite, norm)
		}
		if coef := maxNorm / (norm + 1e-6); coef < 1 {
			for _, p := range o.params {
				if err := o.opt.Scale(float32(coef), p.dw); err != nil {
					return err
				}
			}
			o.model.w.gradsWritten()
		}
		return nil
	})
	return norm, err
}

// Params copies the backend's current weights and gradients into the
// model's host slices and returns them, without ending the optimizer:
// what a checkpoint saves. The copies are a snapshot; to change the
// parameters, use LoadParams.
func (o *DeviceAdamW) Params() ([]lm.Param, error) {
	var ps []lm.Param
	err := o.locked(func() error {
		if err := o.model.w.pull(true); err != nil {
			return err
		}
		ps = o.model.w.views()
		return nil
	})
	return ps, err
}

// LoadParams calls load with the current parameters (as Params) and
// uploads what it wrote: a checkpoint's restore.
func (o *DeviceAdamW) LoadParams(load func([]lm.Param) error) error {
	return o.locked(func() error {
		if err := o.model.w.pull(true); err != nil {
			return err
		}
		if err := load(o.model.w.views()); err != nil {
			// Partly written host copies: the backend's values stay, and
			// the next view downloads them again.
			o.model.w.stepped()
			o.model.w.gradsWritten()
			return err
		}
		return o.model.w.push()
	})
}

// hostState returns an AdamW over host copies of the moments, for the
// state file's reader and writer; withMoments downloads them.
func (o *DeviceAdamW) hostState(withMoments bool) (*AdamW, error) {
	h := &AdamW{cfg: o.cfg, step: o.step}
	for i, p := range o.params {
		n := len(p.data)
		h.params = append(h.params, lm.Param{Name: p.spec.Name, Data: make([]float32, n), Grad: make([]float32, n)})
		mv := [2][]float32{make([]float32, n), make([]float32, n)}
		if withMoments {
			for j, b := range []backend.Buffer{o.mom[i], o.vel[i]} {
				if err := o.model.be.Download(mv[j], b, 0); err != nil {
					return nil, fmt.Errorf("policy: downloading the moments of %s: %w", p.spec.Name, err)
				}
			}
		}
		h.m, h.v = append(h.m, mv[0]), append(h.v, mv[1])
	}
	return h, nil
}

// SaveState writes the moments and step count to w in AdamW's format.
func (o *DeviceAdamW) SaveState(w io.Writer) error {
	return o.locked(func() error {
		h, err := o.hostState(true)
		if err != nil {
			return err
		}
		return h.SaveState(w)
	})
}

// LoadState reads a state written by SaveState (or by AdamW.SaveState
// over the same parameters) and uploads it.
func (o *DeviceAdamW) LoadState(r io.ReaderAt, size int64) error {
	return o.locked(func() error {
		h, err := o.hostState(false)
		if err != nil {
			return err
		}
		if err := h.LoadState(r, size); err != nil {
			return err
		}
		for i := range o.params {
			if err := o.model.be.Upload(o.mom[i], 0, h.m[i]); err != nil {
				return err
			}
			if err := o.model.be.Upload(o.vel[i], 0, h.v[i]); err != nil {
				return err
			}
		}
		o.step = h.step
		return nil
	})
}

// SaveStateFile writes the state to dir/optimizer.safetensors as
// AdamW.SaveStateFile does.
func (o *DeviceAdamW) SaveStateFile(dir string) error { return saveStateFile(dir, o.SaveState) }

// LoadStateFile reads dir/optimizer.safetensors, or a sharded state, as
// AdamW.LoadStateFile does: the moments and step count, not a sharded
// state's master weights.
func (o *DeviceAdamW) LoadStateFile(dir string) error { return loadStateFile(dir, o.LoadState) }

// saveStateFile writes dir/StateFileName atomically and durably, mode
// 0600, and removes a sharded state's index left in dir.
func saveStateFile(dir string, write func(io.Writer) error) error {
	if err := atomicfile.Write(filepath.Join(dir, StateFileName), 0o600, write); err != nil {
		return fmt.Errorf("policy: optimizer state: %w", err)
	}
	if err := os.Remove(filepath.Join(dir, ShardStateIndex)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("policy: removing a stale %s: %w", ShardStateIndex, err)
	}
	return nil
}

// loadStateFile reads dir/StateFileName with load, or the sharded state
// in dir (ShardStateIndex), consolidated, whatever the number of ranks
// that wrote it: its moments, without the master weights a state of
// ShardOptions.BF16Weights holds (MasterWeights reads them).
func loadStateFile(dir string, load func(io.ReaderAt, int64) error) error {
	r, err := consolidated(dir)
	if err != nil {
		return err
	}
	if r != nil {
		return load(r, r.Size())
	}
	file, err := os.Open(filepath.Join(dir, StateFileName))
	if err != nil {
		return err
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return err
	}
	return load(file, st.Size())
}
