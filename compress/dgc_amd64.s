#include "textflag.h"

// DGC's vector loops, eight float32 lanes at a time. The accumulate loops do
// each element's arithmetic as momentumAccumulate's Go loops do it (multiply,
// then add). n is a multiple of 8.

// The steps of the accumulate loops at element AX: the gradient gi in Y1,
// then the momentum u (DI) and the velocity v (DX) updated from it.

// GRAD: gi = g*scale.
#define GRAD VMULPS (SI)(AX*4), Y10, Y1

// DECAY: gi += wd*w.
#define DECAY \
	VMULPS (R8)(AX*4), Y12, Y3; \
	VADDPS Y3, Y1, Y1

// MOMENTUM: u = m*u + gi; v += u.
#define MOMENTUM \
	VMULPS  (DI)(AX*4), Y11, Y0; \
	VADDPS  Y1, Y0, Y0;          \
	VMOVUPS Y0, (DI)(AX*4);      \
	VADDPS  (DX)(AX*4), Y0, Y2;  \
	VMOVUPS Y2, (DX)(AX*4)

// NESTEROV: u = (u + gi)*m; v += u + gi.
#define NESTEROV \
	VADDPS  (DI)(AX*4), Y1, Y0; \
	VMULPS  Y11, Y0, Y0;        \
	VMOVUPS Y0, (DI)(AX*4);     \
	VADDPS  Y1, Y0, Y0;         \
	VADDPS  (DX)(AX*4), Y0, Y2; \
	VMOVUPS Y2, (DX)(AX*4)

// func dgcAccumulateAVX2(grad, w, u, v *float32, n int, scale, m, wd float32, mode int)
TEXT ·dgcAccumulateAVX2(SB), NOSPLIT, $0-64
	MOVQ         grad+0(FP), SI
	MOVQ         w+8(FP), R8
	MOVQ         u+16(FP), DI
	MOVQ         v+24(FP), DX
	MOVQ         n+32(FP), CX
	VBROADCASTSS scale+40(FP), Y10
	VBROADCASTSS m+44(FP), Y11
	VBROADCASTSS wd+48(FP), Y12
	MOVQ         mode+56(FP), BX
	XORQ         AX, AX
	CMPQ         BX, $1
	JEQ          momentum
	CMPQ         BX, $2
	JEQ          nesterov
	CMPQ         BX, $3
	JEQ          momentumWD
	CMPQ         BX, $4
	JEQ          nesterovWD

	// v += g*scale
plain:
	CMPQ    AX, CX
	JGE     done
	GRAD
	VADDPS  (DX)(AX*4), Y1, Y2
	VMOVUPS Y2, (DX)(AX*4)
	ADDQ    $8, AX
	JMP     plain

momentum:
	CMPQ AX, CX
	JGE  done
	GRAD
	MOMENTUM
	ADDQ $8, AX
	JMP  momentum

nesterov:
	CMPQ AX, CX
	JGE  done
	GRAD
	NESTEROV
	ADDQ $8, AX
	JMP  nesterov

momentumWD:
	CMPQ AX, CX
	JGE  done
	GRAD
	DECAY
	MOMENTUM
	ADDQ $8, AX
	JMP  momentumWD

nesterovWD:
	CMPQ AX, CX
	JGE  done
	GRAD
	DECAY
	NESTEROV
	ADDQ $8, AX
	JMP  nesterovWD

done:
	VZEROUPPER
	RET

// The scans: THRESHOLD broadcasts thrBelow (R10) to Y1 and sets Y2 to the
// mask clearing the sign bit; TEST16 compares the magnitudes of the sixteen
// elements at AX with it, the two blocks' lanes in Y3 and Y4, ZF clear when
// any passes.
#define THRESHOLD \
	VMOVD        R10, X1;              \
	VPBROADCASTD X1, Y1;               \
	VPCMPEQD     Y2, Y2, Y2;           \
	VPSRLD       $1, Y2, Y2

#define TEST16 \
	VPAND    (SI)(AX*4), Y2, Y3;   \
	VPCMPGTD Y1, Y3, Y3;           \
	VPAND    32(SI)(AX*4), Y2, Y4; \
	VPCMPGTD Y1, Y4, Y4;           \
	VPOR     Y3, Y4, Y5;           \
	VPTEST   Y5, Y5

// func dgcNextAtLeastAVX2(v *float32, n int, thrBelow uint32) (block int, mask uint32)
// Magnitude bits (sign cleared) compared as int32 with thrBelow: both lie in
// [0, 2^31) but for thrBelow = -1, which every magnitude exceeds. Sixteen
// elements a test; the block of eight that passes is found after.
TEXT ·dgcNextAtLeastAVX2(SB), NOSPLIT, $0-36
	MOVQ         v+0(FP), SI
	MOVQ         n+8(FP), CX
	MOVL         thrBelow+16(FP), R10
	THRESHOLD
	XORQ         AX, AX
	MOVQ         CX, R9
	ANDQ         $-16, R9

pairs:
	CMPQ     AX, R9
	JGE      single
	TEST16
	JNZ      pairFound
	ADDQ     $16, AX
	JMP      pairs

pairFound:
	VMOVMSKPS Y3, DX
	TESTL     DX, DX
	JNZ       found
	ADDQ      $8, AX
	VMOVMSKPS Y4, DX
	JMP       found

single:
	CMPQ      AX, CX
	JGE       none
	VPAND     (SI)(AX*4), Y2, Y3
	VPCMPGTD  Y1, Y3, Y3
	VMOVMSKPS Y3, DX
	TESTL     DX, DX
	JNZ       found
	ADDQ      $8, AX
	JMP       single

none:
	MOVQ CX, AX
	XORL DX, DX

found:
	MOVQ AX, block+24(FP)
	MOVL DX, mask+32(FP)
	VZEROUPPER
	RET

// func dgcAppendAboveAVX2(v *float32, n int, thrBelow uint32, base int, out *int32, room int) (written, scanned int)
// Writes to out the indices base+i of the elements of v[0:n] (n a multiple
// of 8) whose magnitude bits exceed thrBelow (compared as int32, as in
// dgcNextAtLeastAVX2), in increasing order. It stops before a block of
// sixteen (or the last eight) when fewer than sixteen slots of out are left,
// and returns the indices written and the elements scanned (n when done).
TEXT ·dgcAppendAboveAVX2(SB), NOSPLIT, $0-64
	MOVQ         v+0(FP), SI
	MOVQ         n+8(FP), CX
	MOVL         thrBelow+16(FP), R10
	THRESHOLD
	MOVQ         base+24(FP), R10
	MOVQ         out+32(FP), DI
	MOVQ         room+40(FP), R11
	SUBQ         $16, R11           // write while written <= room-16
	XORQ         BX, BX
	XORQ         AX, AX
	MOVQ         CX, R9
	ANDQ         $-16, R9

apairs:
	CMPQ     AX, R9
	JGE      asingle
	TEST16
	JNZ      apairHit
	ADDQ     $16, AX
	JMP      apairs

apairHit:
	CMPQ      BX, R11
	JGT       afull
	VMOVMSKPS Y3, DX
	VMOVMSKPS Y4, R12
	SHLL      $8, R12
	ORL       R12, DX
	LEAQ      (R10)(AX*1), R8

// Write base+AX+j for each bit j of DX, then go on after the block: sixteen
// from a pair (AX below R9), eight from the last single block.
aemit:
	BSFL DX, R12
	LEAQ (R8)(R12*1), R13
	MOVL R13, (DI)(BX*4)
	INCQ BX
	LEAL -1(DX), R12
	ANDL R12, DX
	JNZ  aemit
	CMPQ AX, R9
	JGE  anext8
	ADDQ $16, AX
	JMP  apairs

asingle:
	CMPQ      AX, CX
	JGE       adone
	VPAND     (SI)(AX*4), Y2, Y3
	VPCMPGTD  Y1, Y3, Y3
	VMOVMSKPS Y3, DX
	TESTL     DX, DX
	JZ        anext8
	CMPQ      BX, R11
	JGT       afull
	LEAQ      (R10)(AX*1), R8
	JMP       aemit

anext8:
	ADDQ $8, AX
	JMP  asingle

adone:
	MOVQ CX, AX

afull:
	MOVQ BX, written+48(FP)
	MOVQ AX, scanned+56(FP)
	VZEROUPPER
	RET
