//go:build amd64 && !noasm

#include "textflag.h"

// func kern6x16(kc int, a, b, c *float32, ldc int)
//
// C[6×16] (row stride ldc floats) is updated in place by kc steps of
// c ← fma(A[p][i], B[p][j], c) over the packed panels, p in increasing
// order: each element's sum is one chain of fused multiply-adds that
// starts from C's value, the order every product of this package uses.
// Twelve ymm accumulators hold the tile; Y0/Y1 hold one row of the B
// panel and Y2/Y3 broadcast elements of A.
TEXT ·kern6x16(SB), NOSPLIT, $0-40
	MOVQ kc+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ c+24(FP), DX
	MOVQ ldc+32(FP), R8
	SHLQ $2, R8
	MOVQ DX, R9
	VMOVUPS (R9), Y4
	VMOVUPS 32(R9), Y5
	ADDQ R8, R9
	VMOVUPS (R9), Y6
	VMOVUPS 32(R9), Y7
	ADDQ R8, R9
	VMOVUPS (R9), Y8
	VMOVUPS 32(R9), Y9
	ADDQ R8, R9
	VMOVUPS (R9), Y10
	VMOVUPS 32(R9), Y11
	ADDQ R8, R9
	VMOVUPS (R9), Y12
	VMOVUPS 32(R9), Y13
	ADDQ R8, R9
	VMOVUPS (R9), Y14
	VMOVUPS 32(R9), Y15

loop:
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VBROADCASTSS 0(SI), Y2
	VBROADCASTSS 4(SI), Y3
	VFMADD231PS Y0, Y2, Y4
	VFMADD231PS Y1, Y2, Y5
	VFMADD231PS Y0, Y3, Y6
	VFMADD231PS Y1, Y3, Y7
	VBROADCASTSS 8(SI), Y2
	VBROADCASTSS 12(SI), Y3
	VFMADD231PS Y0, Y2, Y8
	VFMADD231PS Y1, Y2, Y9
	VFMADD231PS Y0, Y3, Y10
	VFMADD231PS Y1, Y3, Y11
	VBROADCASTSS 16(SI), Y2
	VBROADCASTSS 20(SI), Y3
	VFMADD231PS Y0, Y2, Y12
	VFMADD231PS Y1, Y2, Y13
	VFMADD231PS Y0, Y3, Y14
	VFMADD231PS Y1, Y3, Y15
	ADDQ $24, SI
	ADDQ $64, DI
	DECQ CX
	JNZ loop

	VMOVUPS Y4, (DX)
	VMOVUPS Y5, 32(DX)
	ADDQ R8, DX
	VMOVUPS Y6, (DX)
	VMOVUPS Y7, 32(DX)
	ADDQ R8, DX
	VMOVUPS Y8, (DX)
	VMOVUPS Y9, 32(DX)
	ADDQ R8, DX
	VMOVUPS Y10, (DX)
	VMOVUPS Y11, 32(DX)
	ADDQ R8, DX
	VMOVUPS Y12, (DX)
	VMOVUPS Y13, 32(DX)
	ADDQ R8, DX
	VMOVUPS Y14, (DX)
	VMOVUPS Y15, 32(DX)
	VZEROUPPER
	RET

// The kernels below are kern6x16 for the last micro-panel of a block
// when it has fewer than 6 rows (products of 1 to 5 rows, and the rest
// of m mod 6): the same chain per element, on the rows that exist. With
// one or two rows, a single 16-column panel gives only 2 or 4
// independent chains, too few to hide the latency of an FMA, so kern1x64
// and kern2x32 take 4 and 2 adjacent panels (bs bytes apart) at once.

// Load row r (R9 points at it) of a 16-column C tile into two registers.
#define LOADROW(lo, hi) VMOVUPS (R9), lo; VMOVUPS 32(R9), hi; ADDQ R8, R9
// Store two registers to the row DX points at, and step to the next row.
#define STOREROW(lo, hi) VMOVUPS lo, (DX); VMOVUPS hi, 32(DX); ADDQ R8, DX
// One row of A (the broadcast off(SI)) times the B row in Y0/Y1.
#define FMAROW(off, lo, hi) VBROADCASTSS off(SI), Y2; VFMADD231PS Y0, Y2, lo; VFMADD231PS Y1, Y2, hi

#define KERNPROLOG \
	MOVQ kc+0(FP), CX; \
	MOVQ a+8(FP), SI; \
	MOVQ b+16(FP), DI; \
	MOVQ c+24(FP), DX; \
	MOVQ ldc+32(FP), R8; \
	SHLQ $2, R8; \
	MOVQ DX, R9

#define KERNSTEP \
	ADDQ $24, SI; \
	ADDQ $64, DI; \
	DECQ CX

// func kern5x16(kc int, a, b, c *float32, ldc int)
TEXT ·kern5x16(SB), NOSPLIT, $0-40
	KERNPROLOG
	LOADROW(Y4, Y5)
	LOADROW(Y6, Y7)
	LOADROW(Y8, Y9)
	LOADROW(Y10, Y11)
	LOADROW(Y12, Y13)

loop5:
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	FMAROW(0, Y4, Y5)
	FMAROW(4, Y6, Y7)
	FMAROW(8, Y8, Y9)
	FMAROW(12, Y10, Y11)
	FMAROW(16, Y12, Y13)
	KERNSTEP
	JNZ loop5

	STOREROW(Y4, Y5)
	STOREROW(Y6, Y7)
	STOREROW(Y8, Y9)
	STOREROW(Y10, Y11)
	STOREROW(Y12, Y13)
	VZEROUPPER
	RET

// func kern4x16(kc int, a, b, c *float32, ldc int)
TEXT ·kern4x16(SB), NOSPLIT, $0-40
	KERNPROLOG
	LOADROW(Y4, Y5)
	LOADROW(Y6, Y7)
	LOADROW(Y8, Y9)
	LOADROW(Y10, Y11)

loop4:
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	FMAROW(0, Y4, Y5)
	FMAROW(4, Y6, Y7)
	FMAROW(8, Y8, Y9)
	FMAROW(12, Y10, Y11)
	KERNSTEP
	JNZ loop4

	STOREROW(Y4, Y5)
	STOREROW(Y6, Y7)
	STOREROW(Y8, Y9)
	STOREROW(Y10, Y11)
	VZEROUPPER
	RET

// func kern3x16(kc int, a, b, c *float32, ldc int)
TEXT ·kern3x16(SB), NOSPLIT, $0-40
	KERNPROLOG
	LOADROW(Y4, Y5)
	LOADROW(Y6, Y7)
	LOADROW(Y8, Y9)

loop3:
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	FMAROW(0, Y4, Y5)
	FMAROW(4, Y6, Y7)
	FMAROW(8, Y8, Y9)
	KERNSTEP
	JNZ loop3

	STOREROW(Y4, Y5)
	STOREROW(Y6, Y7)
	STOREROW(Y8, Y9)
	VZEROUPPER
	RET

// func kern2x16(kc int, a, b, c *float32, ldc int)
TEXT ·kern2x16(SB), NOSPLIT, $0-40
	KERNPROLOG
	LOADROW(Y4, Y5)
	LOADROW(Y6, Y7)

loop2:
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	FMAROW(0, Y4, Y5)
	FMAROW(4, Y6, Y7)
	KERNSTEP
	JNZ loop2

	STOREROW(Y4, Y5)
	STOREROW(Y6, Y7)
	VZEROUPPER
	RET

// func kern1x16(kc int, a, b, c *float32, ldc int)
TEXT ·kern1x16(SB), NOSPLIT, $0-40
	KERNPROLOG
	LOADROW(Y4, Y5)

loop1:
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	FMAROW(0, Y4, Y5)
	KERNSTEP
	JNZ loop1

	STOREROW(Y4, Y5)
	VZEROUPPER
	RET

// func kern2x32(kc int, a, b *float32, bs int, c *float32, ldc int)
//
// Two rows of A times two adjacent panels: C[2×32].
TEXT ·kern2x32(SB), NOSPLIT, $0-48
	MOVQ kc+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ bs+24(FP), R10
	MOVQ c+32(FP), DX
	MOVQ ldc+40(FP), R8
	SHLQ $2, R8
	LEAQ (DI)(R10*1), R11
	VMOVUPS (DX), Y4
	VMOVUPS 32(DX), Y5
	VMOVUPS 64(DX), Y6
	VMOVUPS 96(DX), Y7
	VMOVUPS (DX)(R8*1), Y8
	VMOVUPS 32(DX)(R8*1), Y9
	VMOVUPS 64(DX)(R8*1), Y10
	VMOVUPS 96(DX)(R8*1), Y11
	XORQ AX, AX

loop2x32:
	VMOVUPS (DI)(AX*1), Y0
	VMOVUPS 32(DI)(AX*1), Y1
	VMOVUPS (R11)(AX*1), Y2
	VMOVUPS 32(R11)(AX*1), Y3
	VBROADCASTSS 0(SI), Y12
	VBROADCASTSS 4(SI), Y13
	VFMADD231PS Y0, Y12, Y4
	VFMADD231PS Y1, Y12, Y5
	VFMADD231PS Y2, Y12, Y6
	VFMADD231PS Y3, Y12, Y7
	VFMADD231PS Y0, Y13, Y8
	VFMADD231PS Y1, Y13, Y9
	VFMADD231PS Y2, Y13, Y10
	VFMADD231PS Y3, Y13, Y11
	ADDQ $24, SI
	ADDQ $64, AX
	DECQ CX
	JNZ loop2x32

	VMOVUPS Y4, (DX)
	VMOVUPS Y5, 32(DX)
	VMOVUPS Y6, 64(DX)
	VMOVUPS Y7, 96(DX)
	VMOVUPS Y8, (DX)(R8*1)
	VMOVUPS Y9, 32(DX)(R8*1)
	VMOVUPS Y10, 64(DX)(R8*1)
	VMOVUPS Y11, 96(DX)(R8*1)
	VZEROUPPER
	RET

// func kern1x64(kc int, a, b *float32, bs int, c *float32)
//
// One row of A times four adjacent panels: C[1×64].
TEXT ·kern1x64(SB), NOSPLIT, $0-40
	MOVQ kc+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ bs+24(FP), R10
	MOVQ c+32(FP), DX
	LEAQ (DI)(R10*1), R11
	LEAQ (R11)(R10*1), R12
	LEAQ (R12)(R10*1), R13
	VMOVUPS (DX), Y4
	VMOVUPS 32(DX), Y5
	VMOVUPS 64(DX), Y6
	VMOVUPS 96(DX), Y7
	VMOVUPS 128(DX), Y8
	VMOVUPS 160(DX), Y9
	VMOVUPS 192(DX), Y10
	VMOVUPS 224(DX), Y11
	XORQ AX, AX

loop1x64:
	VBROADCASTSS (SI), Y0
	VFMADD231PS (DI)(AX*1), Y0, Y4
	VFMADD231PS 32(DI)(AX*1), Y0, Y5
	VFMADD231PS (R11)(AX*1), Y0, Y6
	VFMADD231PS 32(R11)(AX*1), Y0, Y7
	VFMADD231PS (R12)(AX*1), Y0, Y8
	VFMADD231PS 32(R12)(AX*1), Y0, Y9
	VFMADD231PS (R13)(AX*1), Y0, Y10
	VFMADD231PS 32(R13)(AX*1), Y0, Y11
	ADDQ $24, SI
	ADDQ $64, AX
	DECQ CX
	JNZ loop1x64

	VMOVUPS Y4, (DX)
	VMOVUPS Y5, 32(DX)
	VMOVUPS Y6, 64(DX)
	VMOVUPS Y7, 96(DX)
	VMOVUPS Y8, 128(DX)
	VMOVUPS Y9, 160(DX)
	VMOVUPS Y10, 192(DX)
	VMOVUPS Y11, 224(DX)
	VZEROUPPER
	RET

// func packT8(k8 int, src *float32, lds int, dst *float32)
//
// dst[p·16 + r] = src[r·lds + p] for r < 8 and p < k8 (a multiple of 8):
// eight rows of B, stored n×k, into half of a packed 16-column panel.
// Each 8×8 block is loaded as four-column halves, rows r and r+4 in the
// two lanes of one register, and transposed with UNPCK and SHUFPS
// (16 shuffles per 64 values).
TEXT ·packT8(SB), NOSPLIT, $0-32
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
	JZ   packdone

packloop:
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
	VMOVUPS Y13, 64(DI)
	VMOVUPS Y14, 128(DI)
	VMOVUPS Y15, 192(DI)

	VUNPCKLPS Y5, Y4, Y8
	VUNPCKHPS Y5, Y4, Y9
	VUNPCKLPS Y7, Y6, Y10
	VUNPCKHPS Y7, Y6, Y11
	VSHUFPS $0x44, Y10, Y8, Y12
	VSHUFPS $0xEE, Y10, Y8, Y13
	VSHUFPS $0x44, Y11, Y9, Y14
	VSHUFPS $0xEE, Y11, Y9, Y15
	VMOVUPS Y12, 256(DI)
	VMOVUPS Y13, 320(DI)
	VMOVUPS Y14, 384(DI)
	VMOVUPS Y15, 448(DI)

	ADDQ $32, SI
	ADDQ $32, R9
	ADDQ $32, R10
	ADDQ $32, R11
	ADDQ $512, DI
	DECQ CX
	JNZ  packloop

packdone:
	VZEROUPPER
	RET

// func packRows6(k8 int, src *float32, lds int, alpha float32, dst *float32)
//
// dst[p·6 + i] = alpha·src[i·lds + p] for i < 6 and p < k8 (a multiple
// of 8): six rows of A, stored m×k, into a packed A micro-panel. The
// 8×8 transpose of packT8 runs with row 5 standing in for rows 6 and 7,
// and each p stores all eight lanes: its last two values land on p+1's
// first two, which the next store (or the caller, after the last p)
// overwrites.
TEXT ·packRows6(SB), NOSPLIT, $0-40
	MOVQ k8+0(FP), CX
	MOVQ src+8(FP), SI
	MOVQ lds+16(FP), R8
	SHLQ $2, R8
	VBROADCASTSS alpha+24(FP), Y15
	MOVQ dst+32(FP), DI
	LEAQ (SI)(R8*1), R9
	LEAQ (R9)(R8*1), R10
	LEAQ (R10)(R8*1), R11
	LEAQ (R11)(R8*1), R12
	LEAQ (R12)(R8*1), R13
	XORQ AX, AX
	SHRQ $3, CX
	JZ   rows6done

rows6loop:
	VMOVUPS (SI)(AX*1), X0
	VINSERTF128 $1, (R12)(AX*1), Y0, Y0
	VMOVUPS (R9)(AX*1), X1
	VINSERTF128 $1, (R13)(AX*1), Y1, Y1
	VMOVUPS (R10)(AX*1), X2
	VINSERTF128 $1, (R13)(AX*1), Y2, Y2
	VMOVUPS (R11)(AX*1), X3
	VINSERTF128 $1, (R13)(AX*1), Y3, Y3
	VMOVUPS 16(SI)(AX*1), X4
	VINSERTF128 $1, 16(R12)(AX*1), Y4, Y4
	VMOVUPS 16(R9)(AX*1), X5
	VINSERTF128 $1, 16(R13)(AX*1), Y5, Y5
	VMOVUPS 16(R10)(AX*1), X6
	VINSERTF128 $1, 16(R13)(AX*1), Y6, Y6
	VMOVUPS 16(R11)(AX*1), X7
	VINSERTF128 $1, 16(R13)(AX*1), Y7, Y7
	VMULPS Y15, Y0, Y0
	VMULPS Y15, Y1, Y1
	VMULPS Y15, Y2, Y2
	VMULPS Y15, Y3, Y3
	VMULPS Y15, Y4, Y4
	VMULPS Y15, Y5, Y5
	VMULPS Y15, Y6, Y6
	VMULPS Y15, Y7, Y7

	VUNPCKLPS Y1, Y0, Y8
	VUNPCKHPS Y1, Y0, Y9
	VUNPCKLPS Y3, Y2, Y10
	VUNPCKHPS Y3, Y2, Y11
	VSHUFPS $0x44, Y10, Y8, Y0
	VSHUFPS $0xEE, Y10, Y8, Y1
	VSHUFPS $0x44, Y11, Y9, Y2
	VSHUFPS $0xEE, Y11, Y9, Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 24(DI)
	VMOVUPS Y2, 48(DI)
	VMOVUPS Y3, 72(DI)

	VUNPCKLPS Y5, Y4, Y8
	VUNPCKHPS Y5, Y4, Y9
	VUNPCKLPS Y7, Y6, Y10
	VUNPCKHPS Y7, Y6, Y11
	VSHUFPS $0x44, Y10, Y8, Y4
	VSHUFPS $0xEE, Y10, Y8, Y5
	VSHUFPS $0x44, Y11, Y9, Y6
	VSHUFPS $0xEE, Y11, Y9, Y7
	VMOVUPS Y4, 96(DI)
	VMOVUPS Y5, 120(DI)
	VMOVUPS Y6, 144(DI)
	VMOVUPS Y7, 168(DI)

	ADDQ $32, AX
	ADDQ $192, DI
	DECQ CX
	JNZ  rows6loop

rows6done:
	VZEROUPPER
	RET

// func packCols6(k int, src *float32, lds int, alpha float32, dst *float32)
//
// dst[p·6 + i] = alpha·src[p·lds + i] for i < 6 and p < k: six columns
// of A, stored k×m, into a packed A micro-panel. Each p loads its six
// values (four and two) and stores eight lanes, the last two landing on
// p+1's first two as in packRows6.
TEXT ·packCols6(SB), NOSPLIT, $0-40
	MOVQ k+0(FP), CX
	MOVQ src+8(FP), SI
	MOVQ lds+16(FP), R8
	SHLQ $2, R8
	VBROADCASTSS alpha+24(FP), Y15
	MOVQ dst+32(FP), DI
	TESTQ CX, CX
	JZ   cols6done

cols6loop:
	VMOVUPS (SI), X0
	VMOVSD 16(SI), X1
	VINSERTF128 $1, X1, Y0, Y0
	VMULPS Y15, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ R8, SI
	ADDQ $24, DI
	DECQ CX
	JNZ  cols6loop

cols6done:
	VZEROUPPER
	RET

// func axpyFMA(n int, alpha float32, x, y *float32)
TEXT ·axpyFMA(SB), NOSPLIT, $0-32
	MOVQ n+0(FP), CX
	VBROADCASTSS alpha+8(FP), Y0
	MOVQ x+16(FP), SI
	MOVQ y+24(FP), DI

axpy32:
	CMPQ CX, $32
	JL   axpy8
	VMOVUPS (DI), Y1
	VMOVUPS 32(DI), Y2
	VMOVUPS 64(DI), Y3
	VMOVUPS 96(DI), Y4
	VFMADD231PS (SI), Y0, Y1
	VFMADD231PS 32(SI), Y0, Y2
	VFMADD231PS 64(SI), Y0, Y3
	VFMADD231PS 96(SI), Y0, Y4
	VMOVUPS Y1, (DI)
	VMOVUPS Y2, 32(DI)
	VMOVUPS Y3, 64(DI)
	VMOVUPS Y4, 96(DI)
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP  axpy32

axpy8:
	CMPQ CX, $8
	JL   axpytail
	VMOVUPS (DI), Y1
	VFMADD231PS (SI), Y0, Y1
	VMOVUPS Y1, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  axpy8

axpytail:
	TESTQ CX, CX
	JZ    axpydone
	VMOVSS (DI), X1
	VFMADD231SS (SI), X0, X1
	VMOVSS X1, (DI)
	ADDQ $4, SI
	ADDQ $4, DI
	DECQ CX
	JMP  axpytail

axpydone:
	VZEROUPPER
	RET

// Constants of expShiftAVX2, each repeated in 8 lanes.
DATA expc<>+0(SB)/4, $0x3fb8aa3b
DATA expc<>+4(SB)/4, $0x3fb8aa3b
DATA expc<>+8(SB)/4, $0x3fb8aa3b
DATA expc<>+12(SB)/4, $0x3fb8aa3b
DATA expc<>+16(SB)/4, $0x3fb8aa3b
DATA expc<>+20(SB)/4, $0x3fb8aa3b
DATA expc<>+24(SB)/4, $0x3fb8aa3b
DATA expc<>+28(SB)/4, $0x3fb8aa3b
DATA expc<>+32(SB)/4, $0x3f318000
DATA expc<>+36(SB)/4, $0x3f318000
DATA expc<>+40(SB)/4, $0x3f318000
DATA expc<>+44(SB)/4, $0x3f318000
DATA expc<>+48(SB)/4, $0x3f318000
DATA expc<>+52(SB)/4, $0x3f318000
DATA expc<>+56(SB)/4, $0x3f318000
DATA expc<>+60(SB)/4, $0x3f318000
DATA expc<>+64(SB)/4, $0xb95e8083
DATA expc<>+68(SB)/4, $0xb95e8083
DATA expc<>+72(SB)/4, $0xb95e8083
DATA expc<>+76(SB)/4, $0xb95e8083
DATA expc<>+80(SB)/4, $0xb95e8083
DATA expc<>+84(SB)/4, $0xb95e8083
DATA expc<>+88(SB)/4, $0xb95e8083
DATA expc<>+92(SB)/4, $0xb95e8083
DATA expc<>+96(SB)/4, $0x39500d01
DATA expc<>+100(SB)/4, $0x39500d01
DATA expc<>+104(SB)/4, $0x39500d01
DATA expc<>+108(SB)/4, $0x39500d01
DATA expc<>+112(SB)/4, $0x39500d01
DATA expc<>+116(SB)/4, $0x39500d01
DATA expc<>+120(SB)/4, $0x39500d01
DATA expc<>+124(SB)/4, $0x39500d01
DATA expc<>+128(SB)/4, $0x3ab60b61
DATA expc<>+132(SB)/4, $0x3ab60b61
DATA expc<>+136(SB)/4, $0x3ab60b61
DATA expc<>+140(SB)/4, $0x3ab60b61
DATA expc<>+144(SB)/4, $0x3ab60b61
DATA expc<>+148(SB)/4, $0x3ab60b61
DATA expc<>+152(SB)/4, $0x3ab60b61
DATA expc<>+156(SB)/4, $0x3ab60b61
DATA expc<>+160(SB)/4, $0x3c088889
DATA expc<>+164(SB)/4, $0x3c088889
DATA expc<>+168(SB)/4, $0x3c088889
DATA expc<>+172(SB)/4, $0x3c088889
DATA expc<>+176(SB)/4, $0x3c088889
DATA expc<>+180(SB)/4, $0x3c088889
DATA expc<>+184(SB)/4, $0x3c088889
DATA expc<>+188(SB)/4, $0x3c088889
DATA expc<>+192(SB)/4, $0x3d2aaaab
DATA expc<>+196(SB)/4, $0x3d2aaaab
DATA expc<>+200(SB)/4, $0x3d2aaaab
DATA expc<>+204(SB)/4, $0x3d2aaaab
DATA expc<>+208(SB)/4, $0x3d2aaaab
DATA expc<>+212(SB)/4, $0x3d2aaaab
DATA expc<>+216(SB)/4, $0x3d2aaaab
DATA expc<>+220(SB)/4, $0x3d2aaaab
DATA expc<>+224(SB)/4, $0x3e2aaaab
DATA expc<>+228(SB)/4, $0x3e2aaaab
DATA expc<>+232(SB)/4, $0x3e2aaaab
DATA expc<>+236(SB)/4, $0x3e2aaaab
DATA expc<>+240(SB)/4, $0x3e2aaaab
DATA expc<>+244(SB)/4, $0x3e2aaaab
DATA expc<>+248(SB)/4, $0x3e2aaaab
DATA expc<>+252(SB)/4, $0x3e2aaaab
DATA expc<>+256(SB)/4, $0x3f000000
DATA expc<>+260(SB)/4, $0x3f000000
DATA expc<>+264(SB)/4, $0x3f000000
DATA expc<>+268(SB)/4, $0x3f000000
DATA expc<>+272(SB)/4, $0x3f000000
DATA expc<>+276(SB)/4, $0x3f000000
DATA expc<>+280(SB)/4, $0x3f000000
DATA expc<>+284(SB)/4, $0x3f000000
DATA expc<>+288(SB)/4, $0x3f800000
DATA expc<>+292(SB)/4, $0x3f800000
DATA expc<>+296(SB)/4, $0x3f800000
DATA expc<>+300(SB)/4, $0x3f800000
DATA expc<>+304(SB)/4, $0x3f800000
DATA expc<>+308(SB)/4, $0x3f800000
DATA expc<>+312(SB)/4, $0x3f800000
DATA expc<>+316(SB)/4, $0x3f800000
DATA expc<>+320(SB)/4, $0x7f
DATA expc<>+324(SB)/4, $0x7f
DATA expc<>+328(SB)/4, $0x7f
DATA expc<>+332(SB)/4, $0x7f
DATA expc<>+336(SB)/4, $0x7f
DATA expc<>+340(SB)/4, $0x7f
DATA expc<>+344(SB)/4, $0x7f
DATA expc<>+348(SB)/4, $0x7f
DATA expc<>+352(SB)/4, $0x42b00000
DATA expc<>+356(SB)/4, $0x42b00000
DATA expc<>+360(SB)/4, $0x42b00000
DATA expc<>+364(SB)/4, $0x42b00000
DATA expc<>+368(SB)/4, $0x42b00000
DATA expc<>+372(SB)/4, $0x42b00000
DATA expc<>+376(SB)/4, $0x42b00000
DATA expc<>+380(SB)/4, $0x42b00000
DATA expc<>+384(SB)/4, $0xc2aeac4f
DATA expc<>+388(SB)/4, $0xc2aeac4f
DATA expc<>+392(SB)/4, $0xc2aeac4f
DATA expc<>+396(SB)/4, $0xc2aeac4f
DATA expc<>+400(SB)/4, $0xc2aeac4f
DATA expc<>+404(SB)/4, $0xc2aeac4f
DATA expc<>+408(SB)/4, $0xc2aeac4f
DATA expc<>+412(SB)/4, $0xc2aeac4f
GLOBL expc<>(SB), RODATA|NOPTR, $416

// func expShiftAVX2(n int, x *float32, shift float32) float64
//
// x[i] = e^(x[i]−shift) for i < n (n a multiple of 8), returning the sum
// accumulated in float64. The method is exp32's (round to nearest n =
// x·log2e, two-part ln2 reduction, degree-7 Taylor polynomial, 2^n by
// exponent bits), 8 lanes at a time. Arguments are clamped to [lo, 88]
// with the input as the second operand of VMINPS/VMAXPS so that NaN
// propagates; lanes below lo (−87.34) are zeroed.
TEXT ·expShiftAVX2(SB), NOSPLIT, $0-32
	MOVQ n+0(FP), CX
	MOVQ x+8(FP), SI
	VBROADCASTSS shift+16(FP), Y0
	VMOVUPS expc<>+352(SB), Y4
	VMOVUPS expc<>+384(SB), Y5
	VXORPD Y14, Y14, Y14
	VXORPD Y15, Y15, Y15
	TESTQ CX, CX
	JZ    expreduce

exploop:
	VMOVUPS (SI), Y1
	VSUBPS Y0, Y1, Y1
	VCMPPS $1, Y5, Y1, Y7
	VMINPS Y1, Y4, Y1
	VMAXPS Y1, Y5, Y1
	VMULPS expc<>+0(SB), Y1, Y2
	VROUNDPS $0, Y2, Y2
	VFNMADD231PS expc<>+32(SB), Y2, Y1
	VFNMADD231PS expc<>+64(SB), Y2, Y1
	VMOVUPS expc<>+96(SB), Y3
	VFMADD213PS expc<>+128(SB), Y1, Y3
	VFMADD213PS expc<>+160(SB), Y1, Y3
	VFMADD213PS expc<>+192(SB), Y1, Y3
	VFMADD213PS expc<>+224(SB), Y1, Y3
	VFMADD213PS expc<>+256(SB), Y1, Y3
	VFMADD213PS expc<>+288(SB), Y1, Y3
	VFMADD213PS expc<>+288(SB), Y1, Y3
	VCVTPS2DQ Y2, Y2
	VPADDD expc<>+320(SB), Y2, Y2
	VPSLLD $23, Y2, Y2
	VMULPS Y2, Y3, Y3
	VANDNPS Y3, Y7, Y3
	VMOVUPS Y3, (SI)
	VCVTPS2PD X3, Y8
	VADDPD Y8, Y14, Y14
	VEXTRACTF128 $1, Y3, X9
	VCVTPS2PD X9, Y9
	VADDPD Y9, Y15, Y15
	ADDQ $32, SI
	SUBQ $8, CX
	JNZ  exploop

expreduce:
	VADDPD Y15, Y14, Y14
	VEXTRACTF128 $1, Y14, X15
	VADDPD X15, X14, X14
	VPERMILPD $1, X14, X15
	VADDSD X15, X14, X14
	VMOVSD X14, ret+24(FP)
	VZEROUPPER
	RET
