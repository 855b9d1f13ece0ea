#include "textflag.h"

// Vector forms of sgd.go's kernels, four elements at a time: each float32 is
// widened to float64 and every operation is the scalar code's, in its order,
// without fused multiply-adds (Go does not fuse them on amd64), so the results
// are the same bits. n is a multiple of 4.

// func sgdPlainAVX(w, grad *float32, n int, lr, wd float64)
TEXT ·sgdPlainAVX(SB), NOSPLIT, $0-40
	MOVQ         w+0(FP), DI
	MOVQ         grad+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSD lr+24(FP), Y14
	VBROADCASTSD wd+32(FP), Y15
	XORQ         AX, AX

plainLoop:
	CMPQ       AX, CX
	JGE        plainDone
	VCVTPS2PD  (DI)(AX*4), Y0 // w
	VCVTPS2PD  (SI)(AX*4), Y1 // g
	VMULPD     Y15, Y0, Y2    // wd*w
	VADDPD     Y2, Y1, Y1     // d = g + wd*w
	VMULPD     Y14, Y1, Y1    // lr*d
	VSUBPD     Y1, Y0, Y0     // w - lr*d
	VCVTPD2PSY Y0, X0
	VMOVUPS    X0, (DI)(AX*4)
	ADDQ       $4, AX
	JMP        plainLoop

plainDone:
	VZEROUPPER
	RET

// func sgdMomentumAVX(w, grad, b *float32, n int, lr, wd, m float64, nesterov bool)
TEXT ·sgdMomentumAVX(SB), NOSPLIT, $0-57
	MOVQ         w+0(FP), DI
	MOVQ         grad+8(FP), SI
	MOVQ         b+16(FP), DX
	MOVQ         n+24(FP), CX
	VBROADCASTSD lr+32(FP), Y13
	VBROADCASTSD wd+40(FP), Y14
	VBROADCASTSD m+48(FP), Y15
	MOVBLZX      nesterov+56(FP), R8
	XORQ         AX, AX

momLoop:
	CMPQ       AX, CX
	JGE        momDone
	VCVTPS2PD  (DI)(AX*4), Y0 // w
	VCVTPS2PD  (SI)(AX*4), Y1 // g
	VCVTPS2PD  (DX)(AX*4), Y2 // b
	VMULPD     Y14, Y0, Y3    // wd*w
	VADDPD     Y3, Y1, Y1     // d = g + wd*w
	VMULPD     Y15, Y2, Y2    // m*b
	VADDPD     Y1, Y2, Y2     // bi = m*b + d
	VCVTPD2PSY Y2, X3
	VMOVUPS    X3, (DX)(AX*4) // b = float32(bi)
	TESTQ      R8, R8
	JZ         heavyBall
	VMULPD     Y15, Y2, Y3    // m*bi
	VADDPD     Y3, Y1, Y2     // d = d + m*bi

heavyBall:
	VMULPD     Y13, Y2, Y2    // lr*d (d = bi without Nesterov)
	VSUBPD     Y2, Y0, Y0     // w - lr*d
	VCVTPD2PSY Y0, X0
	VMOVUPS    X0, (DI)(AX*4)
	ADDQ       $4, AX
	JMP        momLoop

momDone:
	VZEROUPPER
	RET
