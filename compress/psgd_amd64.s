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
	CMPQ BX, $2
	JEQ  lr2

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

	// Rank 2, the coefficients held in registers: the same operations.
lr2:
	VBROADCASTSS (DX), Y8
	VBROADCASTSS 4(DX), Y9
	LEAQ         (SI)(R11*1), R8
	VXORPS       Y7, Y7, Y7

lr2Block:
	CMPQ    AX, CX
	JGE     lrDone
	VMULPS  (SI)(AX*4), Y8, Y0
	VADDPS  Y0, Y7, Y0
	VMULPS  (R8)(AX*4), Y9, Y1
	VADDPS  Y1, Y0, Y0
	VMOVUPS Y0, (DI)(AX*4)
	TESTQ   R9, R9
	JZ      lr2Next
	VMOVUPS (R10)(AX*4), Y2
	VSUBPS  Y0, Y2, Y2
	VMOVUPS Y2, (R9)(AX*4)

lr2Next:
	ADDQ $8, AX
	JMP  lr2Block

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
	CMPQ BX, $2
	JEQ  oa2

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

	// Rank 2, the coefficients held in registers: the same operations.
oa2:
	VBROADCASTSS (DX), Y8
	VBROADCASTSS 4(DX), Y9
	LEAQ         (SI)(R11*1), R8

oa2Block:
	CMPQ    AX, CX
	JGE     oaDone
	VMOVUPS (DI)(AX*4), Y0
	VMULPS  Y0, Y8, Y1
	VADDPS  (SI)(AX*4), Y1, Y1
	VMOVUPS Y1, (SI)(AX*4)
	VMULPS  Y0, Y9, Y2
	VADDPS  (R8)(AX*4), Y2, Y2
	VMOVUPS Y2, (R8)(AX*4)
	ADDQ    $8, AX
	JMP     oa2Block

// func psgdCompensateAVX(m, grad, q *float32, qstride int, coef *float32, r, n int)
// m[j] = grad[j] + (m[j] - sum over k < r of coef[k]*q[k*qstride+j]), the sum
// from zero in k's order.
TEXT ·psgdCompensateAVX(SB), NOSPLIT, $0-56
	MOVQ m+0(FP), DI
	MOVQ grad+8(FP), R10
	MOVQ q+16(FP), SI
	MOVQ qstride+24(FP), R11
	SHLQ $2, R11
	MOVQ coef+32(FP), DX
	MOVQ r+40(FP), BX
	MOVQ n+48(FP), CX
	XORQ AX, AX
	CMPQ BX, $2
	JEQ  cp2

cpBlock:
	CMPQ   AX, CX
	JGE    cpDone
	VXORPS Y0, Y0, Y0
	LEAQ   (SI)(AX*4), R8
	XORQ   R12, R12

cpRank:
	CMPQ         R12, BX
	JGE          cpStore
	VBROADCASTSS (DX)(R12*4), Y1
	VMULPS       (R8), Y1, Y1
	VADDPS       Y1, Y0, Y0
	ADDQ         R11, R8
	INCQ         R12
	JMP          cpRank

cpStore:
	VMOVUPS (DI)(AX*4), Y2
	VSUBPS  Y0, Y2, Y2
	VADDPS  (R10)(AX*4), Y2, Y2
	VMOVUPS Y2, (DI)(AX*4)
	ADDQ    $8, AX
	JMP     cpBlock

cpDone:
	VZEROUPPER
	RET

	// Rank 2, the coefficients held in registers: the same operations.
cp2:
	VBROADCASTSS (DX), Y8
	VBROADCASTSS 4(DX), Y9
	LEAQ         (SI)(R11*1), R8
	VXORPS       Y7, Y7, Y7

cp2Block:
	CMPQ    AX, CX
	JGE     cpDone
	VMULPS  (SI)(AX*4), Y8, Y0
	VADDPS  Y0, Y7, Y0
	VMULPS  (R8)(AX*4), Y9, Y1
	VADDPS  Y1, Y0, Y0
	VMOVUPS (DI)(AX*4), Y2
	VSUBPS  Y0, Y2, Y2
	VADDPS  (R10)(AX*4), Y2, Y2
	VMOVUPS Y2, (DI)(AX*4)
	ADDQ    $8, AX
	JMP     cp2Block
