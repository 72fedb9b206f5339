//go:build amd64 && !noasm

#include "textflag.h"

// Constants of SIGMOID, each repeated in 8 lanes: the sign bit, Exp32's
// constants as float32 (log2e, 1.5·2²³, ln2 in two parts, the Taylor
// coefficients 1/5040 … 1/2, 1, the input bounds 88.72283 and −87.33654,
// +Inf) and the integers 127 and 126.
DATA swc<>+0(SB)/4, $0x80000000
DATA swc<>+4(SB)/4, $0x80000000
DATA swc<>+8(SB)/4, $0x80000000
DATA swc<>+12(SB)/4, $0x80000000
DATA swc<>+16(SB)/4, $0x80000000
DATA swc<>+20(SB)/4, $0x80000000
DATA swc<>+24(SB)/4, $0x80000000
DATA swc<>+28(SB)/4, $0x80000000
DATA swc<>+32(SB)/4, $0x3fb8aa3b
DATA swc<>+36(SB)/4, $0x3fb8aa3b
DATA swc<>+40(SB)/4, $0x3fb8aa3b
DATA swc<>+44(SB)/4, $0x3fb8aa3b
DATA swc<>+48(SB)/4, $0x3fb8aa3b
DATA swc<>+52(SB)/4, $0x3fb8aa3b
DATA swc<>+56(SB)/4, $0x3fb8aa3b
DATA swc<>+60(SB)/4, $0x3fb8aa3b
DATA swc<>+64(SB)/4, $0x4b400000
DATA swc<>+68(SB)/4, $0x4b400000
DATA swc<>+72(SB)/4, $0x4b400000
DATA swc<>+76(SB)/4, $0x4b400000
DATA swc<>+80(SB)/4, $0x4b400000
DATA swc<>+84(SB)/4, $0x4b400000
DATA swc<>+88(SB)/4, $0x4b400000
DATA swc<>+92(SB)/4, $0x4b400000
DATA swc<>+96(SB)/4, $0x3f318000
DATA swc<>+100(SB)/4, $0x3f318000
DATA swc<>+104(SB)/4, $0x3f318000
DATA swc<>+108(SB)/4, $0x3f318000
DATA swc<>+112(SB)/4, $0x3f318000
DATA swc<>+116(SB)/4, $0x3f318000
DATA swc<>+120(SB)/4, $0x3f318000
DATA swc<>+124(SB)/4, $0x3f318000
DATA swc<>+128(SB)/4, $0xb95e8083
DATA swc<>+132(SB)/4, $0xb95e8083
DATA swc<>+136(SB)/4, $0xb95e8083
DATA swc<>+140(SB)/4, $0xb95e8083
DATA swc<>+144(SB)/4, $0xb95e8083
DATA swc<>+148(SB)/4, $0xb95e8083
DATA swc<>+152(SB)/4, $0xb95e8083
DATA swc<>+156(SB)/4, $0xb95e8083
DATA swc<>+160(SB)/4, $0x39500d01
DATA swc<>+164(SB)/4, $0x39500d01
DATA swc<>+168(SB)/4, $0x39500d01
DATA swc<>+172(SB)/4, $0x39500d01
DATA swc<>+176(SB)/4, $0x39500d01
DATA swc<>+180(SB)/4, $0x39500d01
DATA swc<>+184(SB)/4, $0x39500d01
DATA swc<>+188(SB)/4, $0x39500d01
DATA swc<>+192(SB)/4, $0x3ab60b61
DATA swc<>+196(SB)/4, $0x3ab60b61
DATA swc<>+200(SB)/4, $0x3ab60b61
DATA swc<>+204(SB)/4, $0x3ab60b61
DATA swc<>+208(SB)/4, $0x3ab60b61
DATA swc<>+212(SB)/4, $0x3ab60b61
DATA swc<>+216(SB)/4, $0x3ab60b61
DATA swc<>+220(SB)/4, $0x3ab60b61
DATA swc<>+224(SB)/4, $0x3c088889
DATA swc<>+228(SB)/4, $0x3c088889
DATA swc<>+232(SB)/4, $0x3c088889
DATA swc<>+236(SB)/4, $0x3c088889
DATA swc<>+240(SB)/4, $0x3c088889
DATA swc<>+244(SB)/4, $0x3c088889
DATA swc<>+248(SB)/4, $0x3c088889
DATA swc<>+252(SB)/4, $0x3c088889
DATA swc<>+256(SB)/4, $0x3d2aaaab
DATA swc<>+260(SB)/4, $0x3d2aaaab
DATA swc<>+264(SB)/4, $0x3d2aaaab
DATA swc<>+268(SB)/4, $0x3d2aaaab
DATA swc<>+272(SB)/4, $0x3d2aaaab
DATA swc<>+276(SB)/4, $0x3d2aaaab
DATA swc<>+280(SB)/4, $0x3d2aaaab
DATA swc<>+284(SB)/4, $0x3d2aaaab
DATA swc<>+288(SB)/4, $0x3e2aaaab
DATA swc<>+292(SB)/4, $0x3e2aaaab
DATA swc<>+296(SB)/4, $0x3e2aaaab
DATA swc<>+300(SB)/4, $0x3e2aaaab
DATA swc<>+304(SB)/4, $0x3e2aaaab
DATA swc<>+308(SB)/4, $0x3e2aaaab
DATA swc<>+312(SB)/4, $0x3e2aaaab
DATA swc<>+316(SB)/4, $0x3e2aaaab
DATA swc<>+320(SB)/4, $0x3f000000
DATA swc<>+324(SB)/4, $0x3f000000
DATA swc<>+328(SB)/4, $0x3f000000
DATA swc<>+332(SB)/4, $0x3f000000
DATA swc<>+336(SB)/4, $0x3f000000
DATA swc<>+340(SB)/4, $0x3f000000
DATA swc<>+344(SB)/4, $0x3f000000
DATA swc<>+348(SB)/4, $0x3f000000
DATA swc<>+352(SB)/4, $0x3f800000
DATA swc<>+356(SB)/4, $0x3f800000
DATA swc<>+360(SB)/4, $0x3f800000
DATA swc<>+364(SB)/4, $0x3f800000
DATA swc<>+368(SB)/4, $0x3f800000
DATA swc<>+372(SB)/4, $0x3f800000
DATA swc<>+376(SB)/4, $0x3f800000
DATA swc<>+380(SB)/4, $0x3f800000
DATA swc<>+384(SB)/4, $0x42b17217
DATA swc<>+388(SB)/4, $0x42b17217
DATA swc<>+392(SB)/4, $0x42b17217
DATA swc<>+396(SB)/4, $0x42b17217
DATA swc<>+400(SB)/4, $0x42b17217
DATA swc<>+404(SB)/4, $0x42b17217
DATA swc<>+408(SB)/4, $0x42b17217
DATA swc<>+412(SB)/4, $0x42b17217
DATA swc<>+416(SB)/4, $0xc2aeac4f
DATA swc<>+420(SB)/4, $0xc2aeac4f
DATA swc<>+424(SB)/4, $0xc2aeac4f
DATA swc<>+428(SB)/4, $0xc2aeac4f
DATA swc<>+432(SB)/4, $0xc2aeac4f
DATA swc<>+436(SB)/4, $0xc2aeac4f
DATA swc<>+440(SB)/4, $0xc2aeac4f
DATA swc<>+444(SB)/4, $0xc2aeac4f
DATA swc<>+448(SB)/4, $0x7f800000
DATA swc<>+452(SB)/4, $0x7f800000
DATA swc<>+456(SB)/4, $0x7f800000
DATA swc<>+460(SB)/4, $0x7f800000
DATA swc<>+464(SB)/4, $0x7f800000
DATA swc<>+468(SB)/4, $0x7f800000
DATA swc<>+472(SB)/4, $0x7f800000
DATA swc<>+476(SB)/4, $0x7f800000
DATA swc<>+480(SB)/4, $0x0000007f
DATA swc<>+484(SB)/4, $0x0000007f
DATA swc<>+488(SB)/4, $0x0000007f
DATA swc<>+492(SB)/4, $0x0000007f
DATA swc<>+496(SB)/4, $0x0000007f
DATA swc<>+500(SB)/4, $0x0000007f
DATA swc<>+504(SB)/4, $0x0000007f
DATA swc<>+508(SB)/4, $0x0000007f
DATA swc<>+512(SB)/4, $0x0000007e
DATA swc<>+516(SB)/4, $0x0000007e
DATA swc<>+520(SB)/4, $0x0000007e
DATA swc<>+524(SB)/4, $0x0000007e
DATA swc<>+528(SB)/4, $0x0000007e
DATA swc<>+532(SB)/4, $0x0000007e
DATA swc<>+536(SB)/4, $0x0000007e
DATA swc<>+540(SB)/4, $0x0000007e
GLOBL swc<>(SB), RODATA|NOPTR, $544

// SIGMOID sets Y1 = 1/(1 + exp32(−Y0)) lane by lane, with exactly the
// operations of the scalar Exp32 and sigmoid (each rounded on its own: no
// fused multiply-add), so every lane has the scalar result's bits. It
// uses Y8–Y15.
#define SIGMOID \
	VXORPS swc<>+0(SB), Y0, Y8; \
	VCMPPS $6, swc<>+384(SB), Y8, Y9; \
	VCMPPS $1, swc<>+416(SB), Y8, Y10; \
	VMULPS swc<>+32(SB), Y8, Y11; \
	VADDPS swc<>+64(SB), Y11, Y11; \
	VSUBPS swc<>+64(SB), Y11, Y12; \
	VMULPS swc<>+96(SB), Y12, Y11; \
	VSUBPS Y11, Y8, Y13; \
	VMULPS swc<>+128(SB), Y12, Y11; \
	VSUBPS Y11, Y13, Y13; \
	VMOVUPS swc<>+160(SB), Y14; \
	VMULPS Y13, Y14, Y14; \
	VADDPS swc<>+192(SB), Y14, Y14; \
	VMULPS Y13, Y14, Y14; \
	VADDPS swc<>+224(SB), Y14, Y14; \
	VMULPS Y13, Y14, Y14; \
	VADDPS swc<>+256(SB), Y14, Y14; \
	VMULPS Y13, Y14, Y14; \
	VADDPS swc<>+288(SB), Y14, Y14; \
	VMULPS Y13, Y14, Y14; \
	VADDPS swc<>+320(SB), Y14, Y14; \
	VMULPS Y13, Y14, Y14; \
	VADDPS swc<>+352(SB), Y14, Y14; \
	VMULPS Y13, Y14, Y14; \
	VADDPS swc<>+352(SB), Y14, Y14; \
	VCVTTPS2DQ Y12, Y12; \
	VPADDD swc<>+480(SB), Y12, Y11; \
	VPSLLD $23, Y11, Y11; \
	VMULPS Y11, Y14, Y15; \
	VPCMPGTD swc<>+480(SB), Y12, Y11; \
	VADDPS Y14, Y14, Y13; \
	VPADDD swc<>+512(SB), Y12, Y12; \
	VPSLLD $23, Y12, Y12; \
	VMULPS Y12, Y13, Y13; \
	VBLENDVPS Y11, Y13, Y15, Y15; \
	VANDNPS Y15, Y10, Y15; \
	VADDPS swc<>+448(SB), Y8, Y11; \
	VBLENDVPS Y9, Y11, Y15, Y15; \
	VADDPS swc<>+352(SB), Y15, Y15; \
	VMOVUPS swc<>+352(SB), Y1; \
	VDIVPS Y15, Y1, Y1

// func swigluAVX2(n int, out, gate, up *float32)
//
// out[i] = (g[i]·σ(g[i]))·u[i] for i < n (n a multiple of 8): the scalar
// swiglu's operations in its order.
TEXT ·swigluAVX2(SB), NOSPLIT, $0-32
	MOVQ n+0(FP), CX
	MOVQ out+8(FP), DI
	MOVQ gate+16(FP), SI
	MOVQ up+24(FP), DX
	TESTQ CX, CX
	JZ   swdone

swloop:
	VMOVUPS (SI), Y0
	SIGMOID
	VMULPS Y1, Y0, Y2
	VMULPS (DX), Y2, Y2
	VMOVUPS Y2, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	SUBQ $8, CX
	JNZ  swloop

swdone:
	VZEROUPPER
	RET

// func swigluGradAVX2(n int, dg, du, dout, gate, up *float32, which int)
//
// For i < n (a multiple of 8), with s = σ(g[i]): when which&1,
// dg[i] = dg[i] + ((do[i]·u[i])·s)·(1 + g[i]·(1 − s)); when which&2,
// du[i] = du[i] + (do[i]·g[i])·s — the scalar gradient's operations in its
// order.
TEXT ·swigluGradAVX2(SB), NOSPLIT, $0-56
	MOVQ n+0(FP), CX
	MOVQ dg+8(FP), DI
	MOVQ du+16(FP), R8
	MOVQ dout+24(FP), R9
	MOVQ gate+32(FP), SI
	MOVQ up+40(FP), DX
	MOVQ which+48(FP), BX
	TESTQ CX, CX
	JZ   sgdone

sgloop:
	VMOVUPS (SI), Y0
	SIGMOID
	VMOVUPS (R9), Y2
	TESTQ $1, BX
	JZ   sgdu
	VMOVUPS swc<>+352(SB), Y3
	VSUBPS Y1, Y3, Y3
	VMULPS Y0, Y3, Y3
	VADDPS swc<>+352(SB), Y3, Y3
	VMULPS (DX), Y2, Y4
	VMULPS Y1, Y4, Y4
	VMULPS Y3, Y4, Y4
	VADDPS (DI), Y4, Y4
	VMOVUPS Y4, (DI)

sgdu:
	TESTQ $2, BX
	JZ   sgnext
	VMULPS Y0, Y2, Y5
	VMULPS Y1, Y5, Y5
	VADDPS (R8), Y5, Y5
	VMOVUPS Y5, (R8)

sgnext:
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	ADDQ $32, R8
	ADDQ $32, R9
	SUBQ $8, CX
	JNZ  sgloop

sgdone:
	VZEROUPPER
	RET
