//go:build amd64 && !noasm

#include "textflag.h"

// func kern6x16(kc int, a, b, c *float32, ldc int)
//
// C[6×16] (row stride ldc floats) += Σ_p A[p][0..5] ⊗ B[p][0..15] over kc
// steps of the packed panels. Twelve ymm accumulators hold the tile; Y0/Y1
// hold one row of the B panel and Y2/Y3 broadcast elements of A.
TEXT ·kern6x16(SB), NOSPLIT, $0-40
	MOVQ kc+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ c+24(FP), DX
	MOVQ ldc+32(FP), R8
	SHLQ $2, R8
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15

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

	VADDPS (DX), Y4, Y4
	VMOVUPS Y4, (DX)
	VADDPS 32(DX), Y5, Y5
	VMOVUPS Y5, 32(DX)
	ADDQ R8, DX
	VADDPS (DX), Y6, Y6
	VMOVUPS Y6, (DX)
	VADDPS 32(DX), Y7, Y7
	VMOVUPS Y7, 32(DX)
	ADDQ R8, DX
	VADDPS (DX), Y8, Y8
	VMOVUPS Y8, (DX)
	VADDPS 32(DX), Y9, Y9
	VMOVUPS Y9, 32(DX)
	ADDQ R8, DX
	VADDPS (DX), Y10, Y10
	VMOVUPS Y10, (DX)
	VADDPS 32(DX), Y11, Y11
	VMOVUPS Y11, 32(DX)
	ADDQ R8, DX
	VADDPS (DX), Y12, Y12
	VMOVUPS Y12, (DX)
	VADDPS 32(DX), Y13, Y13
	VMOVUPS Y13, 32(DX)
	ADDQ R8, DX
	VADDPS (DX), Y14, Y14
	VMOVUPS Y14, (DX)
	VADDPS 32(DX), Y15, Y15
	VMOVUPS Y15, 32(DX)
	VZEROUPPER
	RET

// func dotFMA(n int, x, y *float32) float32
TEXT ·dotFMA(SB), NOSPLIT, $0-28
	MOVQ n+0(FP), CX
	MOVQ x+8(FP), SI
	MOVQ y+16(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

dot32:
	CMPQ CX, $32
	JL   dot8
	VMOVUPS (SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VFMADD231PS (DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP  dot32

dot8:
	CMPQ CX, $8
	JL   dotreduce
	VMOVUPS (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  dot8

dotreduce:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VPERMILPS $0x0e, X0, X1
	VADDPS X1, X0, X0
	VPERMILPS $0x01, X0, X1
	VADDSS X1, X0, X0

dottail:
	TESTQ CX, CX
	JZ    dotdone
	VMOVSS (SI), X1
	VFMADD231SS (DI), X1, X0
	ADDQ $4, SI
	ADDQ $4, DI
	DECQ CX
	JMP  dottail

dotdone:
	VZEROUPPER
	MOVSS X0, ret+24(FP)
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

// func dot4FMA(n int, x, y *float32, ldy int, out *float32)
//
// out[r] = Σ_{i<n} x[i]·y[r·ldy+i] for r = 0..3, n a multiple of 8: four
// rows of B share each load of x (the decode GEMV, y = W·x). Y0–Y7 are
// two accumulators per row; the horizontal sums are folded with VHADDPS.
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
