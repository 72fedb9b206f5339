package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/agentrl/agentrl/device"
	"github.com/agentrl/agentrl/gpu"
	"github.com/agentrl/agentrl/lm"
	"github.com/agentrl/agentrl/policy"
	"github.com/agentrl/agentrl/policy/backend"
)

// phases are the times of one training step, each ended by waiting for
// the device: forward (with the log-probs on the host, as every trainer
// needs them), backward, and optimizer (gradient-norm clipping, AdamW,
// zeroing the gradients).
type phases struct{ fwd, bwd, opt time.Duration }

func (p phases) step() time.Duration { return p.fwd + p.bwd + p.opt }

// runResult is one side's measurement of a shape: the phases of every
// timed step, the peak device memory (0 when unknown), and for agentrl
// the device work per step and the kernel profile.
type runResult struct {
	steps        []phases
	peakInUse    uint64 // bytes; torch.cuda.max_memory_allocated on the PyTorch side
	peakReserved uint64 // bytes; torch.cuda.max_memory_reserved
	perStep      *gpu.Counters
	kernels      []gpu.KernelTime // one step's, largest first
	version      string           // the PyTorch side's versions
	err          error
}

// medians returns the median of each phase and of the step over r.steps.
func (r runResult) medians() (step time.Duration, p phases) {
	if len(r.steps) == 0 {
		return 0, phases{}
	}
	med := func(f func(phases) time.Duration) time.Duration {
		v := make([]time.Duration, len(r.steps))
		for i, s := range r.steps {
			v[i] = f(s)
		}
		slices.Sort(v)
		n := len(v)
		if n%2 == 1 {
			return v[n/2]
		}
		return (v[n/2-1] + v[n/2]) / 2
	}
	return med(phases.step), phases{med(func(p phases) time.Duration { return p.fwd }),
		med(func(p phases) time.Duration { return p.bwd }), med(func(p phases) time.Duration { return p.opt })}
}

// gpuBackend is what the benchmark uses of package gpu's Backend beyond
// backend.Backend; the CPU backend has none of it.
type gpuBackend interface {
	Synchronize() error
	Stats() gpu.CacheStats
	ResetPeak() error
	Counters() (gpu.Counters, error)
	ResetCounters() error
	Profile() ([]gpu.KernelTime, error)
	Close() error
}

// openBackend opens the device the options name: the CPU backend, or a
// CUDA device in the given precision, profiled or not.
func openBackend(ctx context.Context, o options, profile bool) (backend.Backend, error) {
	if o.device.Kind == device.CPU {
		if profile {
			return nil, errors.New("-kernels needs a CUDA device")
		}
		return device.NewCPU(0), nil
	}
	be, err := gpu.New(ctx, gpu.WithDevice(o.device.Ordinal), gpu.WithPrecision(o.precision), gpu.WithProfile(profile))
	if err != nil {
		return nil, err
	}
	return be, nil
}

func closeBackend(be backend.Backend) error {
	if g, ok := be.(gpuBackend); ok {
		return g.Close()
	}
	return nil
}

// waitDevice waits for the device (a no-op on the CPU, whose calls return done).
func waitDevice(be backend.Backend) error {
	if g, ok := be.(gpuBackend); ok {
		return g.Synchronize()
	}
	return nil
}

// trainer is one model with its optimizer and the batch it trains on.
type trainer struct {
	be    backend.Backend
	m     *policy.Model
	opt   *policy.DeviceAdamW
	batch lm.TokenBatch
	grads [][]float32 // dL/dlogp of the token-mean negative log-likelihood
}

// newTrainer makes the shape's model with random weights drawn on the
// device (policy.WithBackendInit), AdamW with its state on the device,
// and a batch of random tokens.
func newTrainer(be backend.Backend, s shape, seed uint64, checkpoint bool) (*trainer, error) {
	opts := []policy.ModelOption{policy.WithBackend(be), policy.WithBackendInit()}
	if checkpoint {
		opts = append(opts, policy.WithActivationCheckpointing())
	}
	m, err := policy.New(s.cfg, seed, opts...)
	if err != nil {
		return nil, err
	}
	opt, err := m.NewDeviceAdamW(policy.AdamWConfig{LR: 1e-5, WeightDecay: 0.01})
	if err != nil {
		_ = m.Close()
		return nil, err
	}
	tr := &trainer{be: be, m: m, opt: opt}
	tr.batch, tr.grads = randomBatch(s, s.cfg.VocabSize, seed)
	return tr, nil
}

// randomBatch returns the shape's batch of uniformly random tokens and
// the gradient of L = −mean log p over every predicted token (positions
// 1…len−1), which is what F.cross_entropy with mean reduction, the
// PyTorch side's loss, differentiates to.
func randomBatch(s shape, vocab int, seed uint64) (lm.TokenBatch, [][]float32) {
	rng := rand.New(rand.NewPCG(seed, 0xba7c4))
	toks := make([][]int, s.seqs)
	grads := make([][]float32, s.seqs)
	g := float32(-1 / float64(s.seqs*(s.seqLen-1)))
	for b := range toks {
		toks[b] = make([]int, s.seqLen)
		grads[b] = make([]float32, s.seqLen)
		for i := range toks[b] {
			toks[b][i] = rng.IntN(vocab)
			if i > 0 {
				grads[b][i] = g
			}
		}
	}
	return lm.TokenBatch{Tokens: toks}, grads
}

func (tr *trainer) close() error { return tr.m.Close() }

// step runs one training step and times its phases.
func (tr *trainer) step(ctx context.Context) (phases, error) {
	var p phases
	t0 := time.Now()
	_, back, err := tr.m.Forward(ctx, tr.batch, true)
	if err != nil {
		return p, fmt.Errorf("forward: %w", err)
	}
	if err := waitDevice(tr.be); err != nil {
		return p, err
	}
	t1 := time.Now()
	if err := back(ctx, tr.grads, nil); err != nil {
		return p, fmt.Errorf("backward: %w", err)
	}
	if err := waitDevice(tr.be); err != nil {
		return p, err
	}
	t2 := time.Now()
	if _, err := tr.opt.ClipGradNorm(1); err != nil {
		return p, fmt.Errorf("clip: %w", err)
	}
	if _, err := tr.opt.Step(); err != nil {
		return p, fmt.Errorf("adamw: %w", err)
	}
	if err := tr.opt.ZeroGrad(); err != nil {
		return p, fmt.Errorf("zero grad: %w", err)
	}
	if err := waitDevice(tr.be); err != nil {
		return p, err
	}
	t3 := time.Now()
	return phases{fwd: t1.Sub(t0), bwd: t2.Sub(t1), opt: t3.Sub(t2)}, nil
}

// runAgentrl measures the shape on agentrl: warm-up steps, then timed
// steps with the device work counted; the peak memory covers the model,
// the optimizer and every step. With -kernels it then profiles one more
// step on a profiled backend of its own (the events slow the calls a
// little, so the timed steps run without them).
func runAgentrl(ctx context.Context, o options, s shape) runResult {
	r, err := timeAgentrl(ctx, o, s)
	if err != nil {
		r.err = err
		return r
	}
	if o.kernels {
		r.kernels, r.err = profileAgentrl(ctx, o, s)
	}
	return r
}

func timeAgentrl(ctx context.Context, o options, s shape) (r runResult, err error) {
	be, err := openBackend(ctx, o, false)
	if err != nil {
		return r, err
	}
	defer func() { err = errors.Join(err, closeBackend(be)) }()
	g, isGPU := be.(gpuBackend)
	if isGPU {
		if err := g.ResetPeak(); err != nil {
			return r, err
		}
	}
	o.logf("%s: agentrl on %s, %d × %d tokens", s.name, be.Name(), s.seqs, s.seqLen)
	tr, err := newTrainer(be, s, o.seed, o.ckpt)
	if err != nil {
		return r, err
	}
	defer func() { err = errors.Join(err, tr.close()) }()
	for i := range o.warmup {
		p, err := tr.step(ctx)
		if err != nil {
			return r, err
		}
		o.logf("%s: agentrl warm-up %d: %v", s.name, i+1, p.step().Round(time.Millisecond))
	}
	if isGPU {
		if err := g.ResetCounters(); err != nil {
			return r, err
		}
	}
	for i := range o.steps {
		p, err := tr.step(ctx)
		if err != nil {
			return r, err
		}
		o.logf("%s: agentrl step %d: %v (forward %v, backward %v, optimizer %v)", s.name, i+1,
			p.step().Round(time.Millisecond), p.fwd.Round(time.Millisecond), p.bwd.Round(time.Millisecond), p.opt.Round(time.Millisecond))
		r.steps = append(r.steps, p)
	}
	if isGPU {
		c, err := g.Counters()
		if err != nil {
			return r, err
		}
		per := perStep(c, o.steps)
		r.perStep = &per
		st := g.Stats()
		r.peakInUse, r.peakReserved = st.PeakInUse, st.PeakReserved
	}
	return r, nil
}

// perStep divides the counts of n steps by n (rounding down).
func perStep(c gpu.Counters, n int) gpu.Counters {
	d := uint64(max(n, 1))
	out := gpu.Counters{
		Launches: c.Launches / d, Gemms: c.Gemms / d, HtoD: c.HtoD / d, HtoDBytes: c.HtoDBytes / d,
		DtoH: c.DtoH / d, DtoHBytes: c.DtoHBytes / d, StreamSyncs: c.StreamSyncs / d,
		DeviceAllocs: c.DeviceAllocs / d, DeviceFrees: c.DeviceFrees / d, Kernels: map[string]uint64{},
	}
	for k, v := range c.Kernels {
		out.Kernels[k] = v / d
	}
	return out
}

func profileAgentrl(ctx context.Context, o options, s shape) (ks []gpu.KernelTime, err error) {
	be, err := openBackend(ctx, o, true)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, closeBackend(be)) }()
	g := be.(gpuBackend)
	tr, err := newTrainer(be, s, o.seed, o.ckpt)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, tr.close()) }()
	if _, err := tr.step(ctx); err != nil { // warm-up: allocator, weight copies
		return nil, err
	}
	if _, err := g.Profile(); err != nil {
		return nil, err
	}
	if _, err := tr.step(ctx); err != nil {
		return nil, err
	}
	return g.Profile()
}
