//go:build amd64 && !noasm

package gemm

import "golang.org/x/sys/cpu"

// bestKernel picks the AVX2+FMA kernel when the CPU and OS support it.
// (An AVX-512 kernel is not provided: the machines this was developed and
// tested on have no AVX-512, and untested assembly does not ship.)
func bestKernel() kernel {
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		return kernel{name: "avx2-fma-6x16", mr: 6, nr: 16, micro: microAVX2, dot: dotAVX2, dot4: dot4AVX2, expShift: expShiftAVX2Go, axpy: axpyAVX2}
	}
	return genericKernel()
}

// The assembly routines take raw pointers; the wrappers below are the only
// callers and guarantee the lengths they read and write.

//go:noescape
func kern6x16(kc int, a, b, c *float32, ldc int)

//go:noescape
func dotFMA(n int, x, y *float32) float32

//go:noescape
func dot4FMA(n int, x, y *float32, ldy int, out *float32)

//go:noescape
func expShiftAVX2(n int, x *float32, shift float32) float64

//go:noescape
func axpyFMA(n int, alpha float32, x, y *float32)

func microAVX2(kc int, a, b, c []float32, ldc int) {
	if kc == 0 {
		return
	}
	_ = a[kc*6-1]
	_ = b[kc*16-1]
	_ = c[5*ldc+15]
	kern6x16(kc, &a[0], &b[0], &c[0], ldc)
}

func dotAVX2(x, y []float32) float32 {
	if len(x) == 0 {
		return 0
	}
	_ = y[len(x)-1]
	return dotFMA(len(x), &x[0], &y[0])
}

func axpyAVX2(alpha float32, x, y []float32) {
	if len(y) == 0 {
		return
	}
	_ = x[len(y)-1]
	axpyFMA(len(y), alpha, &x[0], &y[0])
}

func dot4AVX2(x, y []float32, ldy int, out *[4]float32) {
	n := len(x)
	if n == 0 {
		*out = [4]float32{}
		return
	}
	_ = y[3*ldy+n-1]
	n8 := n &^ 7
	if n8 > 0 {
		dot4FMA(n8, &x[0], &y[0], ldy, &out[0])
	} else {
		*out = [4]float32{}
	}
	for i := n8; i < n; i++ {
		for r := range 4 {
			out[r] += x[i] * y[r*ldy+i]
		}
	}
}

func expShiftAVX2Go(x []float32, shift float32) float64 {
	n8 := len(x) &^ 7
	var s float64
	if n8 > 0 {
		s = expShiftAVX2(n8, &x[0], shift)
	}
	return s + expShiftGeneric(x[n8:], shift)
}
