#include "textflag.h"

// PowerSGD's vector loops, eight float32 lanes at a time, each element's
// arithmetic as powersgd.go's Go loops do it (multiply, then add). n is a
// multiple of 8.

// The steps of the rank-1 and rank-2 loops at element AX, the coefficients
// broadcast in Y8 and Y9 and zero in Y7:
// LOWRANK1: Y0 = 0 + coef0*row0[j] (row0 at SI), the sum from zero;
// ADDRANK2: Y0 += coef1*row1[j] (row1 at R8);
// RESIDUAL(skip): out[j] = Y0 (DI) and, unless e (R9) is nil, e[j] = m[j] - Y0
// (m at R10), else on to skip;
// COMPENSATE: m[j] = grad[j] + (m[j] - Y0) (m at DI, grad at R10);
// OUTER1: row0[j] += coef0*x[j] (row0 at SI, x at DI), x left in Y0.
#define LOWRANK1 \
	VMULPS (SI)(AX*4), Y8, Y0; \
	VADDPS Y0, Y7, Y0

#define ADDRANK2 \
	VMULPS (R8)(AX*4), Y9, Y1; \
	VADDPS Y1, Y0, Y0

#define RESIDUAL(skip) \
	VMOVUPS Y0, (DI)(AX*4);  \
	TESTQ   R9, R9;          \
	JZ      skip;            \
	VMOVUPS (R10)(AX*4), Y2; \
	VSUBPS  Y0, Y2, Y2;      \
	VMOVUPS Y2, (R9)(AX*4)

#define COMPENSATE \
	VMOVUPS (DI)(AX*4), Y2;      \
	VSUBPS  Y0, Y2, Y2;          \
	VADDPS  (R10)(AX*4), Y2, Y2; \
	VMOVUPS Y2, (DI)(AX*4)

#define OUTER1 \
	VMOVUPS (DI)(AX*4), Y0;     \
	VMULPS  Y0, Y8, Y1;         \
	VADDPS  (SI)(AX*4), Y1, Y1; \
	VMOVUPS Y1, (SI)(AX*4)

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

// func psgdDot2LanesAVX(x, y0, y1 *float32, n int, lanes0, lanes1 *[8]float32)
// psgdDotLanesAVX for two vectors y0 and y1 at once: x is loaded once and
// the two sums are independent chains, so each waits on its own additions
// only; each lane sums in the same order as alone.
TEXT ·psgdDot2LanesAVX(SB), NOSPLIT, $0-48
	MOVQ    x+0(FP), SI
	MOVQ    y0+8(FP), DX
	MOVQ    y1+16(FP), R8
	MOVQ    n+24(FP), CX
	MOVQ    lanes0+32(FP), DI
	MOVQ    lanes1+40(FP), R9
	VMOVUPS (DI), Y0
	VMOVUPS (R9), Y1
	XORQ    AX, AX

dot2Loop:
	CMPQ    AX, CX
	JGE     dot2Done
	VMOVUPS (SI)(AX*4), Y2
	VMULPS  (DX)(AX*4), Y2, Y3
	VADDPS  Y3, Y0, Y0
	VMULPS  (R8)(AX*4), Y2, Y4
	VADDPS  Y4, Y1, Y1
	ADDQ    $8, AX
	JMP     dot2Loop

dot2Done:
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, (R9)
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
	CMPQ BX, $1
	JEQ  lr1

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
	RESIDUAL(lrNext)

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
	CMPQ AX, CX
	JGE  lrDone
	LOWRANK1
	ADDRANK2
	RESIDUAL(lr2Next)

lr2Next:
	ADDQ $8, AX
	JMP  lr2Block

	// Rank 1 (the default): the same operations.
lr1:
	VBROADCASTSS (DX), Y8
	VXORPS       Y7, Y7, Y7

lr1Block:
	CMPQ AX, CX
	JGE  lrDone
	LOWRANK1
	RESIDUAL(lr1Next)

lr1Next:
	ADDQ $8, AX
	JMP  lr1Block

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
	CMPQ BX, $1
	JEQ  oa1

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
	OUTER1
	VMULPS  Y0, Y9, Y2
	VADDPS  (R8)(AX*4), Y2, Y2
	VMOVUPS Y2, (R8)(AX*4)
	ADDQ    $8, AX
	JMP     oa2Block

	// Rank 1 (the default): the same operations.
oa1:
	VBROADCASTSS (DX), Y8

oa1Block:
	CMPQ    AX, CX
	JGE     oaDone
	OUTER1
	ADDQ    $8, AX
	JMP     oa1Block

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
	COMPENSATE
	ADDQ    $8, AX
	JMP     cpBlock

cpDone:
	VZEROUPPER
	RET

// func psgdCompensateDotAVX(m, grad, lq, q *float32, qstride int, coef *float32, r, n int, lanes0, lanes1 *[8]float32)
// psgdCompensateAVX's m[j] = grad[j] + (m[j] - sum over k < r of
// coef[k]*lq[k*qstride+j]) for r 1 or 2, and, in the same pass, the new m[j]
// times q[k*qstride+j] added into lanes_k[j mod 8] for k < r, as
// psgdDotLanesAVX does: the dot products' chains of additions run while the
// next elements are compensated.
TEXT ·psgdCompensateDotAVX(SB), NOSPLIT, $0-80
	MOVQ         m+0(FP), DI
	MOVQ         grad+8(FP), R10
	MOVQ         lq+16(FP), SI
	MOVQ         q+24(FP), R9
	MOVQ         qstride+32(FP), R11
	SHLQ         $2, R11
	MOVQ         coef+40(FP), DX
	MOVQ         r+48(FP), BX
	MOVQ         n+56(FP), CX
	MOVQ         lanes0+64(FP), R12
	MOVQ         lanes1+72(FP), R13
	VMOVUPS      (R12), Y5
	VMOVUPS      (R13), Y6
	VXORPS       Y7, Y7, Y7
	VBROADCASTSS (DX), Y8
	XORQ         AX, AX
	CMPQ         BX, $2
	JEQ          cd2

cd1Block:
	CMPQ    AX, CX
	JGE     cdDone
	LOWRANK1
	COMPENSATE
	VMULPS  (R9)(AX*4), Y2, Y3
	VADDPS  Y3, Y5, Y5
	ADDQ    $8, AX
	JMP     cd1Block

cd2:
	VBROADCASTSS 4(DX), Y9
	LEAQ         (SI)(R11*1), R8
	ADDQ         R9, R11

cd2Block:
	CMPQ    AX, CX
	JGE     cdDone
	LOWRANK1
	ADDRANK2
	COMPENSATE
	VMULPS  (R9)(AX*4), Y2, Y3
	VADDPS  Y3, Y5, Y5
	VMULPS  (R11)(AX*4), Y2, Y4
	VADDPS  Y4, Y6, Y6
	ADDQ    $8, AX
	JMP     cd2Block

cdDone:
	VMOVUPS Y5, (R12)
	VMOVUPS Y6, (R13)
	VZEROUPPER
	RET
