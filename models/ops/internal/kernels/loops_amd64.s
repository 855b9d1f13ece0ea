#include "textflag.h"

// AVX-512 loops of the fused BatchNorm (models/ops/batchnorm.go) and the ReLU ops
// (common.go) on float32: 16 values per step, the last partial step under a
// mask. They compute what the Go loops compute, with fused multiply-adds and
// 16 partial sums per sum (added by a fixed tree), so their results round
// differently. The ReLU masks test y > 0 as signed integers: like pass32 but
// for -0, which no ReLU output is.

// TAILMASK sets K1 to the CX lowest bits.
#define TAILMASK \
	MOVL  $1, AX;  \
	SHLL  CX, AX;  \
	DECL  AX;      \
	KMOVW AX, K1

// REDUCE adds the 16 lanes of Z0 (Y0, X0) into X0's lowest, with X3 (Y3) as
// scratch.
#define REDUCE(z, y, x) \
	VEXTRACTF32X8 $1, z, Y3;  \
	VADDPS        Y3, y, y;   \
	VEXTRACTF128  $1, y, X3;  \
	VADDPS        X3, x, x;   \
	VPERMILPS     $0x4e, x, X3; \
	VADDPS        X3, x, x;   \
	VPERMILPS     $0xb1, x, X3; \
	VADDSS        X3, x, x

// func bnShiftedSumsAVX512(p *float32, n int, k float32) (s1, s2 float32)
TEXT ·BnShiftedSumsAVX512(SB), NOSPLIT, $0-32
	MOVQ         p+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS k+16(FP), Z2
	VPXORD       Z0, Z0, Z0
	VPXORD       Z1, Z1, Z1
	SUBQ         $16, CX
	JLT          sstail

ssloop:
	VMOVUPS     (SI), Z4
	VSUBPS      Z2, Z4, Z4
	VADDPS      Z4, Z0, Z0
	VFMADD231PS Z4, Z4, Z1
	ADDQ        $64, SI
	SUBQ        $16, CX
	JGE         ssloop

sstail:
	ADDQ $16, CX
	JEQ  ssdone
	TAILMASK
	VMOVUPS.Z   (SI), K1, Z4
	VSUBPS.Z    Z2, Z4, K1, Z4
	VADDPS      Z4, Z0, Z0
	VFMADD231PS Z4, Z4, Z1

ssdone:
	REDUCE(Z0, Y0, X0)
	MOVSS X0, s1+24(FP)
	REDUCE(Z1, Y1, X1)
	MOVSS X1, s2+28(FP)
	VZEROUPPER
	RET

// GMASK sets K2 to the lanes (of K1) where the ReLU output at (BX) is
// positive (its bits, as a signed integer, above 0: pass32), or to K1
// without the ReLU (R8 == 0).
#define GMASK \
	KMOVW     K1, K2;       \
	TESTQ     R8, R8;       \
	JEQ       3(PC);        \
	VMOVUPS.Z (BX), K1, Z5; \
	VPCMPGTD  Z9, Z5, K1, K2

// func bnGradDotsAVX512(x, y, dy *float32, n int, mean float32, relu bool) (a, b float32)
TEXT ·BnGradDotsAVX512(SB), NOSPLIT, $0-48
	MOVQ         x+0(FP), SI
	MOVQ         y+8(FP), BX
	MOVQ         dy+16(FP), DI
	MOVQ         n+24(FP), CX
	VBROADCASTSS mean+32(FP), Z2
	MOVBQZX      relu+36(FP), R8
	VPXORD       Z9, Z9, Z9
	VPXORD       Z0, Z0, Z0
	VPXORD       Z1, Z1, Z1
	KXNORW       K1, K1, K1
	SUBQ         $16, CX
	JLT          gdtail

gdloop:
	GMASK
	VMOVUPS.Z   (DI), K2, Z3
	VMOVUPS     (SI), Z4
	VSUBPS      Z2, Z4, Z4
	VADDPS      Z3, Z0, Z0
	VFMADD231PS Z4, Z3, Z1
	ADDQ        $64, SI
	ADDQ        $64, BX
	ADDQ        $64, DI
	SUBQ        $16, CX
	JGE         gdloop

gdtail:
	ADDQ $16, CX
	JEQ  gddone
	TAILMASK
	GMASK
	VMOVUPS.Z   (DI), K2, Z3
	VMOVUPS.Z   (SI), K1, Z4
	VSUBPS      Z2, Z4, Z4
	VADDPS      Z3, Z0, Z0
	VFMADD231PS Z4, Z3, Z1

gddone:
	REDUCE(Z0, Y0, X0)
	MOVSS X0, a+40(FP)
	REDUCE(Z1, Y1, X1)
	MOVSS X1, b+44(FP)
	VZEROUPPER
	RET

// One step of dx = scale·(g - m1 - (x - mean)·m2), stored under K1.
#define GRADSTEP \
	GMASK;                      \
	VMOVUPS.Z    (DI), K2, Z3;  \
	VMOVUPS.Z    (SI), K1, Z4;  \
	VSUBPS       Z2, Z4, Z4;    \
	VSUBPS       Z7, Z3, Z3;    \
	VFNMADD231PS Z8, Z4, Z3;    \
	VMULPS       Z6, Z3, Z3;    \
	VMOVUPS      Z3, K1, (DX)

// func bnGradPlaneAVX512(dx, x, y, dy *float32, n int, mean, scale, m1, m2 float32, relu bool)
TEXT ·BnGradPlaneAVX512(SB), NOSPLIT, $0-57
	MOVQ         dx+0(FP), DX
	MOVQ         x+8(FP), SI
	MOVQ         y+16(FP), BX
	MOVQ         dy+24(FP), DI
	MOVQ         n+32(FP), CX
	VBROADCASTSS mean+40(FP), Z2
	VBROADCASTSS scale+44(FP), Z6
	VBROADCASTSS m1+48(FP), Z7
	VBROADCASTSS m2+52(FP), Z8
	MOVBQZX      relu+56(FP), R8
	VPXORD       Z9, Z9, Z9
	KXNORW       K1, K1, K1
	SUBQ         $16, CX
	JLT          gptail

gploop:
	GRADSTEP
	ADDQ $64, DX
	ADDQ $64, SI
	ADDQ $64, BX
	ADDQ $64, DI
	SUBQ $16, CX
	JGE  gploop

gptail:
	ADDQ $16, CX
	JEQ  gpdone
	TAILMASK
	GRADSTEP

gpdone:
	VZEROUPPER
	RET

// RELU512 clears the lanes of z with the sign bit set (negative values and
// -0) to +0, as integers like relu32 (Z9 holds 0), and keeps NaNs, which
// carry either sign: a NaN must reach the loss, not turn into a 0.
#define RELU512(z) \
	VCMPPS  $7, z, z, K3; \
	VPMAXSD Z9, z, K3, z

// func bnAffineAVX512(y, x *float32, n int, a, b float32, relu bool)
TEXT ·BnAffineAVX512(SB), NOSPLIT, $0-33
	MOVQ         y+0(FP), DX
	MOVQ         x+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS a+24(FP), Z6
	VBROADCASTSS b+28(FP), Z7
	MOVBQZX      relu+32(FP), R8
	VPXORD       Z9, Z9, Z9
	KXNORW       K1, K1, K1
	SUBQ         $16, CX
	JLT          aftail

afloop:
	VMOVUPS     (SI), Z3
	VFMADD213PS Z7, Z6, Z3
	TESTQ       R8, R8
	JEQ         afstore
	RELU512(Z3)

afstore:
	VMOVUPS     Z3, (DX)
	ADDQ        $64, DX
	ADDQ        $64, SI
	SUBQ        $16, CX
	JGE         afloop

aftail:
	ADDQ $16, CX
	JEQ  afdone
	TAILMASK
	VMOVUPS.Z   (SI), K1, Z3
	VFMADD213PS Z7, Z6, Z3
	TESTQ       R8, R8
	JEQ         aftailstore
	RELU512(Z3)

aftailstore:
	VMOVUPS     Z3, K1, (DX)

afdone:
	VZEROUPPER
	RET

// func reluAddAVX512(y, a, b *float32, n int)
// y = max(a + b, 0), negative sums and -0 to +0 (as integers, like relu32),
// NaN sums kept.
TEXT ·ReluAddAVX512(SB), NOSPLIT, $0-32
	MOVQ   y+0(FP), DX
	MOVQ   a+8(FP), SI
	MOVQ   b+16(FP), DI
	MOVQ   n+24(FP), CX
	VPXORD Z9, Z9, Z9
	SUBQ   $16, CX
	JLT    ratail

raloop:
	VMOVUPS (SI), Z3
	VADDPS  (DI), Z3, Z3
	RELU512(Z3)
	VMOVUPS Z3, (DX)
	ADDQ    $64, DX
	ADDQ    $64, SI
	ADDQ    $64, DI
	SUBQ    $16, CX
	JGE     raloop

ratail:
	ADDQ $16, CX
	JEQ  radone
	TAILMASK
	VMOVUPS.Z (SI), K1, Z3
	VMOVUPS.Z (DI), K1, Z4
	VADDPS    Z4, Z3, Z3
	RELU512(Z3)
	VMOVUPS   Z3, K1, (DX)

radone:
	VZEROUPPER
	RET

// func reluGradAVX512(d, dy, y *float32, n int)
// d = dy where the ReLU output y is positive, else +0.
TEXT ·ReluGradAVX512(SB), NOSPLIT, $0-32
	MOVQ   d+0(FP), DX
	MOVQ   dy+8(FP), DI
	MOVQ   y+16(FP), BX
	MOVQ   n+24(FP), CX
	VPXORD Z9, Z9, Z9
	KXNORW K1, K1, K1
	SUBQ   $16, CX
	JLT    rgtail

rgloop:
	VMOVUPS   (BX), Z5
	VPCMPGTD  Z9, Z5, K2
	VMOVUPS.Z (DI), K2, Z3
	VMOVUPS   Z3, (DX)
	ADDQ      $64, DX
	ADDQ      $64, DI
	ADDQ      $64, BX
	SUBQ      $16, CX
	JGE       rgloop

rgtail:
	ADDQ $16, CX
	JEQ  rgdone
	TAILMASK
	VMOVUPS.Z (BX), K1, Z5
	VPCMPGTD  Z9, Z5, K1, K2
	VMOVUPS.Z (DI), K2, Z3
	VMOVUPS   Z3, K1, (DX)

rgdone:
	VZEROUPPER
	RET

// func copyRowsAVX512(dst *float32, ldd int, src *float32, lds int, rows, cols int)
// Copies rows rows of cols values from src (row stride lds) to dst (row
// stride ldd), 16 values per move, the last partial move of a row under a
// mask: short rows (a convolution's 8 to 34 values) without a call each.
TEXT ·CopyRowsAVX512(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ ldd+8(FP), R8
	SHLQ $2, R8
	MOVQ src+16(FP), SI
	MOVQ lds+24(FP), R9
	SHLQ $2, R9
	MOVQ rows+32(FP), DX
	MOVQ cols+40(FP), CX
	MOVQ CX, R10
	SHRQ $4, R10      // whole moves a row
	ANDQ $15, CX      // values in the partial move
	MOVQ CX, R12
	TAILMASK
	TESTQ DX, DX
	JEQ   crdone

crrow:
	XORQ AX, AX
	MOVQ R10, R11
	TESTQ R11, R11
	JEQ   crtail

crmove:
	VMOVUPS (SI)(AX*1), Z0
	VMOVUPS Z0, (DI)(AX*1)
	ADDQ    $64, AX
	DECQ    R11
	JNE     crmove

crtail:
	TESTQ     R12, R12
	JEQ       crnext
	VMOVUPS.Z (SI)(AX*1), K1, Z0
	VMOVUPS   Z0, K1, (DI)(AX*1)

crnext:
	ADDQ R9, SI
	ADDQ R8, DI
	DECQ DX
	JNE  crrow

crdone:
	VZEROUPPER
	RET

// Lane indices for stride-2 rows: the even lanes of two vectors (evenidx),
// and each of 16 values spread to every other lane (spreadlo: values 0..7,
// spreadhi: 8..15; the odd lanes are zeroed by a mask).
DATA evenidx<>+0(SB)/4, $0
DATA evenidx<>+4(SB)/4, $2
DATA evenidx<>+8(SB)/4, $4
DATA evenidx<>+12(SB)/4, $6
DATA evenidx<>+16(SB)/4, $8
DATA evenidx<>+20(SB)/4, $10
DATA evenidx<>+24(SB)/4, $12
DATA evenidx<>+28(SB)/4, $14
DATA evenidx<>+32(SB)/4, $16
DATA evenidx<>+36(SB)/4, $18
DATA evenidx<>+40(SB)/4, $20
DATA evenidx<>+44(SB)/4, $22
DATA evenidx<>+48(SB)/4, $24
DATA evenidx<>+52(SB)/4, $26
DATA evenidx<>+56(SB)/4, $28
DATA evenidx<>+60(SB)/4, $30
GLOBL evenidx<>(SB), RODATA|NOPTR, $64

DATA spreadlo<>+0(SB)/4, $0
DATA spreadlo<>+4(SB)/4, $0
DATA spreadlo<>+8(SB)/4, $1
DATA spreadlo<>+12(SB)/4, $1
DATA spreadlo<>+16(SB)/4, $2
DATA spreadlo<>+20(SB)/4, $2
DATA spreadlo<>+24(SB)/4, $3
DATA spreadlo<>+28(SB)/4, $3
DATA spreadlo<>+32(SB)/4, $4
DATA spreadlo<>+36(SB)/4, $4
DATA spreadlo<>+40(SB)/4, $5
DATA spreadlo<>+44(SB)/4, $5
DATA spreadlo<>+48(SB)/4, $6
DATA spreadlo<>+52(SB)/4, $6
DATA spreadlo<>+56(SB)/4, $7
DATA spreadlo<>+60(SB)/4, $7
GLOBL spreadlo<>(SB), RODATA|NOPTR, $64

DATA spreadhi<>+0(SB)/4, $8
DATA spreadhi<>+4(SB)/4, $8
DATA spreadhi<>+8(SB)/4, $9
DATA spreadhi<>+12(SB)/4, $9
DATA spreadhi<>+16(SB)/4, $10
DATA spreadhi<>+20(SB)/4, $10
DATA spreadhi<>+24(SB)/4, $11
DATA spreadhi<>+28(SB)/4, $11
DATA spreadhi<>+32(SB)/4, $12
DATA spreadhi<>+36(SB)/4, $12
DATA spreadhi<>+40(SB)/4, $13
DATA spreadhi<>+44(SB)/4, $13
DATA spreadhi<>+48(SB)/4, $14
DATA spreadhi<>+52(SB)/4, $14
DATA spreadhi<>+56(SB)/4, $15
DATA spreadhi<>+60(SB)/4, $15
GLOBL spreadhi<>(SB), RODATA|NOPTR, $64

// PAIRMASKS sets K1 and K2 to the lanes of two vectors that hold the 2·CX-1
// values of CX outputs of a stride-2 row (CX <= 16), K3 to the CX lowest
// lanes. Uses AX and BX.
#define PAIRMASKS \
	MOVL  $1, AX;           \
	SHLL  CX, AX;           \
	DECL  AX;               \
	KMOVW AX, K3;           \
	MOVQ  CX, BX;           \
	LEAQ  -1(CX)(CX*1), CX; \
	MOVQ  $1, AX;           \
	SHLQ  CX, AX;           \
	DECQ  AX;               \
	KMOVW AX, K1;           \
	SHRQ  $16, AX;          \
	KMOVW AX, K2;           \
	MOVQ  BX, CX

// func gatherStride2AVX512(dst *float32, ldd int, src *float32, lds int, rows, cols int)
// dst[r·ldd + i] = src[r·lds + 2i] for r < rows, i < cols: the rows of a
// stride-2 im2col, 16 values a step, reading no value past 2·(cols-1).
TEXT ·GatherStride2AVX512(SB), NOSPLIT, $0-48
	MOVQ    dst+0(FP), DI
	MOVQ    ldd+8(FP), R8
	SHLQ    $2, R8
	MOVQ    src+16(FP), SI
	MOVQ    lds+24(FP), R9
	SHLQ    $2, R9
	MOVQ    rows+32(FP), DX
	VMOVUPS evenidx<>(SB), Z9
	KXNORW  K4, K4, K4
	TESTQ   DX, DX
	JEQ     g2done

g2row:
	MOVQ cols+40(FP), R10
	MOVQ SI, R11
	MOVQ DI, R12

g2step:
	CMPQ R10, $16
	JLT  g2tail
	// 16 outputs from 32 values; the 32nd is past the row's last even
	// value when cols is 16: load it only while more follow.
	MOVQ    $16, CX
	CMPQ    R10, $16
	JEQ     g2last
	VMOVUPS (R11), Z2
	VMOVUPS 64(R11), Z3
	JMP     g2perm

g2last:
	PAIRMASKS
	VMOVUPS.Z (R11), K1, Z2
	VMOVUPS.Z 64(R11), K2, Z3

g2perm:
	VMOVUPS   Z9, Z1
	VPERMI2PS Z3, Z2, Z1
	VMOVUPS   Z1, (R12)
	ADDQ      $128, R11
	ADDQ      $64, R12
	SUBQ      $16, R10
	JNE       g2step
	JMP       g2next

g2tail:
	TESTQ R10, R10
	JEQ   g2next
	MOVQ  R10, CX
	PAIRMASKS
	VMOVUPS.Z (R11), K1, Z2
	VMOVUPS.Z 64(R11), K2, Z3
	VMOVUPS   Z9, Z1
	VPERMI2PS Z3, Z2, Z1
	VMOVUPS   Z1, K3, (R12)

g2next:
	ADDQ R9, SI
	ADDQ R8, DI
	DECQ DX
	JNE  g2row

g2done:
	VZEROUPPER
	RET

// func scatterAddStride2AVX512(dst *float32, ldd int, src *float32, lds int, rows, cols int)
// dst[r·ldd + 2i] += src[r·lds + i] for r < rows, i < cols: the rows of a
// stride-2 col2im, 16 values a step, touching no value past 2·(cols-1).
TEXT ·ScatterAddStride2AVX512(SB), NOSPLIT, $0-48
	MOVQ    dst+0(FP), DI
	MOVQ    ldd+8(FP), R8
	SHLQ    $2, R8
	MOVQ    src+16(FP), SI
	MOVQ    lds+24(FP), R9
	SHLQ    $2, R9
	MOVQ    rows+32(FP), DX
	VMOVUPS spreadlo<>(SB), Z7
	VMOVUPS spreadhi<>(SB), Z8
	MOVL    $0x5555, AX
	KMOVW   AX, K5
	TESTQ   DX, DX
	JEQ     s2done

s2row:
	MOVQ cols+40(FP), R10
	MOVQ SI, R11
	MOVQ DI, R12

s2step:
	MOVQ R10, CX
	CMPQ CX, $16
	JLE  2(PC)
	MOVQ $16, CX
	PAIRMASKS
	VMOVUPS.Z (R11), K3, Z0
	VPERMPS.Z Z0, Z7, K5, Z1
	VPERMPS.Z Z0, Z8, K5, Z2
	VMOVUPS.Z (R12), K1, Z3
	VMOVUPS.Z 64(R12), K2, Z4
	VADDPS    Z1, Z3, Z3
	VADDPS    Z2, Z4, Z4
	VMOVUPS   Z3, K1, (R12)
	VMOVUPS   Z4, K2, 64(R12)
	ADDQ      $64, R11
	ADDQ      $128, R12
	SUBQ      CX, R10
	JNE       s2step

	ADDQ R9, SI
	ADDQ R8, DI
	DECQ DX
	JNE  s2row

s2done:
	VZEROUPPER
	RET

DATA oddidx<>+0(SB)/4, $1
DATA oddidx<>+4(SB)/4, $3
DATA oddidx<>+8(SB)/4, $5
DATA oddidx<>+12(SB)/4, $7
DATA oddidx<>+16(SB)/4, $9
DATA oddidx<>+20(SB)/4, $11
DATA oddidx<>+24(SB)/4, $13
DATA oddidx<>+28(SB)/4, $15
DATA oddidx<>+32(SB)/4, $17
DATA oddidx<>+36(SB)/4, $19
DATA oddidx<>+40(SB)/4, $21
DATA oddidx<>+44(SB)/4, $23
DATA oddidx<>+48(SB)/4, $25
DATA oddidx<>+52(SB)/4, $27
DATA oddidx<>+56(SB)/4, $29
DATA oddidx<>+60(SB)/4, $31
GLOBL oddidx<>(SB), RODATA|NOPTR, $64

// EVENODD splits the 2·16 values at addr (under K1, K2) into their even
// (ze) and odd (zo) lanes.
#define EVENODD(addr, ze, zo) \
	VMOVUPS.Z (addr), K1, Z2;   \
	VMOVUPS.Z 64(addr), K2, Z3; \
	VMOVUPS   Z9, ze;           \
	VPERMI2PS Z3, Z2, ze;       \
	VMOVUPS   Z10, zo;          \
	VPERMI2PS Z3, Z2, zo

// WINDOWMASKS sets K3 to the CX lowest lanes (CX <= 16 windows of a 2×2
// stride-2 pool) and K1, K2 to the 2·CX lanes of their positions in a row,
// across two vectors. Uses AX and R9.
#define WINDOWMASKS \
	MOVL  $1, AX;  \
	SHLL  CX, AX;  \
	DECL  AX;      \
	KMOVW AX, K3;  \
	MOVQ  CX, R9;  \
	ADDQ  CX, CX;  \
	MOVQ  $1, AX;  \
	SHLQ  CX, AX;  \
	DECQ  AX;      \
	KMOVW AX, K1;  \
	SHRQ  $16, AX; \
	KMOVW AX, K2;  \
	MOVQ  R9, CX

// func maxPool2RowAVX512(x0, x1, y *float32, arg *int32, n int, base, w int32)
// One output row of a 2×2 stride-2 max-pool: y[j] = the maximum of
// x0[2j], x0[2j+1], x1[2j], x1[2j+1] and arg[j] = base + 2j plus the offset
// (0, 1, w or w+1) of the first of the four, in that order, equal to it.
TEXT ·MaxPool2RowAVX512(SB), NOSPLIT, $0-48
	MOVQ         x0+0(FP), SI
	MOVQ         x1+8(FP), DI
	MOVQ         y+16(FP), DX
	MOVQ         arg+24(FP), R8
	MOVQ         n+32(FP), R10
	VMOVUPS      evenidx<>(SB), Z9
	VMOVUPS      oddidx<>(SB), Z10
	MOVL         base+40(FP), AX
	VPBROADCASTD AX, Z11
	VPADDD       Z9, Z11, Z11      // base + 2·lane
	MOVL         w+44(FP), AX
	VPBROADCASTD AX, Z12           // w
	MOVL         $1, AX
	VPBROADCASTD AX, Z13           // 1
	VPADDD       Z13, Z12, Z14     // w + 1
	VPXORD       Z15, Z15, Z15     // 0
	MOVL         $32, AX
	VPBROADCASTD AX, Z16           // 2·16: the next step's base

mprow:
	TESTQ R10, R10
	JEQ   mpdone
	MOVQ  R10, CX
	CMPQ  CX, $16
	JLE   2(PC)
	MOVQ  $16, CX
	WINDOWMASKS
	EVENODD(SI, Z4, Z5)
	EVENODD(DI, Z6, Z7)
	VMAXPS    Z5, Z4, Z0
	VMAXPS    Z7, Z6, Z1
	VMAXPS    Z1, Z0, Z0
	// A window with a NaN gives NaN, as Go's max does (a max instruction
	// passes its second operand on when either is NaN): there the sum of
	// the four, which is NaN.
	VCMPPS    $3, Z5, Z4, K5
	VCMPPS    $3, Z7, Z6, K6
	KORW      K5, K6, K5
	VADDPS    Z5, Z4, Z2
	VADDPS    Z7, Z6, Z3
	VADDPS    Z3, Z2, K5, Z0
	// The offset, last choice first: w+1, then w, 1 and 0 where equal.
	VMOVDQA32 Z14, Z1
	VCMPPS    $0, Z0, Z6, K4
	VMOVDQA32 Z12, K4, Z1
	VCMPPS    $0, Z0, Z5, K4
	VMOVDQA32 Z13, K4, Z1
	VCMPPS    $0, Z0, Z4, K4
	VMOVDQA32 Z15, K4, Z1
	VPADDD    Z11, Z1, Z1
	VMOVUPS   Z0, K3, (DX)
	VMOVDQU32 Z1, K3, (R8)
	VPADDD    Z16, Z11, Z11
	ADDQ      $128, SI
	ADDQ      $128, DI
	ADDQ      $64, DX
	ADDQ      $64, R8
	SUBQ      CX, R10
	JMP       mprow

mpdone:
	VZEROUPPER
	RET

// func sumAVX512(p *float32, n int) float32
// Σ p[:n] in 16 partial sums added by REDUCE.
TEXT ·SumAVX512(SB), NOSPLIT, $0-20
	MOVQ   p+0(FP), SI
	MOVQ   n+8(FP), CX
	VPXORD Z0, Z0, Z0
	SUBQ   $16, CX
	JLT    sutail

suloop:
	VADDPS (SI), Z0, Z0
	ADDQ   $64, SI
	SUBQ   $16, CX
	JGE    suloop

sutail:
	ADDQ $16, CX
	JEQ  sudone
	TAILMASK
	VMOVUPS.Z (SI), K1, Z4
	VADDPS    Z4, Z0, Z0

sudone:
	REDUCE(Z0, Y0, X0)
	MOVSS X0, ret+16(FP)
	VZEROUPPER
	RET

// func unpool2RowAVX512(d0, d1, dy *float32, arg *int32, n int, base, w int32)
// One output row of a 2×2 stride-2 max-pool's gradient: window j's four
// input positions in rows d0 and d1 get dy[j] where arg[j] (base + 2j plus
// the offset 0, 1, w or w+1) points, 0 elsewhere.
TEXT ·Unpool2RowAVX512(SB), NOSPLIT, $0-48
	MOVQ         d0+0(FP), DI
	MOVQ         d1+8(FP), BX
	MOVQ         dy+16(FP), SI
	MOVQ         arg+24(FP), R8
	MOVQ         n+32(FP), R10
	VMOVUPS      spreadlo<>(SB), Z7
	VMOVUPS      spreadhi<>(SB), Z8
	VMOVUPS      evenidx<>(SB), Z9
	MOVL         base+40(FP), AX
	VPBROADCASTD AX, Z11
	VPADDD       Z9, Z11, Z11 // base + 2·lane
	MOVL         $0x55555555, AX
	KMOVW        AX, K5
	VPXORD       Z12, Z12, Z12
	MOVL         $1, AX
	VPBROADCASTD AX, Z14
	VMOVDQA32    Z14, Z12        // 1 in every lane,
	VPXORD       Z14, Z14, Z14
	VMOVDQA32    Z14, K5, Z12    // 0 in the even ones: the offsets 0, 1, 0, 1, ...
	MOVL         w+44(FP), AX
	VPBROADCASTD AX, Z13
	VPADDD       Z12, Z13, Z13   // w, w+1, w, w+1, ...
	MOVL         $32, AX
	VPBROADCASTD AX, Z16

upstep:
	TESTQ R10, R10
	JEQ   updone
	MOVQ  R10, CX
	CMPQ  CX, $16
	JLE   2(PC)
	MOVQ  $16, CX
	WINDOWMASKS
	VMOVUPS.Z   (SI), K3, Z0
	VMOVDQU32.Z (R8), K3, Z1
	VPSUBD      Z11, Z1, Z1      // each window's offset
	// Windows 0..7 to positions 0..15 of both rows, then 8..15 to 16..31.
	VPERMPS     Z0, Z7, Z2
	VPERMD      Z1, Z7, Z3
	VPCMPEQD    Z12, Z3, K4
	VMOVUPS.Z   Z2, K4, Z4
	VMOVUPS     Z4, K1, (DI)
	VPCMPEQD    Z13, Z3, K4
	VMOVUPS.Z   Z2, K4, Z4
	VMOVUPS     Z4, K1, (BX)
	VPERMPS     Z0, Z8, Z2
	VPERMD      Z1, Z8, Z3
	VPCMPEQD    Z12, Z3, K4
	VMOVUPS.Z   Z2, K4, Z4
	VMOVUPS     Z4, K2, 64(DI)
	VPCMPEQD    Z13, Z3, K4
	VMOVUPS.Z   Z2, K4, Z4
	VMOVUPS     Z4, K2, 64(BX)
	VPADDD      Z16, Z11, Z11
	ADDQ        $128, DI
	ADDQ        $128, BX
	ADDQ        $64, SI
	ADDQ        $64, R8
	SUBQ        CX, R10
	JMP         upstep

updone:
	VZEROUPPER
	RET

// func add3AVX512(y, a, b *float32, n int)
// y = a + b (y may be a or b).
TEXT ·Add3AVX512(SB), NOSPLIT, $0-32
	MOVQ y+0(FP), DX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ n+24(FP), CX
	SUBQ $16, CX
	JLT  a3tail

a3loop:
	VMOVUPS (SI), Z3
	VADDPS  (DI), Z3, Z3
	VMOVUPS Z3, (DX)
	ADDQ    $64, DX
	ADDQ    $64, SI
	ADDQ    $64, DI
	SUBQ    $16, CX
	JGE     a3loop

a3tail:
	ADDQ $16, CX
	JEQ  a3done
	TAILMASK
	VMOVUPS.Z (SI), K1, Z3
	VMOVUPS.Z (DI), K1, Z4
	VADDPS    Z4, Z3, Z3
	VMOVUPS   Z3, K1, (DX)

a3done:
	VZEROUPPER
	RET
