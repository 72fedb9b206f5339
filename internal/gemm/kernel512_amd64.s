//go:build amd64 && !noasm

#include "textflag.h"

// The AVX-512 micro-kernels: kern6x16's chain on 32-column panels (nr =
// 32, a packed B row is 128 bytes), in zmm registers. Each element of C
// is loaded once, updated by one VFMADD231PS per p in increasing order
// (the same fused multiply-add, rounded once, as the ymm kernels) and
// stored: the same chain, the same bits, only more columns per
// instruction. They use AVX-512F only.

// One step p of kern6x32: the B row at boff(DI) times the six A values
// at aoff(SI).. into the twelve accumulators.
#define STEP6X32(aoff, boff) \
	VMOVUPS boff(DI), Z0; \
	VMOVUPS boff+64(DI), Z1; \
	VBROADCASTSS aoff(SI), Z2; \
	VBROADCASTSS aoff+4(SI), Z3; \
	VFMADD231PS Z0, Z2, Z4; \
	VFMADD231PS Z1, Z2, Z5; \
	VFMADD231PS Z0, Z3, Z6; \
	VFMADD231PS Z1, Z3, Z7; \
	VBROADCASTSS aoff+8(SI), Z2; \
	VBROADCASTSS aoff+12(SI), Z3; \
	VFMADD231PS Z0, Z2, Z8; \
	VFMADD231PS Z1, Z2, Z9; \
	VFMADD231PS Z0, Z3, Z10; \
	VFMADD231PS Z1, Z3, Z11; \
	VBROADCASTSS aoff+16(SI), Z2; \
	VBROADCASTSS aoff+20(SI), Z3; \
	VFMADD231PS Z0, Z2, Z12; \
	VFMADD231PS Z1, Z2, Z13; \
	VFMADD231PS Z0, Z3, Z14; \
	VFMADD231PS Z1, Z3, Z15

// Load row r (R9 points at it) of a 32-column C tile into two registers.
#define LOADROW32(lo, hi) VMOVUPS (R9), lo; VMOVUPS 64(R9), hi; ADDQ R8, R9
// Store two registers to the row DX points at, and step to the next row.
#define STOREROW32(lo, hi) VMOVUPS lo, (DX); VMOVUPS hi, 64(DX); ADDQ R8, DX
// One row of A (the broadcast off(SI)) times the B row in Z0/Z1.
#define FMAROW32(off, lo, hi) VBROADCASTSS off(SI), Z2; VFMADD231PS Z0, Z2, lo; VFMADD231PS Z1, Z2, hi

#define KERNPROLOG32 \
	MOVQ kc+0(FP), CX; \
	MOVQ a+8(FP), SI; \
	MOVQ b+16(FP), DI; \
	MOVQ c+24(FP), DX; \
	MOVQ ldc+32(FP), R8; \
	SHLQ $2, R8; \
	MOVQ DX, R9

#define KERNSTEP32 \
	ADDQ $24, SI; \
	ADDQ $128, DI; \
	DECQ CX

// func kern6x32(kc int, a, b, c *float32, ldc int)
//
// C[6×32] (row stride ldc floats) updated in place by kc steps of
// c ← fma(A[p][i], B[p][j], c), p in increasing order. Twelve zmm
// accumulators hold the tile; Z0/Z1 hold one row of the B panel, Z2/Z3
// broadcast elements of A. The loop is unrolled twice (an odd kc runs
// its first step alone).
TEXT ·kern6x32(SB), NOSPLIT, $0-40
	KERNPROLOG32
	LOADROW32(Z4, Z5)
	LOADROW32(Z6, Z7)
	LOADROW32(Z8, Z9)
	LOADROW32(Z10, Z11)
	LOADROW32(Z12, Z13)
	LOADROW32(Z14, Z15)

	TESTQ $1, CX
	JZ    even6x32
	STEP6X32(0, 0)
	KERNSTEP32
	JZ    done6x32

even6x32:
	SHRQ $1, CX

loop6x32:
	STEP6X32(0, 0)
	STEP6X32(24, 128)
	ADDQ $48, SI
	ADDQ $256, DI
	DECQ CX
	JNZ  loop6x32

done6x32:
	STOREROW32(Z4, Z5)
	STOREROW32(Z6, Z7)
	STOREROW32(Z8, Z9)
	STOREROW32(Z10, Z11)
	STOREROW32(Z12, Z13)
	STOREROW32(Z14, Z15)
	VZEROUPPER
	RET

// The kernels below are kern6x32 for the last micro-panel of a block
// when it has fewer than 6 rows, as kern5x16 … kern1x16 are for
// kern6x16; kern2x64 and kern1x128 take 2 and 4 adjacent panels (bs
// bytes apart) for enough independent chains.

// func kern5x32(kc int, a, b, c *float32, ldc int)
TEXT ·kern5x32(SB), NOSPLIT, $0-40
	KERNPROLOG32
	LOADROW32(Z4, Z5)
	LOADROW32(Z6, Z7)
	LOADROW32(Z8, Z9)
	LOADROW32(Z10, Z11)
	LOADROW32(Z12, Z13)

loop5x32:
	VMOVUPS (DI), Z0
	VMOVUPS 64(DI), Z1
	FMAROW32(0, Z4, Z5)
	FMAROW32(4, Z6, Z7)
	FMAROW32(8, Z8, Z9)
	FMAROW32(12, Z10, Z11)
	FMAROW32(16, Z12, Z13)
	KERNSTEP32
	JNZ loop5x32

	STOREROW32(Z4, Z5)
	STOREROW32(Z6, Z7)
	STOREROW32(Z8, Z9)
	STOREROW32(Z10, Z11)
	STOREROW32(Z12, Z13)
	VZEROUPPER
	RET

// func kern4x32(kc int, a, b, c *float32, ldc int)
TEXT ·kern4x32(SB), NOSPLIT, $0-40
	KERNPROLOG32
	LOADROW32(Z4, Z5)
	LOADROW32(Z6, Z7)
	LOADROW32(Z8, Z9)
	LOADROW32(Z10, Z11)

loop4x32:
	VMOVUPS (DI), Z0
	VMOVUPS 64(DI), Z1
	FMAROW32(0, Z4, Z5)
	FMAROW32(4, Z6, Z7)
	FMAROW32(8, Z8, Z9)
	FMAROW32(12, Z10, Z11)
	KERNSTEP32
	JNZ loop4x32

	STOREROW32(Z4, Z5)
	STOREROW32(Z6, Z7)
	STOREROW32(Z8, Z9)
	STOREROW32(Z10, Z11)
	VZEROUPPER
	RET

// func kern3x32(kc int, a, b, c *float32, ldc int)
TEXT ·kern3x32(SB), NOSPLIT, $0-40
	KERNPROLOG32
	LOADROW32(Z4, Z5)
	LOADROW32(Z6, Z7)
	LOADROW32(Z8, Z9)

loop3x32:
	VMOVUPS (DI), Z0
	VMOVUPS 64(DI), Z1
	FMAROW32(0, Z4, Z5)
	FMAROW32(4, Z6, Z7)
	FMAROW32(8, Z8, Z9)
	KERNSTEP32
	JNZ loop3x32

	STOREROW32(Z4, Z5)
	STOREROW32(Z6, Z7)
	STOREROW32(Z8, Z9)
	VZEROUPPER
	RET

// func kern2x32z(kc int, a, b, c *float32, ldc int)
//
// (kern2x32 is the ymm kernel for two rows over two 16-column panels.)
TEXT ·kern2x32z(SB), NOSPLIT, $0-40
	KERNPROLOG32
	LOADROW32(Z4, Z5)
	LOADROW32(Z6, Z7)

loop2x32z:
	VMOVUPS (DI), Z0
	VMOVUPS 64(DI), Z1
	FMAROW32(0, Z4, Z5)
	FMAROW32(4, Z6, Z7)
	KERNSTEP32
	JNZ loop2x32z

	STOREROW32(Z4, Z5)
	STOREROW32(Z6, Z7)
	VZEROUPPER
	RET

// func kern1x32(kc int, a, b, c *float32, ldc int)
TEXT ·kern1x32(SB), NOSPLIT, $0-40
	KERNPROLOG32
	LOADROW32(Z4, Z5)

loop1x32:
	VMOVUPS (DI), Z0
	VMOVUPS 64(DI), Z1
	FMAROW32(0, Z4, Z5)
	KERNSTEP32
	JNZ loop1x32

	STOREROW32(Z4, Z5)
	VZEROUPPER
	RET

// func kern2x64(kc int, a, b *float32, bs int, c *float32, ldc int)
//
// Two rows of A times two adjacent 32-column panels: C[2×64].
TEXT ·kern2x64(SB), NOSPLIT, $0-48
	MOVQ kc+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ bs+24(FP), R10
	MOVQ c+32(FP), DX
	MOVQ ldc+40(FP), R8
	SHLQ $2, R8
	LEAQ (DI)(R10*1), R11
	VMOVUPS (DX), Z4
	VMOVUPS 64(DX), Z5
	VMOVUPS 128(DX), Z6
	VMOVUPS 192(DX), Z7
	VMOVUPS (DX)(R8*1), Z8
	VMOVUPS 64(DX)(R8*1), Z9
	VMOVUPS 128(DX)(R8*1), Z10
	VMOVUPS 192(DX)(R8*1), Z11
	XORQ AX, AX

loop2x64:
	VMOVUPS (DI)(AX*1), Z0
	VMOVUPS 64(DI)(AX*1), Z1
	VMOVUPS (R11)(AX*1), Z2
	VMOVUPS 64(R11)(AX*1), Z3
	VBROADCASTSS 0(SI), Z12
	VBROADCASTSS 4(SI), Z13
	VFMADD231PS Z0, Z12, Z4
	VFMADD231PS Z1, Z12, Z5
	VFMADD231PS Z2, Z12, Z6
	VFMADD231PS Z3, Z12, Z7
	VFMADD231PS Z0, Z13, Z8
	VFMADD231PS Z1, Z13, Z9
	VFMADD231PS Z2, Z13, Z10
	VFMADD231PS Z3, Z13, Z11
	ADDQ $24, SI
	ADDQ $128, AX
	DECQ CX
	JNZ  loop2x64

	VMOVUPS Z4, (DX)
	VMOVUPS Z5, 64(DX)
	VMOVUPS Z6, 128(DX)
	VMOVUPS Z7, 192(DX)
	VMOVUPS Z8, (DX)(R8*1)
	VMOVUPS Z9, 64(DX)(R8*1)
	VMOVUPS Z10, 128(DX)(R8*1)
	VMOVUPS Z11, 192(DX)(R8*1)
	VZEROUPPER
	RET

// func kern1x128(kc int, a, b *float32, bs int, c *float32)
//
// One row of A times four adjacent 32-column panels: C[1×128].
TEXT ·kern1x128(SB), NOSPLIT, $0-40
	MOVQ kc+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ bs+24(FP), R10
	MOVQ c+32(FP), DX
	LEAQ (DI)(R10*1), R11
	LEAQ (R11)(R10*1), R12
	LEAQ (R12)(R10*1), R13
	VMOVUPS (DX), Z4
	VMOVUPS 64(DX), Z5
	VMOVUPS 128(DX), Z6
	VMOVUPS 192(DX), Z7
	VMOVUPS 256(DX), Z8
	VMOVUPS 320(DX), Z9
	VMOVUPS 384(DX), Z10
	VMOVUPS 448(DX), Z11
	XORQ AX, AX

loop1x128:
	VBROADCASTSS (SI), Z0
	VFMADD231PS (DI)(AX*1), Z0, Z4
	VFMADD231PS 64(DI)(AX*1), Z0, Z5
	VFMADD231PS (R11)(AX*1), Z0, Z6
	VFMADD231PS 64(R11)(AX*1), Z0, Z7
	VFMADD231PS (R12)(AX*1), Z0, Z8
	VFMADD231PS 64(R12)(AX*1), Z0, Z9
	VFMADD231PS (R13)(AX*1), Z0, Z10
	VFMADD231PS 64(R13)(AX*1), Z0, Z11
	ADDQ $24, SI
	ADDQ $128, AX
	DECQ CX
	JNZ  loop1x128

	VMOVUPS Z4, (DX)
	VMOVUPS Z5, 64(DX)
	VMOVUPS Z6, 128(DX)
	VMOVUPS Z7, 192(DX)
	VMOVUPS Z8, 256(DX)
	VMOVUPS Z9, 320(DX)
	VMOVUPS Z10, 384(DX)
	VMOVUPS Z11, 448(DX)
	VZEROUPPER
	RET

// func packT8x32(k8 int, src *float32, lds int, dst *float32)
//
// packT8 for 32-column panels: dst[p·32 + r] = src[r·lds + p] for r < 8
// and p < k8 (a multiple of 8), the same 8×8 transposes (AVX) with the
// panel's rows 128 bytes apart.
TEXT ·packT8x32(SB), NOSPLIT, $0-32
	MOVQ k8+0(FP), CX
	MOVQ src+8(FP), SI
	MOVQ lds+16(FP), R8
	SHLQ $2, R8
	MOVQ dst+24(FP), DI
	LEAQ (SI)(R8*1), R9
	LEAQ (R9)(R8*1), R10
	LEAQ (R10)(R8*1), R11
	MOVQ R8, R12
	SHLQ $2, R12
	SHRQ $3, CX
	JZ   pack32done

pack32loop:
	VMOVUPS (SI), X0
	VINSERTF128 $1, (SI)(R12*1), Y0, Y0
	VMOVUPS (R9), X1
	VINSERTF128 $1, (R9)(R12*1), Y1, Y1
	VMOVUPS (R10), X2
	VINSERTF128 $1, (R10)(R12*1), Y2, Y2
	VMOVUPS (R11), X3
	VINSERTF128 $1, (R11)(R12*1), Y3, Y3
	VMOVUPS 16(SI), X4
	VINSERTF128 $1, 16(SI)(R12*1), Y4, Y4
	VMOVUPS 16(R9), X5
	VINSERTF128 $1, 16(R9)(R12*1), Y5, Y5
	VMOVUPS 16(R10), X6
	VINSERTF128 $1, 16(R10)(R12*1), Y6, Y6
	VMOVUPS 16(R11), X7
	VINSERTF128 $1, 16(R11)(R12*1), Y7, Y7

	VUNPCKLPS Y1, Y0, Y8
	VUNPCKHPS Y1, Y0, Y9
	VUNPCKLPS Y3, Y2, Y10
	VUNPCKHPS Y3, Y2, Y11
	VSHUFPS $0x44, Y10, Y8, Y12
	VSHUFPS $0xEE, Y10, Y8, Y13
	VSHUFPS $0x44, Y11, Y9, Y14
	VSHUFPS $0xEE, Y11, Y9, Y15
	VMOVUPS Y12, (DI)
	VMOVUPS Y13, 128(DI)
	VMOVUPS Y14, 256(DI)
	VMOVUPS Y15, 384(DI)

	VUNPCKLPS Y5, Y4, Y8
	VUNPCKHPS Y5, Y4, Y9
	VUNPCKLPS Y7, Y6, Y10
	VUNPCKHPS Y7, Y6, Y11
	VSHUFPS $0x44, Y10, Y8, Y12
	VSHUFPS $0xEE, Y10, Y8, Y13
	VSHUFPS $0x44, Y11, Y9, Y14
	VSHUFPS $0xEE, Y11, Y9, Y15
	VMOVUPS Y12, 512(DI)
	VMOVUPS Y13, 640(DI)
	VMOVUPS Y14, 768(DI)
	VMOVUPS Y15, 896(DI)

	ADDQ $32, SI
	ADDQ $32, R9
	ADDQ $32, R10
	ADDQ $32, R11
	ADDQ $1024, DI
	DECQ CX
	JNZ  pack32loop

pack32done:
	VZEROUPPER
	RET
