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
// kernel, 32 KiB for the AVX-512 one) stay in L1 while the micro-kernel streams an A micro-panel past
// it; an MC×KC block of A (~150 KiB) stays in the 512 KiB per-core L2; a
// KC×NC panel of B (3 MiB) lives in the shared L3.
const (
	kc    = 256
	nc    = 3072
	mcMul = 24 // MC = mcMul·MR rows of A per block

	// smallM is the largest row count handled without packing when B is
	// stored k×n (its rows then feed axpys directly): for decode (one or
	// a few rows) packing B would cost as much as the product.
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
	fewDot  bool      // WithBatchVariantFewRows
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

// withKernel sets the micro-kernel (with its primitives): tests and
// benchmarks use it to compare kernels on one machine.
func withKernel(k kernel) Option {
	return func(e *Engine) { e.kern = k }
}

// WithBatchVariantFewRows gives up batch invariance where it costs most:
// a product of at most MR rows (6 on the assembly kernels: decoding a few
// sequences) with B stored n×k — a linear layer's weight — is computed as
// dot products, eight partial sums per element added at the end, which
// reads B as it is stored instead of transposing it into panels. For one
// row that is about 2.5 times faster; but an element's bits then depend on
// whether its row was in a product of few rows or of many, so what a
// sampler records for a token is no longer, bit for bit, what the
// training forward computes (the difference is float32 rounding). Every
// other product keeps the fixed chain. Without an assembly kernel the
// option changes nothing.
func WithBatchVariantFewRows() Option {
	return func(e *Engine) { e.fewDot = true }
}

// New returns an Engine using the fastest micro-kernel this CPU supports.
func New(opts ...Option) *Engine {
	e := &Engine{kern: bestKernel(), workers: runtime.GOMAXPROCS(0)}
	for _, o := range opts {
		o(e)
	}
	return e
}

// KernelName names the micro-kernel in use ("avx512-6x32",
// "avx2-fma-6x16", "generic-4x4").
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
//
// Every element is computed in one fixed order whatever the sizes, the
// blocking and the split over workers: c ← beta·c (c ← 0 when beta is
// 0), then c ← c + (alpha·a_ip)·b_pj for p = 0, 1, …, k−1, each step one
// multiply-add of the engine's kernel (fused on the assembly kernels,
// which give the same bits). So row i of C depends only on row i of
// op(A), op(B) and row i of C: the same bits whether it is computed alone
// or among other rows (batch invariance), and column j likewise.
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
	if e.fewDot && transB && m <= e.kern.mr && e.kern.dot4 != nil {
		e.dotRows(transA, m, n, k, alpha, a, lda, b, ldb, c, ldc)
		return nil
	}
	if m <= smallM && !transB && e.kern.axpy != nil {
		e.small(transA, m, n, k, alpha, a, lda, b, ldb, c, ldc)
		return nil
	}
	if m <= e.kern.mr {
		e.fewRows(transA, transB, m, n, k, alpha, a, lda, b, ldb, c, ldc)
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

// small handles m ≤ smallM with B stored k×n without packing: row i of
// C is updated by one axpy per p, c_i ← c_i + (alpha·a_ip)·b_p, which is
// the micro-kernel's chain for every element. Columns of C are split
// among workers.
func (e *Engine) small(transA bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	run := func(j0, j1 int) {
		for i := range m {
			y := c[i*ldc+j0 : i*ldc+j1]
			for p := range k {
				var v float32
				if transA {
					v = a[p*lda+i]
				} else {
					v = a[i*lda+p]
				}
				e.kern.axpy(alpha*v, b[p*ldb+j0:p*ldb+j1], y)
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
				e.packB(transB, b, ldb, pc, kcur, jc, ncur, s0, s1, bpack)
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
				var tile []float32 // for partial tiles, made on first use
				for {
					it := int(next.Add(1) - 1)
					if it >= items {
						return
					}
					ib, js := it/nSplit, it%nSplit
					ic := ib * mc
					mcur := min(mc, m-ic)
					if packed != ib {
						e.packA(transA, a, lda, ic, mcur, pc, kcur, alpha, apack)
						packed = ib
					}
					s0 := js * nPanels / nSplit
					s1 := (js + 1) * nPanels / nSplit
					tile = e.macro(mcur, ncur, kcur, apack, bpack, c, ic, jc, ldc, s0, s1, tile)
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

// dotRows is the batch-variant path for few rows with B stored n×k:
// c_ij ← c_ij + alpha·(x_i·b_j), the dot product over k in the kernel's
// dot4 (four columns at a time, eight partial sums each) with the last
// k mod 8 terms added in order after it. Columns are split among the
// workers in groups of four.
func (e *Engine) dotRows(transA bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	k8 := k &^ 7
	// The rows of op(A), read in place unless A is stored k×m.
	xs, ldx := a, lda
	if transA {
		xs, ldx = make([]float32, m*k), k
		for i := range m {
			for p := range k {
				xs[i*k+p] = a[p*lda+i]
			}
		}
	}
	run := func(g0, g1 int) {
		var d [4]float32
		for i := range m {
			x := xs[i*ldx : i*ldx+k]
			for j := g0 * 4; j < min(g1*4, n); j += 4 {
				if j+4 > n { // the last columns, fewer than four
					for jj := j; jj < n; jj++ {
						var s float32
						for p := range k {
							s += x[p] * b[jj*ldb+p]
						}
						c[i*ldc+jj] += alpha * s
					}
					continue
				}
				d = [4]float32{}
				if k8 > 0 {
					e.kern.dot4(x[:k8], b[j*ldb:], ldb, &d)
				}
				for r := range 4 {
					s := d[r]
					for p := k8; p < k; p++ {
						s += x[p] * b[(j+r)*ldb+p]
					}
					c[i*ldc+j+r] += alpha * s
				}
			}
		}
	}
	groups := (n + 3) / 4
	workers := e.workers
	if 2*m*n*k < serialFlops {
		workers = 1
	}
	parallelRange(workers, groups, run)
}

// fewGroup is the B micro-panels fewRows packs and uses at a time.
const fewGroup = 4

// fewRows is blocked for products of at most mr rows (decoding), which
// are one A micro-panel: A is packed once, whole, and B a group of
// fewGroup micro-panels at a time, KC block after KC block, into a
// buffer small enough to stay in cache and used at once — B is read
// once from memory instead of being written out packed and read back,
// which for one row costs more than the product. Each element goes
// through the same kernels, KC blocks in the same order, as in blocked:
// the same chain, the same bits. Groups of panels are split among the
// workers.
func (e *Engine) fewRows(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	mr, nr := e.kern.mr, e.kern.nr
	ap := e.getBuf(k * mr)
	defer e.bufs.Put(ap)
	apack := *ap
	for pc := 0; pc < k; pc += kc {
		e.packA(transA, a, lda, 0, m, pc, min(kc, k-pc), alpha, apack[pc*mr:])
	}
	groups := (n + fewGroup*nr - 1) / (fewGroup * nr)
	workers := e.workers
	if 2*m*n*k < serialFlops {
		workers = 1
	}
	parallelRange(workers, groups, func(g0, g1 int) {
		bp := e.getBuf(min(k, kc) * fewGroup * nr)
		defer e.bufs.Put(bp)
		bpack := *bp
		var tile []float32
		for g := g0; g < g1; g++ {
			jc := g * fewGroup * nr
			ncur := min(fewGroup*nr, n-jc)
			np := (ncur + nr - 1) / nr
			for pc := 0; pc < k; pc += kc {
				kcur := min(kc, k-pc)
				e.packB(transB, b, ldb, pc, kcur, jc, ncur, 0, np, bpack)
				tile = e.macro(m, ncur, kcur, apack[pc*mr:], bpack, c, 0, jc, ldc, 0, np, tile)
			}
		}
	})
}

// macro runs the micro-kernel over B micro-panels [s0,s1) and all A
// micro-panels of the packed block, updating C at (ic, jc). Full tiles
// are updated in place; a tile cut by the edge of C is copied into tile
// (made when first needed, and returned for the next call), updated
// there and copied back, so that every element goes through the same
// chain of multiply-adds. The last A micro-panel, when it has fewer than
// mr rows, runs the kernel's partial-row variant where it has one.
func (e *Engine) macro(mcur, ncur, kcur int, apack, bpack, c []float32, ic, jc, ldc, s0, s1 int, tile []float32) []float32 {
	mr, nr := e.kern.mr, e.kern.nr
	full := mcur / mr * mr
	if e.kern.rows == nil {
		full = mcur // partial micro-panels go through the tile
	}
	for s := s0; s < s1; s++ {
		j := s * nr
		nw := min(nr, ncur-j)
		bpan := bpack[s*kcur*nr:]
		for i := 0; i < full; i += mr {
			mw := min(mr, mcur-i)
			apan := apack[(i/mr)*kcur*mr:]
			off := (ic+i)*ldc + jc + j
			if mw == mr && nw == nr {
				e.kern.micro(kcur, apan, bpan, c[off:], ldc)
				continue
			}
			tile = tileIn(tile, mr*nr, c[off:], ldc, mw, nw, nr)
			e.kern.micro(kcur, apan, bpan, tile, nr)
			tileOut(tile, c[off:], ldc, mw, nw, nr)
		}
	}
	if full == mcur {
		return tile
	}
	mw := mcur - full
	apan := apack[(full/mr)*kcur*mr:]
	np := e.kern.rowPanels(mw)
	for s := s0; s < s1; {
		j := s * nr
		off := (ic+full)*ldc + jc + j
		if q := min(np, s1-s, (ncur-j)/nr); q > 0 {
			e.kern.rows(mw, q, kcur, apan, bpack[s*kcur*nr:], kcur*nr, c[off:], ldc)
			s += q
			continue
		}
		nw := ncur - j // the last panel, cut by the edge of C
		tile = tileIn(tile, mr*nr, c[off:], ldc, mw, nw, nr)
		e.kern.rows(mw, 1, kcur, apan, bpack[s*kcur*nr:], kcur*nr, tile, nr)
		tileOut(tile, c[off:], ldc, mw, nw, nr)
		s++
	}
	return tile
}

// tileIn copies the mw×nw corner of C at stride ldc into a zeroed tile
// of n floats at stride nr, making the tile when it is nil.
func tileIn(tile []float32, n int, c []float32, ldc, mw, nw, nr int) []float32 {
	if tile == nil {
		tile = make([]float32, n)
	} else {
		clear(tile)
	}
	for r := range mw {
		copy(tile[r*nr:r*nr+nw], c[r*ldc:r*ldc+nw])
	}
	return tile
}

// tileOut copies the mw×nw corner of the tile back into C.
func tileOut(tile, c []float32, ldc, mw, nw, nr int) {
	for r := range mw {
		copy(c[r*ldc:r*ldc+nw], tile[r*nr:r*nr+nw])
	}
}

// packA copies rows [ic, ic+mcur) × columns [pc, pc+kcur) of op(A), scaled
// by alpha, into micro-panels of mr rows: panel r holds, for each p, the mr
// values A[ic+r·mr+i][pc+p]; rows past mcur are zero. The kernel's
// packRows and packCols, where it has them, pack full panels but for
// their last column (their stores spill onto the column after), which
// Go writes.
func (e *Engine) packA(transA bool, a []float32, lda, ic, mcur, pc, kcur int, alpha float32, dst []float32) {
	mr := e.kern.mr
	for r := 0; r < mcur; r += mr {
		pan := dst[(r/mr)*kcur*mr : (r/mr+1)*kcur*mr]
		rows := min(mr, mcur-r)
		if rows < mr {
			clear(pan)
		}
		p0 := 0 // columns [0, p0) packed by the kernel
		if rows == mr && e.kern.packRows != nil && kcur > 1 {
			if transA {
				p0 = kcur - 1
				e.kern.packCols(p0, a[pc*lda+ic+r:], lda, alpha, pan)
			} else {
				p0 = (kcur - 1) &^ 7
				e.kern.packRows(p0, a[(ic+r)*lda+pc:], lda, alpha, pan)
			}
		}
		for i := range rows {
			row := ic + r + i
			if transA {
				for p := p0; p < kcur; p++ {
					pan[p*mr+i] = alpha * a[(pc+p)*lda+row]
				}
				continue
			}
			src := a[row*lda+pc+p0 : row*lda+pc+kcur]
			for p, v := range src {
				pan[(p0+p)*mr+i] = alpha * v
			}
		}
	}
}

// packB copies micro-panels [s0, s1) of rows [pc, pc+kcur) × columns
// [jc, jc+ncur) of op(B): panel s holds, for each p, the nr values
// B[pc+p][jc+s·nr+j]; columns past ncur are zero. A B stored n×k is
// transposed eight rows at a time by the kernel's packT where it has
// one.
func (e *Engine) packB(transB bool, b []float32, ldb, pc, kcur, jc, ncur, s0, s1 int, dst []float32) {
	nr := e.kern.nr
	for s := s0; s < s1; s++ {
		pan := dst[s*kcur*nr : (s+1)*kcur*nr]
		j0 := jc + s*nr
		cols := min(nr, jc+ncur-j0)
		if cols < nr {
			clear(pan)
		}
		if !transB {
			for p := range kcur {
				copy(pan[p*nr:p*nr+cols], b[(pc+p)*ldb+j0:(pc+p)*ldb+j0+cols])
			}
			continue
		}
		j := 0
		if e.kern.packT != nil {
			k8 := kcur &^ 7
			for ; j+8 <= cols; j += 8 {
				e.kern.packT(k8, b[(j0+j)*ldb+pc:], ldb, pan[j:])
				for p := k8; p < kcur; p++ {
					for r := range 8 {
						pan[p*nr+j+r] = b[(j0+j+r)*ldb+pc+p]
					}
				}
			}
		}
		for ; j < cols; j++ {
			src := b[(j0+j)*ldb+pc : (j0+j)*ldb+pc+kcur]
			for p, v := range src {
				pan[p*nr+j] = v
			}
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
