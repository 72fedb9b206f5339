//go:build amd64 && !noasm

#include "textflag.h"

// func dot4FMA(n int, x, y *float32, ldy int, out *float32)
//
// out[r] = Σ_{i<n} x[i]·y[r·ldy+i] for r = 0..3, n a multiple of 8: four
// rows of B share each load of x (the decode GEMV, y = W·x). Y0–Y7 are
// two accumulators per row; the horizontal sums are folded with VHADDPS.
// After the 16-wide loop at most one block of 8 is left, which d4loop8
// takes once. The order of the sum is not the micro-kernel's chain: this
// is the batch-variant few-row path (WithBatchVariantFewRows).
TEXT ·dot4FMA(SB), NOSPLIT, $0-40
	MOVQ n+0(FP), CX
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DI
	MOVQ ldy+24(FP), R8
	SHLQ $2, R8
	MOVQ out+32(FP), DX
	LEAQ (DI)(R8*1), R9
	LEAQ (R9)(R8*1), R10
	LEAQ (R10)(R8*1), R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ AX, AX

d4loop16:
	CMPQ CX, $16
	JL   d4loop8
	VMOVUPS (SI)(AX*1), Y8
	VMOVUPS 32(SI)(AX*1), Y9
	VFMADD231PS (DI)(AX*1), Y8, Y0
	VFMADD231PS 32(DI)(AX*1), Y9, Y4
	VFMADD231PS (R9)(AX*1), Y8, Y1
	VFMADD231PS 32(R9)(AX*1), Y9, Y5
	VFMADD231PS (R10)(AX*1), Y8, Y2
	VFMADD231PS 32(R10)(AX*1), Y9, Y6
	VFMADD231PS (R11)(AX*1), Y8, Y3
	VFMADD231PS 32(R11)(AX*1), Y9, Y7
	ADDQ $64, AX
	SUBQ $16, CX
	JMP  d4loop16

d4loop8:
	CMPQ CX, $8
	JL   d4reduce
	VMOVUPS (SI)(AX*1), Y8
	VFMADD231PS (DI)(AX*1), Y8, Y0
	VFMADD231PS (R9)(AX*1), Y8, Y1
	VFMADD231PS (R10)(AX*1), Y8, Y2
	VFMADD231PS (R11)(AX*1), Y8, Y3

d4reduce:
	VADDPS Y4, Y0, Y0
	VADDPS Y5, Y1, Y1
	VADDPS Y6, Y2, Y2
	VADDPS Y7, Y3, Y3
	VHADDPS Y1, Y0, Y0
	VHADDPS Y3, Y2, Y2
	VHADDPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VMOVUPS X0, (DX)
	VZEROUPPER
	RET
