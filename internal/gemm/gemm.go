package gemm

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// ErrArgs reports a call whose sizes, leading dimensions or slice lengths
// do not describe valid matrices.
var ErrArgs = errors.New("gemm: invalid arguments")

// Block sizes. kc·NR floats of a packed B micro-panel (16 KiB for the AVX2
// kernel) stay in L1 while the micro-kernel streams an A micro-panel past
// it; an MC×KC block of A (~150 KiB) stays in the 512 KiB per-core L2; a
// KC×NC panel of B (3 MiB) lives in the shared L3.
const (
	kc    = 256
	nc    = 3072
	mcMul = 24 // MC = mcMul·MR rows of A per block

	// smallM is the largest row count handled without packing: for decode
	// (one or a few rows) packing B would cost as much as the product.
	smallM = 4
	// serialFlops is the size under which a product runs on one goroutine:
	// below it, starting goroutines costs more than it saves.
	serialFlops = 1 << 18
)

// Engine multiplies matrices with a fixed micro-kernel and degree of
// parallelism. Its zero value is not usable; call New. An Engine is safe
// for concurrent use.
type Engine struct {
	kern    kernel
	workers int
	bufs    sync.Pool // *[]float32 scratch for packed panels
}

// Option configures an Engine.
type Option func(*Engine)

// WithWorkers sets how many goroutines a product may use (default
// runtime.GOMAXPROCS(0)); values below 1 mean 1.
func WithWorkers(n int) Option {
	return func(e *Engine) {
		if n < 1 {
			n = 1
		}
		e.workers = n
	}
}

// WithGeneric forces the pure-Go micro-kernel and vector primitives, as
// the noasm build tag does; tests use it to check the fallback on machines
// that have AVX2.
func WithGeneric() Option {
	return func(e *Engine) { e.kern = genericKernel() }
}

// New returns an Engine using the fastest micro-kernel this CPU supports.
func New(opts ...Option) *Engine {
	e := &Engine{kern: bestKernel(), workers: runtime.GOMAXPROCS(0)}
	for _, o := range opts {
		o(e)
	}
	return e
}

// KernelName names the micro-kernel in use ("avx2-fma-6x16", "generic-4x4").
func (e *Engine) KernelName() string { return e.kern.name }

// ExpShift replaces x[i] by e^(x[i]−shift) and returns Σ_i e^(x[i]−shift)
// accumulated in float64: the exponential pass of a softmax with shift the
// row maximum (or a log-sum-exp). It requires x[i] − shift ≤ 88 (larger
// arguments saturate at e^88 in the vector kernel); results below e^−87.3
// are flushed to zero and NaN propagates.
func (e *Engine) ExpShift(x []float32, shift float32) float64 { return e.kern.expShift(x, shift) }

// Workers reports the goroutine budget of one product.
func (e *Engine) Workers() int { return e.workers }

// Sgemm computes C = alpha·op(A)·op(B) + beta·C on row-major matrices,
// where op(A) is m×k (A stored k×m when transA), op(B) is k×n (B stored
// n×k when transB) and C is m×n; lda, ldb and ldc are row strides. As in
// BLAS, beta == 0 overwrites C without reading it. Accumulation is in
// float32, as in BLAS sgemm.
func (e *Engine) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) error {
	if err := check(transA, transB, m, n, k, len(a), lda, len(b), ldb, len(c), ldc); err != nil {
		return err
	}
	if m == 0 || n == 0 {
		return nil
	}
	if beta != 1 {
		scaleC(m, n, beta, c, ldc)
	}
	if k == 0 || alpha == 0 {
		return nil
	}
	if m <= smallM {
		e.small(transA, transB, m, n, k, alpha, a, lda, b, ldb, c, ldc)
		return nil
	}
	e.blocked(transA, transB, m, n, k, alpha, a, lda, b, ldb, c, ldc)
	return nil
}

func check(transA, transB bool, m, n, k, la, lda, lb, ldb, lc, ldc int) error {
	if m < 0 || n < 0 || k < 0 {
		return fmt.Errorf("%w: negative size m=%d n=%d k=%d", ErrArgs, m, n, k)
	}
	ar, ac := m, k
	if transA {
		ar, ac = k, m
	}
	br, bc := k, n
	if transB {
		br, bc = n, k
	}
	if err := checkMat("A", ar, ac, la, lda); err != nil {
		return err
	}
	if err := checkMat("B", br, bc, lb, ldb); err != nil {
		return err
	}
	return checkMat("C", m, n, lc, ldc)
}

func checkMat(name string, rows, cols, length, ld int) error {
	if ld < max(cols, 1) {
		return fmt.Errorf("%w: %s has %d columns but leading dimension %d", ErrArgs, name, cols, ld)
	}
	if rows == 0 || cols == 0 {
		return nil
	}
	if need := (rows-1)*ld + cols; length < need {
		return fmt.Errorf("%w: %s is %d×%d with stride %d and needs %d elements, has %d", ErrArgs, name, rows, cols, ld, need, length)
	}
	return nil
}

func scaleC(m, n int, beta float32, c []float32, ldc int) {
	for i := range m {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}

// small handles m ≤ smallM without packing. Columns of C are split among
// workers; each computes its slice with dot products (transB: rows of the
// stored B are contiguous) or axpys (B rows contiguous along n).
func (e *Engine) small(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	// Gather the rows of op(A) contiguously, scaled by alpha.
	arows := make([]float32, m*k)
	for i := range m {
		for p := range k {
			var v float32
			if transA {
				v = a[p*lda+i]
			} else {
				v = a[i*lda+p]
			}
			arows[i*k+p] = alpha * v
		}
	}
	run := func(j0, j1 int) {
		if transB {
			var d4 [4]float32
			for i := range m {
				x := arows[i*k : i*k+k]
				j := j0
				for ; j+4 <= j1; j += 4 {
					e.kern.dot4(x, b[j*ldb:], ldb, &d4)
					for r, v := range d4 {
						c[i*ldc+j+r] += v
					}
				}
				for ; j < j1; j++ {
					c[i*ldc+j] += e.kern.dot(x, b[j*ldb:j*ldb+k])
				}
			}
			return
		}
		for i := range m {
			y := c[i*ldc+j0 : i*ldc+j1]
			for p := range k {
				if s := arows[i*k+p]; s != 0 {
					e.kern.axpy(s, b[p*ldb+j0:p*ldb+j1], y)
				}
			}
		}
	}
	w := e.workers
	if 2*m*n*k < serialFlops || w == 1 || n < 2*16 {
		run(0, n)
		return
	}
	chunk := (n + w - 1) / w
	chunk = (chunk + 15) &^ 15
	var wg sync.WaitGroup
	for j0 := 0; j0 < n; j0 += chunk {
		wg.Add(1)
		go func(j0, j1 int) {
			defer wg.Done()
			run(j0, j1)
		}(j0, min(j0+chunk, n))
	}
	wg.Wait()
}

func (e *Engine) getBuf(n int) *[]float32 {
	if p, ok := e.bufs.Get().(*[]float32); ok && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	s := make([]float32, n)
	return &s
}

// blocked is the five-loop GotoBLAS algorithm. For each NC×KC panel of B
// (packed once, by all workers) the MC-row blocks of A — and, when there
// are fewer blocks than workers, column ranges of the panel — are handed
// to workers, which pack their own A block and run the micro-kernel.
func (e *Engine) blocked(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	mr, nr := e.kern.mr, e.kern.nr
	mc := mcMul * mr
	workers := e.workers
	if 2*m*n*k < serialFlops {
		workers = 1
	}
	// Scratch sized to this product, not to the maximal block: attention
	// runs many small products, and the pool empties at every GC.
	bp := e.getBuf(min(k, kc) * ((min(n, nc) + nr - 1) / nr * nr))
	defer e.bufs.Put(bp)
	bpack := *bp

	mBlocks := (m + mc - 1) / mc
	for jc := 0; jc < n; jc += nc {
		ncur := min(nc, n-jc)
		nPanels := (ncur + nr - 1) / nr
		for pc := 0; pc < k; pc += kc {
			kcur := min(kc, k-pc)
			// Pack B in parallel, split by micro-panels.
			parallelRange(workers, nPanels, func(s0, s1 int) {
				packB(transB, b, ldb, pc, kcur, jc, ncur, nr, s0, s1, bpack)
			})
			nSplit := 1
			if mBlocks < workers {
				nSplit = min((workers+mBlocks-1)/mBlocks, nPanels)
			}
			items := mBlocks * nSplit
			var next atomic.Int64
			work := func() {
				ap := e.getBuf((min(m, mc) + mr - 1) / mr * mr * kcur)
				defer e.bufs.Put(ap)
				apack := *ap
				packed := -1
				tile := make([]float32, mr*nr)
				for {
					it := int(next.Add(1) - 1)
					if it >= items {
						return
					}
					ib, js := it/nSplit, it%nSplit
					ic := ib * mc
					mcur := min(mc, m-ic)
					if packed != ib {
						packA(transA, a, lda, ic, mcur, pc, kcur, mr, alpha, apack)
						packed = ib
					}
					s0 := js * nPanels / nSplit
					s1 := (js + 1) * nPanels / nSplit
					e.macro(mcur, ncur, kcur, apack, bpack, c, ic, jc, ldc, s0, s1, tile)
				}
			}
			w := min(workers, items)
			if w <= 1 {
				work()
				continue
			}
			var wg sync.WaitGroup
			for range w - 1 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					work()
				}()
			}
			work()
			wg.Wait()
		}
	}
}

// macro runs the micro-kernel over B micro-panels [s0,s1) and all A
// micro-panels of the packed block, adding into C at (ic, jc).
func (e *Engine) macro(mcur, ncur, kcur int, apack, bpack, c []float32, ic, jc, ldc, s0, s1 int, tile []float32) {
	mr, nr := e.kern.mr, e.kern.nr
	for s := s0; s < s1; s++ {
		j := s * nr
		nw := min(nr, ncur-j)
		bpan := bpack[s*kcur*nr:]
		for i := 0; i < mcur; i += mr {
			mw := min(mr, mcur-i)
			apan := apack[(i/mr)*kcur*mr:]
			off := (ic+i)*ldc + jc + j
			if mw == mr && nw == nr {
				e.kern.micro(kcur, apan, bpan, c[off:], ldc)
				continue
			}
			clear(tile)
			e.kern.micro(kcur, apan, bpan, tile, nr)
			for r := range mw {
				dst := c[off+r*ldc : off+r*ldc+nw]
				src := tile[r*nr : r*nr+nw]
				for q := range dst {
					dst[q] += src[q]
				}
			}
		}
	}
}

// packA copies rows [ic, ic+mcur) × columns [pc, pc+kcur) of op(A), scaled
// by alpha, into micro-panels of mr rows: panel r holds, for each p, the mr
// values A[ic+r·mr+i][pc+p]; rows past mcur are zero.
func packA(transA bool, a []float32, lda, ic, mcur, pc, kcur, mr int, alpha float32, dst []float32) {
	for r := 0; r < mcur; r += mr {
		pan := dst[(r/mr)*kcur*mr : (r/mr+1)*kcur*mr]
		rows := min(mr, mcur-r)
		if rows < mr {
			clear(pan)
		}
		for i := range rows {
			row := ic + r + i
			if transA {
				for p := range kcur {
					pan[p*mr+i] = alpha * a[(pc+p)*lda+row]
				}
				continue
			}
			src := a[row*lda+pc : row*lda+pc+kcur]
			for p, v := range src {
				pan[p*mr+i] = alpha * v
			}
		}
	}
}

// packB copies micro-panels [s0, s1) of rows [pc, pc+kcur) × columns
// [jc, jc+ncur) of op(B): panel s holds, for each p, the nr values
// B[pc+p][jc+s·nr+j]; columns past ncur are zero.
func packB(transB bool, b []float32, ldb, pc, kcur, jc, ncur, nr, s0, s1 int, dst []float32) {
	for s := s0; s < s1; s++ {
		pan := dst[s*kcur*nr : (s+1)*kcur*nr]
		j0 := jc + s*nr
		cols := min(nr, jc+ncur-j0)
		if cols < nr {
			clear(pan)
		}
		if transB {
			for j := range cols {
				src := b[(j0+j)*ldb+pc : (j0+j)*ldb+pc+kcur]
				for p, v := range src {
					pan[p*nr+j] = v
				}
			}
			continue
		}
		for p := range kcur {
			copy(pan[p*nr:p*nr+cols], b[(pc+p)*ldb+j0:(pc+p)*ldb+j0+cols])
		}
	}
}

// parallelRange splits [0, n) into at most w contiguous ranges run
// concurrently.
func parallelRange(w, n int, f func(lo, hi int)) {
	if w <= 1 || n < 2 {
		f(0, n)
		return
	}
	w = min(w, n)
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
