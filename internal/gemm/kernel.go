package gemm

import "math"

// kernel bundles a register-blocked micro-kernel with the vector
// primitives that share its instruction set. Every multiply-add of a
// product, whatever path computes it, is the kernel's own: one chain per
// element of C, c ← c + a·b for p in increasing order from C's value,
// with the same rounding (fused on the assembly kernels) — so that a row of
// the product is the same bits whatever the other rows are.
type kernel struct {
	name   string
	mr, nr int
	// micro updates the mr×nr tile of c at stride ldc with the product
	// of an mr×kc packed A micro-panel and a kc×nr packed B micro-panel,
	// one chain per element starting from c's value.
	micro func(kc int, a, b, c []float32, ldc int)
	// rows, when not nil, is micro for the first rows (< mr) of the A
	// micro-panel only, over np adjacent B micro-panels (bs floats
	// apart) and np·nr columns of c; rowPanels(rows) is the np it wants
	// (1, or more when one panel gives too few independent chains).
	// Without it, partial micro-panels run micro on a copy of C.
	rows      func(rows, np, kc int, a, b []float32, bs int, c []float32, ldc int)
	rowPanels func(rows int) int
	// packT, when not nil, writes dst[p·nr + r] = src[r·lds + p] for
	// r < 8 and p < k8 (a multiple of 8): eight rows of a B stored n×k
	// into a packed panel.
	packT func(k8 int, src []float32, lds int, dst []float32)
	// packRows and packCols, when not nil (kernels with mr = 6), pack
	// the first p columns of an A micro-panel: dst[p·6 + i] =
	// alpha·src[i·lds + p] for p < k8 (a multiple of 8), from A stored
	// m×k; dst[p·6 + i] = alpha·src[p·lds + i] for p < k, from A stored
	// k×m. Both also write dst[6·k8] and dst[6·k8+1] (6·k, 6·k+1), which
	// the caller then overwrites.
	packRows func(k8 int, src []float32, lds int, alpha float32, dst []float32)
	packCols func(k int, src []float32, lds int, alpha float32, dst []float32)
	// axpy does y[i] = y[i] + alpha·x[i] with the micro-kernel's
	// rounding; len(x) ≥ len(y). Nil when the kernel has no such
	// primitive (the generic kernel, whose rounding is the Go compiler's
	// to choose): products of few rows then take the packed path too.
	axpy func(alpha float32, x, y []float32)
	// expShift sets x[i] = e^(x[i]−shift) and returns the float64 sum.
	expShift func(x []float32, shift float32) float64
	// swiglu and swigluGrad are Engine.SwiGLU and Engine.SwiGLUGrad.
	swiglu     func(out, gate, up []float32)
	swigluGrad func(dgate, dup, dout, gate, up []float32)
	// dot4 sets out[r] = Σ_i x[i]·y[r·ldy+i] for r < 4 (len(x) a multiple
	// of 8) in 8-lane partial sums: the batch-variant few-row path. Nil
	// where the kernel has none (WithBatchVariantFewRows then changes
	// nothing).
	dot4 func(x, y []float32, ldy int, out *[4]float32)
}

func genericKernel() kernel {
	return kernel{name: "generic-4x4", mr: 4, nr: 4, micro: microGeneric, expShift: expShiftGeneric,
		swiglu: swigluGeneric, swigluGrad: swigluGradGeneric}
}

// microGeneric is the portable 4×4 micro-kernel: sixteen scalar
// accumulators the compiler keeps in registers, loaded from C and stored
// back.
func microGeneric(kc int, a, b, c []float32, ldc int) {
	r0 := c[0:4:4]
	r1 := c[ldc : ldc+4 : ldc+4]
	r2 := c[2*ldc : 2*ldc+4 : 2*ldc+4]
	r3 := c[3*ldc : 3*ldc+4 : 3*ldc+4]
	c00, c01, c02, c03 := r0[0], r0[1], r0[2], r0[3]
	c10, c11, c12, c13 := r1[0], r1[1], r1[2], r1[3]
	c20, c21, c22, c23 := r2[0], r2[1], r2[2], r2[3]
	c30, c31, c32, c33 := r3[0], r3[1], r3[2], r3[3]
	a = a[:kc*4]
	b = b[:kc*4]
	for p := 0; p < kc; p++ {
		ap := a[p*4 : p*4+4 : p*4+4]
		bp := b[p*4 : p*4+4 : p*4+4]
		a0, a1, a2, a3 := ap[0], ap[1], ap[2], ap[3]
		b0, b1, b2, b3 := bp[0], bp[1], bp[2], bp[3]
		c00 += a0 * b0
		c01 += a0 * b1
		c02 += a0 * b2
		c03 += a0 * b3
		c10 += a1 * b0
		c11 += a1 * b1
		c12 += a1 * b2
		c13 += a1 * b3
		c20 += a2 * b0
		c21 += a2 * b1
		c22 += a2 * b2
		c23 += a2 * b3
		c30 += a3 * b0
		c31 += a3 * b1
		c32 += a3 * b2
		c33 += a3 * b3
	}
	r0[0], r0[1], r0[2], r0[3] = c00, c01, c02, c03
	r1[0], r1[1], r1[2], r1[3] = c10, c11, c12, c13
	r2[0], r2[1], r2[2], r2[3] = c20, c21, c22, c23
	r3[0], r3[1], r3[2], r3[3] = c30, c31, c32, c33
}

func expShiftGeneric(x []float32, shift float32) float64 {
	var s float64
	for i, v := range x {
		e := Exp32(v - shift)
		x[i] = e
		s += float64(e)
	}
	return s
}

// Exp32 is a float32 exponential accurate to about 2 ulp: e^x = 2^n·e^r
// with n = round(x/ln2), |r| ≤ ln2/2 (ln2 split in two parts for an exact
// reduction, as in Cephes expf), and e^r by its Taylor polynomial to r⁷
// (truncation error below 2e-8 relative). It is several times faster
// than float64 math.Exp, which the softmax loops would otherwise spend
// most of their time in. Inputs below −87.3 give 0 (no subnormals),
// above 88.7 +Inf; NaN stays NaN.
func Exp32(x float32) float32 {
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693359375
		ln2lo = -2.12194440e-4
		// Adding 1.5·2²³ rounds a float32 of magnitude < 2²² to an integer
		// (round to nearest even) without a call to math.Floor.
		round = 12582912
	)
	if !(x <= 88.72283) { // also NaN
		if x != x {
			return x
		}
		return float32(math.Inf(1))
	}
	if x < -87.33654 {
		return 0
	}
	n := (x*log2e + round) - round
	r := x - n*ln2hi - n*ln2lo
	p := float32(1.0 / 5040)
	p = p*r + 1.0/720
	p = p*r + 1.0/120
	p = p*r + 1.0/24
	p = p*r + 1.0/6
	p = p*r + 0.5
	p = p*r + 1
	p = p*r + 1
	ni := int32(n)
	if ni >= 128 { // e^r·2^128 with r < 0 can still be finite
		return p * 2 * math.Float32frombits(uint32(ni-1+127)<<23)
	}
	return p * math.Float32frombits(uint32(ni+127)<<23)
}
