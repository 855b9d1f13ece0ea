#include "textflag.h"

// PowerSGD's vector loops, eight float32 lanes at a time, each element's
// arithmetic as powersgd.go's Go loops do it (multiply, then add). n is a
// multiple of 8.

// func psgdDotLanesAVX(x, y *float32, n int, lanes *[8]float32)
TEXT ·psgdDotLanesAVX(SB), NOSPLIT, $0-32
	MOVQ    x+0(FP), SI
	MOVQ    y+8(FP), DX
	MOVQ    n+16(FP), CX
	MOVQ    lanes+24(FP), DI
	VMOVUPS (DI), Y0
	XORQ    AX, AX

dotLoop:
	CMPQ    AX, CX
	JGE     dotDone
	VMOVUPS (SI)(AX*4), Y1
	VMULPS  (DX)(AX*4), Y1, Y1
	VADDPS  Y1, Y0, Y0
	ADDQ    $8, AX
	JMP     dotLoop

dotDone:
	VMOVUPS Y0, (DI)
	VZEROUPPER
	RET

// func psgdAddAVX(dst, a, b *float32, n int)
TEXT ·psgdAddAVX(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	XORQ AX, AX

addLoop:
	CMPQ    AX, CX
	JGE     addDone
	VMOVUPS (SI)(AX*4), Y0
	VADDPS  (DX)(AX*4), Y0, Y0
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ    $8, AX
	JMP     addLoop

addDone:
	VZEROUPPER
	RET

// func psgdLowRankSubAVX(out, e, m, q *float32, qstride int, coef *float32, r, n int)
// out[j] = sum over k < r of coef[k]*q[k*qstride+j], summed from zero in k's
// order; with e not nil, e[j] = m[j] - out[j].
TEXT ·psgdLowRankSubAVX(SB), NOSPLIT, $0-64
	MOVQ out+0(FP), DI
	MOVQ e+8(FP), R9
	MOVQ m+16(FP), R10
	MOVQ q+24(FP), SI
	MOVQ qstride+32(FP), R11
	SHLQ $2, R11
	MOVQ coef+40(FP), DX
	MOVQ r+48(FP), BX
	MOVQ n+56(FP), CX
	XORQ AX, AX

lrBlock:
	CMPQ   AX, CX
	JGE    lrDone
	VXORPS Y0, Y0, Y0
	LEAQ   (SI)(AX*4), R8
	XORQ   R12, R12

lrRank:
	CMPQ         R12, BX
	JGE          lrStore
	VBROADCASTSS (DX)(R12*4), Y1
	VMULPS       (R8), Y1, Y1
	VADDPS       Y1, Y0, Y0
	ADDQ         R11, R8
	INCQ         R12
	JMP          lrRank

lrStore:
	VMOVUPS Y0, (DI)(AX*4)
	TESTQ   R9, R9
	JZ      lrNext
	VMOVUPS (R10)(AX*4), Y2
	VSUBPS  Y0, Y2, Y2
	VMOVUPS Y2, (R9)(AX*4)

lrNext:
	ADDQ $8, AX
	JMP  lrBlock

lrDone:
	VZEROUPPER
	RET

// func psgdOuterAddAVX(q *float32, qstride int, coef *float32, r int, row *float32, n int)
// q[k*qstride+j] += coef[k]*row[j] for k < r, j < n.
TEXT ·psgdOuterAddAVX(SB), NOSPLIT, $0-48
	MOVQ q+0(FP), SI
	MOVQ qstride+8(FP), R11
	SHLQ $2, R11
	MOVQ coef+16(FP), DX
	MOVQ r+24(FP), BX
	MOVQ row+32(FP), DI
	MOVQ n+40(FP), CX
	XORQ AX, AX

oaBlock:
	CMPQ    AX, CX
	JGE     oaDone
	VMOVUPS (DI)(AX*4), Y0
	LEAQ    (SI)(AX*4), R8
	XORQ    R12, R12

oaRank:
	CMPQ         R12, BX
	JGE          oaNext
	VBROADCASTSS (DX)(R12*4), Y1
	VMULPS       Y0, Y1, Y1
	VADDPS       (R8), Y1, Y1
	VMOVUPS      Y1, (R8)
	ADDQ         R11, R8
	INCQ         R12
	JMP          oaRank

oaNext:
	ADDQ $8, AX
	JMP  oaBlock

oaDone:
	VZEROUPPER
	RET
