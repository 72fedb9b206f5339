//go:build amd64 && !noasm

package gemm

import "golang.org/x/sys/cpu"

// bestKernel picks the AVX-512 kernel when the CPU and OS support it
// (cpu.X86.HasAVX512F includes the OS's saving of the opmask and zmm
// state), else the AVX2+FMA kernel, else the generic one.
func bestKernel() kernel {
	if k, ok := avx512Kernel(); ok {
		return k
	}
	if k, ok := avx2Kernel(); ok {
		return k
	}
	return genericKernel()
}

// avx2Kernel is the AVX2+FMA kernel, 6×16 micro-tiles in ymm registers,
// when the CPU and OS support it.
func avx2Kernel() (kernel, bool) {
	if !cpu.X86.HasAVX2 || !cpu.X86.HasFMA {
		return kernel{}, false
	}
	rows := &rowKernels{w: 16, one4: kern1x64, two2: kern2x32, each: [5]func(int, *float32, *float32, *float32, int){kern1x16, kern2x16, kern3x16, kern4x16, kern5x16}}
	return kernel{name: "avx2-fma-6x16", mr: 6, nr: 16, micro: microAVX2, rows: rows.rows, rowPanels: rowPanelsAVX2,
		packT: packTAVX2, packRows: packRowsAVX2, packCols: packColsAVX2, axpy: axpyAVX2, expShift: expShiftAVX2Go,
		swiglu: swigluAVX2Go, swigluGrad: swigluGradAVX2Go, dot4: dot4AVX2}, true
}

// avx512Kernel is the AVX2 kernel with its micro-kernels replaced by
// zmm ones (AVX-512F) on 6×32 tiles — B packed in 32-column panels, by
// packT8x32 when stored n×k — when the CPU and OS support both. Every
// element of C is the AVX2 kernel's chain: C loaded, one fused
// multiply-add per p in increasing order on the same packed values,
// stored, KC block after KC block; only the number of columns an
// instruction updates differs, so the results are the AVX2 kernel's bits
// (TestAVX512MatchesAVX2). Packing A, axpy, dot4, SwiGLU and the
// exponential are the AVX2 code.
func avx512Kernel() (kernel, bool) {
	k, ok := avx2Kernel()
	if !ok || !cpu.X86.HasAVX512F {
		return kernel{}, false
	}
	k.name, k.nr = "avx512-6x32", 32
	rows := &rowKernels{w: 32, one4: kern1x128, two2: kern2x64, each: [5]func(int, *float32, *float32, *float32, int){kern1x32, kern2x32z, kern3x32, kern4x32, kern5x32}}
	k.micro, k.rows, k.rowPanels, k.packT = microAVX512, rows.rows, rowPanelsAVX2, packT32AVX2
	return k, true
}

// The assembly routines take raw pointers; the wrappers below are the only
// callers and guarantee the lengths they read and write.

//go:noescape
func kern6x16(kc int, a, b, c *float32, ldc int)

//go:noescape
func kern5x16(kc int, a, b, c *float32, ldc int)

//go:noescape
func kern4x16(kc int, a, b, c *float32, ldc int)

//go:noescape
func kern3x16(kc int, a, b, c *float32, ldc int)

//go:noescape
func kern2x16(kc int, a, b, c *float32, ldc int)

//go:noescape
func kern1x16(kc int, a, b, c *float32, ldc int)

//go:noescape
func kern2x32(kc int, a, b *float32, bs int, c *float32, ldc int)

//go:noescape
func kern1x64(kc int, a, b *float32, bs int, c *float32)

//go:noescape
func kern6x32(kc int, a, b, c *float32, ldc int)

//go:noescape
func kern5x32(kc int, a, b, c *float32, ldc int)

//go:noescape
func kern4x32(kc int, a, b, c *float32, ldc int)

//go:noescape
func kern3x32(kc int, a, b, c *float32, ldc int)

//go:noescape
func kern2x32z(kc int, a, b, c *float32, ldc int)

//go:noescape
func kern1x32(kc int, a, b, c *float32, ldc int)

//go:noescape
func kern2x64(kc int, a, b *float32, bs int, c *float32, ldc int)

//go:noescape
func kern1x128(kc int, a, b *float32, bs int, c *float32)

//go:noescape
func packT8x32(k8 int, src *float32, lds int, dst *float32)

//go:noescape
func packT8(k8 int, src *float32, lds int, dst *float32)

//go:noescape
func packRows6(k8 int, src *float32, lds int, alpha float32, dst *float32)

//go:noescape
func packCols6(k int, src *float32, lds int, alpha float32, dst *float32)

//go:noescape
func expShiftAVX2(n int, x *float32, shift float32) float64

//go:noescape
func swigluAVX2(n int, out, gate, up *float32)

//go:noescape
func swigluGradAVX2(n int, dg, du, dout, gate, up *float32, which int)

//go:noescape
func dot4FMA(n int, x, y *float32, ldy int, out *float32)

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

// rowPanelsAVX2: at least eight accumulators (independent FMA chains)
// per call.
func rowPanelsAVX2(rows int) int {
	switch rows {
	case 1:
		return 4
	case 2:
		return 2
	}
	return 1
}

// rowKernels are the assembly kernels behind a kernel's rows, for
// panels of w columns: one4 runs one row over 4 panels, two2 two rows over
// 2 (the counts rowPanelsAVX2 asks for), each[r-1] r rows over one panel.
type rowKernels struct {
	w    int
	one4 func(kc int, a, b *float32, bs int, c *float32)
	two2 func(kc int, a, b *float32, bs int, c *float32, ldc int)
	each [5]func(kc int, a, b, c *float32, ldc int)
}

// rows is a kernel's rows on k's kernels: 1 to 5 rows over np panels.
func (k *rowKernels) rows(rows, np, kc int, a, b []float32, bs int, c []float32, ldc int) {
	if kc == 0 {
		return
	}
	_ = a[kc*6-1]
	_ = b[(np-1)*bs+kc*k.w-1]
	_ = c[(rows-1)*ldc+np*k.w-1]
	switch {
	case rows == 1 && np == 4:
		k.one4(kc, &a[0], &b[0], 4*bs, &c[0])
		return
	case rows == 2 && np == 2:
		k.two2(kc, &a[0], &b[0], 4*bs, &c[0], ldc)
		return
	}
	kern := k.each[rows-1]
	for q := range np {
		kern(kc, &a[0], &b[q*bs], &c[q*k.w], ldc)
	}
}

// microAVX512 is micro for the AVX-512 kernel: kern6x32 on a full tile.
func microAVX512(kc int, a, b, c []float32, ldc int) {
	if kc == 0 {
		return
	}
	_ = a[kc*6-1]
	_ = b[kc*32-1]
	_ = c[5*ldc+31]
	kern6x32(kc, &a[0], &b[0], &c[0], ldc)
}

// packT32AVX2 is packT for 32-column panels.
func packT32AVX2(k8 int, src []float32, lds int, dst []float32) {
	if k8 == 0 {
		return
	}
	_ = src[7*lds+k8-1]
	_ = dst[(k8-1)*32+7]
	packT8x32(k8, &src[0], lds, &dst[0])
}

func packTAVX2(k8 int, src []float32, lds int, dst []float32) {
	if k8 == 0 {
		return
	}
	_ = src[7*lds+k8-1]
	_ = dst[(k8-1)*16+7]
	packT8(k8, &src[0], lds, &dst[0])
}

func packRowsAVX2(k8 int, src []float32, lds int, alpha float32, dst []float32) {
	if k8 == 0 {
		return
	}
	_ = src[5*lds+k8-1]
	_ = dst[6*k8+1]
	packRows6(k8, &src[0], lds, alpha, &dst[0])
}

func packColsAVX2(k int, src []float32, lds int, alpha float32, dst []float32) {
	if k == 0 {
		return
	}
	_ = src[(k-1)*lds+5]
	_ = dst[6*k+1]
	packCols6(k, &src[0], lds, alpha, &dst[0])
}

func axpyAVX2(alpha float32, x, y []float32) {
	if len(y) == 0 {
		return
	}
	_ = x[len(y)-1]
	axpyFMA(len(y), alpha, &x[0], &y[0])
}

func expShiftAVX2Go(x []float32, shift float32) float64 {
	n8 := len(x) &^ 7
	var s float64
	if n8 > 0 {
		s = expShiftAVX2(n8, &x[0], shift)
	}
	return s + expShiftGeneric(x[n8:], shift)
}

// swigluAVX2Go runs the assembly over the multiple of 8 and the generic
// code (the same operations) over the rest.
func swigluAVX2Go(out, gate, up []float32) {
	n8 := len(out) &^ 7
	if n8 > 0 {
		_, _ = gate[n8-1], up[n8-1]
		swigluAVX2(n8, &out[0], &gate[0], &up[0])
	}
	swigluGeneric(out[n8:], gate[n8:], up[n8:])
}

func swigluGradAVX2Go(dgate, dup, dout, gate, up []float32) {
	n8 := len(dout) &^ 7
	if n8 > 0 && (dgate != nil || dup != nil) {
		_, _ = gate[n8-1], up[n8-1]
		which := 0
		dg, du := &dout[0], &dout[0] // not written unless which says so
		if dgate != nil {
			_ = dgate[n8-1]
			dg, which = &dgate[0], which|1
		}
		if dup != nil {
			_ = dup[n8-1]
			du, which = &dup[0], which|2
		}
		swigluGradAVX2(n8, dg, du, &dout[0], &gate[0], &up[0], which)
	}
	var dg, du []float32
	if dgate != nil {
		dg = dgate[n8:]
	}
	if dup != nil {
		du = dup[n8:]
	}
	swigluGradGeneric(dg, du, dout[n8:], gate[n8:], up[n8:])
}

// dot4AVX2 sets out[r] = Σ_{i<len(x)} x[i]·y[r·ldy+i] for r < 4; len(x) is
// a multiple of 8 and y holds 3·ldy + len(x) floats.
func dot4AVX2(x, y []float32, ldy int, out *[4]float32) {
	if len(x) == 0 {
		*out = [4]float32{}
		return
	}
	_ = y[3*ldy+len(x)-1]
	dot4FMA(len(x), &x[0], &y[0], ldy, &out[0])
}
