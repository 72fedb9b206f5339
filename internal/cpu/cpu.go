package cpu

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/agentrl/agentrl/internal/gemm"
	"github.com/agentrl/agentrl/policy/backend"
)

// Backend is the CPU backend. Create it with New.
type Backend struct {
	workers int
	par     *gemm.Engine // products that may use every worker
	ser     *gemm.Engine // products run inside already-parallel loops
	// samplers keeps SampleRows' samplers and their vocabulary-sized
	// buffers between calls.
	samplers sync.Pool
	// mem keeps freed buffers' arrays for later allocations.
	mem          pool
	batchVariant bool // WithBatchVariantFewRows
}

var _ backend.Backend = (*Backend)(nil)

// Option configures a Backend.
type Option func(*config)

type config struct {
	workers      int
	generic      bool
	batchVariant bool
}

// WithWorkers sets how many goroutines a kernel may use (default
// runtime.GOMAXPROCS(0)); values below 1 mean 1.
func WithWorkers(n int) Option { return func(c *config) { c.workers = max(n, 1) } }

// WithGenericGemm forces the pure-Go GEMM micro-kernel (the code path of
// the noasm build tag and of CPUs without AVX2/FMA).
func WithGenericGemm() Option { return func(c *config) { c.generic = true } }

// WithBatchVariantFewRows gives up batch invariance in the products of
// at most six rows with the weight stored n×k (decoding a few sequences),
// for about 2.5 times their speed (gemm.WithBatchVariantFewRows): the
// sampler's log-probabilities then differ from the trainer's by float32
// rounding instead of being equal to the bit.
func WithBatchVariantFewRows() Option { return func(c *config) { c.batchVariant = true } }

// New returns a CPU backend.
func New(opts ...Option) *Backend {
	c := config{workers: runtime.GOMAXPROCS(0)}
	for _, o := range opts {
		o(&c)
	}
	popts := []gemm.Option{gemm.WithWorkers(c.workers)}
	sopts := []gemm.Option{gemm.WithWorkers(1)}
	if c.generic {
		popts = append(popts, gemm.WithGeneric())
		sopts = append(sopts, gemm.WithGeneric())
	}
	if c.batchVariant {
		popts = append(popts, gemm.WithBatchVariantFewRows())
		sopts = append(sopts, gemm.WithBatchVariantFewRows())
	}
	return &Backend{workers: c.workers, par: gemm.New(popts...), ser: gemm.New(sopts...), batchVariant: c.batchVariant}
}

// Name reports the backend, its GEMM kernel and its worker count, and
// "batch-variant few rows" under WithBatchVariantFewRows.
func (be *Backend) Name() string {
	if be.batchVariant {
		return fmt.Sprintf("cpu(%s, %d workers, batch-variant few rows)", be.par.KernelName(), be.workers)
	}
	return fmt.Sprintf("cpu(%s, %d workers)", be.par.KernelName(), be.workers)
}

// buffer is the CPU Buffer: a Go slice and the backend that made it.
type buffer struct {
	owner *Backend
	n     int
	data  []float32
	freed atomic.Bool
}

func (b *buffer) Len() int { return b.n }

// view returns the data behind b, or an ErrBuffer error when b is a
// foreign or freed buffer. A nil b gives a nil slice and no error: whether
// nil is allowed is the shape check's business.
func (be *Backend) view(name string, b backend.Buffer) ([]float32, error) {
	if b == nil {
		return nil, nil
	}
	cb, ok := b.(*buffer)
	if !ok || cb == nil || cb.owner != be {
		return nil, fmt.Errorf("%w: %s was not allocated by this backend", backend.ErrBuffer, name)
	}
	if cb.freed.Load() {
		return nil, fmt.Errorf("%w: %s has been freed", backend.ErrBuffer, name)
	}
	return cb.data, nil
}

// views resolves several buffers of one call (op names it in errors).
func (be *Backend) views(op string, bufs ...backend.Buffer) ([][]float32, error) {
	out := make([][]float32, len(bufs))
	for i, b := range bufs {
		if b == nil {
			continue
		}
		cb, ok := b.(*buffer)
		if !ok || cb == nil || cb.owner != be || cb.freed.Load() {
			_, err := be.view(fmt.Sprintf("%s argument %d", op, i+1), b)
			return nil, err
		}
		out[i] = cb.data
	}
	return out, nil
}

// Alloc returns a zeroed buffer of n elements.
func (be *Backend) Alloc(n int) (backend.Buffer, error) {
	if n < 0 {
		return nil, fmt.Errorf("%w: alloc of %d elements", backend.ErrShape, n)
	}
	return &buffer{owner: be, n: n, data: be.mem.get(n)}, nil
}

// Free releases b's memory. A large buffer's array is kept for later
// allocations of about its size (see pool), a small one's goes to the
// garbage collector.
func (be *Backend) Free(b backend.Buffer) error {
	if _, err := be.view("free", b); err != nil {
		return err
	}
	if b == nil {
		return fmt.Errorf("%w: free of a nil buffer", backend.ErrBuffer)
	}
	cb := b.(*buffer)
	if cb.freed.Swap(true) {
		return fmt.Errorf("%w: free of a freed buffer", backend.ErrBuffer)
	}
	be.mem.put(cb.data)
	cb.data = nil
	return nil
}

func rangeErr(op string, off, n, length int) error {
	if off < 0 || n < 0 || off+n > length {
		return fmt.Errorf("%w: %s of %d elements at offset %d in a buffer of %d", backend.ErrShape, op, n, off, length)
	}
	return nil
}

// Upload copies src into dst[off:].
func (be *Backend) Upload(dst backend.Buffer, off int, src []float32) error {
	d, err := be.view("upload dst", dst)
	if err != nil {
		return err
	}
	if dst == nil {
		return fmt.Errorf("%w: upload to a nil buffer", backend.ErrBuffer)
	}
	if err := rangeErr("upload", off, len(src), len(d)); err != nil {
		return err
	}
	copy(d[off:], src)
	return nil
}

// Download copies src[off:off+len(dst)] into dst.
func (be *Backend) Download(dst []float32, src backend.Buffer, off int) error {
	s, err := be.view("download src", src)
	if err != nil {
		return err
	}
	if src == nil {
		return fmt.Errorf("%w: download from a nil buffer", backend.ErrBuffer)
	}
	if err := rangeErr("download", off, len(dst), len(s)); err != nil {
		return err
	}
	copy(dst, s[off:])
	return nil
}

// Copy copies n elements from src[srcOff:] to dst[dstOff:].
func (be *Backend) Copy(dst backend.Buffer, dstOff int, src backend.Buffer, srcOff, n int) error {
	v, err := be.views("copy", dst, src)
	if err != nil {
		return err
	}
	if dst == nil || src == nil {
		return fmt.Errorf("%w: copy with a nil buffer", backend.ErrBuffer)
	}
	if err := rangeErr("copy destination", dstOff, n, len(v[0])); err != nil {
		return err
	}
	if err := rangeErr("copy source", srcOff, n, len(v[1])); err != nil {
		return err
	}
	if dst == src && n > 0 && dstOff < srcOff+n && srcOff < dstOff+n {
		return fmt.Errorf("%w: copy ranges [%d,%d) and [%d,%d) of one buffer overlap", backend.ErrShape, srcOff, srcOff+n, dstOff, dstOff+n)
	}
	copy(v[0][dstOff:dstOff+n], v[1][srcOff:srcOff+n])
	return nil
}

// Fill sets every element of b to val.
func (be *Backend) Fill(b backend.Buffer, val float32) error {
	d, err := be.view("fill", b)
	if err != nil {
		return err
	}
	if b == nil {
		return fmt.Errorf("%w: fill of a nil buffer", backend.ErrBuffer)
	}
	be.parallelFor(len(d), 1<<15, func(lo, hi int) {
		s := d[lo:hi]
		if val == 0 {
			clear(s)
			return
		}
		for i := range s {
			s[i] = val
		}
	})
	return nil
}

// parallelFor splits [0, n) into contiguous ranges of at least grain
// items over the workers.
func (be *Backend) parallelFor(n, grain int, f func(lo, hi int)) {
	w := min(be.workers, n/max(grain, 1))
	if w <= 1 {
		f(0, n)
		return
	}
	var wg sync.WaitGroup
	for t := 1; t < w; t++ {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			f(lo, hi)
		}(t*n/w, (t+1)*n/w)
	}
	f(0, n/w)
	wg.Wait()
}

// parallelTasks runs f(i) for i in [0, n) on up to workers goroutines,
// each task taken from a shared counter (tasks of uneven cost, such as
// attention heads of sequences of different lengths, balance themselves).
// f receives the index of the goroutine running it, for per-worker scratch.
func (be *Backend) parallelTasks(n int, f func(worker, task int)) {
	w := min(be.workers, n)
	if w <= 1 {
		for i := range n {
			f(0, i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for t := range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				f(t, i)
			}
		}()
	}
	wg.Wait()
}
