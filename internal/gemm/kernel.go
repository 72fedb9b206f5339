package gemm

import "math"

// kernel bundles a register-blocked micro-kernel with the vector
// primitives of the unpacked small-m path.
type kernel struct {
	name   string
	mr, nr int
	// micro adds the product of an mr×kc packed A micro-panel and a kc×nr
	// packed B micro-panel into the mr×nr tile of c at stride ldc.
	micro func(kc int, a, b, c []float32, ldc int)
	// dot returns Σ x[i]·y[i]; len(y) ≥ len(x).
	dot func(x, y []float32) float32
	// dot4 sets out[r] = Σ x[i]·y[r·ldy+i] for r < 4: four dot
	// products sharing each load of x.
	dot4 func(x, y []float32, ldy int, out *[4]float32)
	// expShift sets x[i] = e^(x[i]−shift) and returns the float64 sum.
	expShift func(x []float32, shift float32) float64
	// axpy does y[i] += alpha·x[i]; len(x) ≥ len(y).
	axpy func(alpha float32, x, y []float32)
}

func genericKernel() kernel {
	return kernel{name: "generic-4x4", mr: 4, nr: 4, micro: microGeneric, dot: dotGeneric, dot4: dot4Generic, expShift: expShiftGeneric, axpy: axpyGeneric}
}

// microGeneric is the portable 4×4 micro-kernel: sixteen scalar
// accumulators the compiler keeps in registers.
func microGeneric(kc int, a, b, c []float32, ldc int) {
	var c00, c01, c02, c03, c10, c11, c12, c13, c20, c21, c22, c23, c30, c31, c32, c33 float32
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
	r := c[0:4:4]
	r[0] += c00
	r[1] += c01
	r[2] += c02
	r[3] += c03
	r = c[ldc : ldc+4 : ldc+4]
	r[0] += c10
	r[1] += c11
	r[2] += c12
	r[3] += c13
	r = c[2*ldc : 2*ldc+4 : 2*ldc+4]
	r[0] += c20
	r[1] += c21
	r[2] += c22
	r[3] += c23
	r = c[3*ldc : 3*ldc+4 : 3*ldc+4]
	r[0] += c30
	r[1] += c31
	r[2] += c32
	r[3] += c33
}

func dotGeneric(x, y []float32) float32 {
	y = y[:len(x)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s0 += x[i] * y[i]
		s1 += x[i+1] * y[i+1]
		s2 += x[i+2] * y[i+2]
		s3 += x[i+3] * y[i+3]
	}
	for ; i < len(x); i++ {
		s0 += x[i] * y[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func axpyGeneric(alpha float32, x, y []float32) {
	x = x[:len(y)]
	for i, v := range x {
		y[i] += alpha * v
	}
}

func dot4Generic(x, y []float32, ldy int, out *[4]float32) {
	n := len(x)
	for r := range 4 {
		out[r] = dotGeneric(x, y[r*ldy:r*ldy+n])
	}
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
