#include "textflag.h"

// AVX2 loops of the fused BatchNorm (models/ops/batchnorm.go), the ReLU ops
// (common.go) and the stride-2 gather (conv.go) on float32, for CPUs without
// AVX-512: 8 values per step, the last partial step loaded under a
// VMASKMOVPS mask, which reads none of the lanes it leaves out, and stored
// by 4, 2 and 1 lanes. Like the AVX-512
// loops (loops_amd64.s) they compute what the Go loops compute, with fused
// multiply-adds and 8 or 16 partial sums per sum (added by a fixed tree), so
// their results round differently; the ReLU masks test y > 0 as signed
// integers.

// The masks come from ·laneMask (sgemm_amd64.s): 16 all-ones lanes, then
// 16 zero lanes, so ·laneMask+64-4t holds t ones, then zeros.

// MASK8 loads into y the mask of the cnt lowest lanes (cnt 0 to 8, a
// register it leaves times 4); AX is scratch.
#define MASK8(cnt, y) \
	LEAQ    ·laneMask+64(SB), AX; \
	SHLQ    $2, cnt;               \
	SUBQ    cnt, AX;               \
	VMOVDQU (AX), y

// STORETAIL stores the cnt4/4 (1 to 7) lowest lanes of y (x its low half)
// at ptr, by 4, 2 and 1 lanes, advancing ptr: a VMASKMOVPS store is
// microcoded and slow on some CPUs. X4 is scratch.
#define STORETAIL(y, x, ptr, cnt4) \
	VEXTRACTF128 $1, y, X4; \
	TESTQ        $16, cnt4; \
	JEQ          4(PC);     \
	VMOVUPS      x, (ptr);  \
	ADDQ         $16, ptr;  \
	VMOVAPS      X4, x;     \
	TESTQ        $8, cnt4;  \
	JEQ          4(PC);     \
	VMOVSD       x, (ptr);  \
	ADDQ         $8, ptr;   \
	VPSRLDQ      $8, x, x;  \
	TESTQ        $4, cnt4;  \
	JEQ          2(PC);     \
	VMOVSS       x, (ptr)

// REDUCE8 adds the 8 lanes of y (x its low half) into x's lowest, with X3
// as scratch.
#define REDUCE8(y, x) \
	VEXTRACTF128 $1, y, X3;       \
	VADDPS       X3, x, x;        \
	VPERMILPS    $0x4e, x, X3;    \
	VADDPS       X3, x, x;        \
	VPERMILPS    $0xb1, x, X3;    \
	VADDSS       X3, x, x

// func BnShiftedSumsAVX2(p *float32, n int, k float32) (s1, s2 float32)
TEXT ·BnShiftedSumsAVX2(SB), NOSPLIT, $0-32
	MOVQ         p+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS k+16(FP), Y2
	VXORPS       Y0, Y0, Y0
	VXORPS       Y1, Y1, Y1
	VXORPS       Y5, Y5, Y5
	VXORPS       Y6, Y6, Y6
	SUBQ         $16, CX
	JLT          ss8one

ss8loop:
	VMOVUPS     (SI), Y4
	VMOVUPS     32(SI), Y7
	VSUBPS      Y2, Y4, Y4
	VSUBPS      Y2, Y7, Y7
	VADDPS      Y4, Y0, Y0
	VADDPS      Y7, Y5, Y5
	VFMADD231PS Y4, Y4, Y1
	VFMADD231PS Y7, Y7, Y6
	ADDQ        $64, SI
	SUBQ        $16, CX
	JGE         ss8loop

ss8one:
	ADDQ        $8, CX
	JLT         ss8tail
	VMOVUPS     (SI), Y4
	VSUBPS      Y2, Y4, Y4
	VADDPS      Y4, Y0, Y0
	VFMADD231PS Y4, Y4, Y1
	ADDQ        $32, SI
	SUBQ        $8, CX

ss8tail:
	ADDQ        $8, CX
	JEQ         ss8done
	MASK8(CX, Y15)
	VMASKMOVPS  (SI), Y15, Y4
	VSUBPS      Y2, Y4, Y4
	VANDPS      Y15, Y4, Y4
	VADDPS      Y4, Y0, Y0
	VFMADD231PS Y4, Y4, Y1

ss8done:
	VADDPS Y5, Y0, Y0
	VADDPS Y6, Y1, Y1
	REDUCE8(Y0, X0)
	MOVSS  X0, s1+24(FP)
	REDUCE8(Y1, X1)
	MOVSS  X1, s2+28(FP)
	VZEROUPPER
	RET

// LDU and LDM load 8 values whole or, the tail, under the mask in Y15.
#define LDU(m, y) VMOVUPS m, y
#define LDM(m, y) VMASKMOVPS m, Y15, y

// GRAD8 loads g into Y3 through ld: dy (DI), where the ReLU output y (BX)
// is positive when R8 (relu) is set (Y9 = 0, Y5 scratch).
#define GRAD8(ld) \
	ld((DI), Y3);        \
	TESTQ    R8, R8;     \
	JEQ      4(PC);      \
	ld((BX), Y5);        \
	VPCMPGTD Y9, Y5, Y5; \
	VANDPS   Y5, Y3, Y3

// func BnGradDotsAVX2(x, y, dy *float32, n int, mean float32, relu bool) (a, b float32)
TEXT ·BnGradDotsAVX2(SB), NOSPLIT, $0-48
	MOVQ         x+0(FP), SI
	MOVQ         y+8(FP), BX
	MOVQ         dy+16(FP), DI
	MOVQ         n+24(FP), CX
	VBROADCASTSS mean+32(FP), Y2
	MOVBQZX      relu+36(FP), R8
	VPXOR        Y9, Y9, Y9
	VXORPS       Y0, Y0, Y0
	VXORPS       Y1, Y1, Y1
	SUBQ         $8, CX
	JLT          gd8tail

gd8loop:
	GRAD8(LDU)
	VMOVUPS     (SI), Y4
	VSUBPS      Y2, Y4, Y4
	VADDPS      Y3, Y0, Y0
	VFMADD231PS Y4, Y3, Y1
	ADDQ        $32, SI
	ADDQ        $32, BX
	ADDQ        $32, DI
	SUBQ        $8, CX
	JGE         gd8loop

gd8tail:
	ADDQ       $8, CX
	JEQ        gd8done
	MASK8(CX, Y15)
	GRAD8(LDM)
	VMASKMOVPS  (SI), Y15, Y4
	VSUBPS      Y2, Y4, Y4
	VANDPS      Y15, Y4, Y4
	VADDPS      Y3, Y0, Y0
	VFMADD231PS Y4, Y3, Y1

gd8done:
	REDUCE8(Y0, X0)
	MOVSS X0, a+40(FP)
	REDUCE8(Y1, X1)
	MOVSS X1, b+44(FP)
	VZEROUPPER
	RET

// func BnGradPlaneAVX2(dx, x, y, dy *float32, n int, mean, scale, m1, m2 float32, relu bool)
// dx = scale·(g - m1 - (x - mean)·m2).
TEXT ·BnGradPlaneAVX2(SB), NOSPLIT, $0-57
	MOVQ         dx+0(FP), DX
	MOVQ         x+8(FP), SI
	MOVQ         y+16(FP), BX
	MOVQ         dy+24(FP), DI
	MOVQ         n+32(FP), CX
	VBROADCASTSS mean+40(FP), Y2
	VBROADCASTSS scale+44(FP), Y6
	VBROADCASTSS m1+48(FP), Y7
	VBROADCASTSS m2+52(FP), Y8
	MOVBQZX      relu+56(FP), R8
	VPXOR        Y9, Y9, Y9
	SUBQ         $8, CX
	JLT          gp8tail

gp8loop:
	GRAD8(LDU)
	VMOVUPS      (SI), Y4
	VSUBPS       Y2, Y4, Y4
	VSUBPS       Y7, Y3, Y3
	VFNMADD231PS Y8, Y4, Y3
	VMULPS       Y6, Y3, Y3
	VMOVUPS      Y3, (DX)
	ADDQ         $32, DX
	ADDQ         $32, SI
	ADDQ         $32, BX
	ADDQ         $32, DI
	SUBQ         $8, CX
	JGE          gp8loop

gp8tail:
	ADDQ       $8, CX
	JEQ        gp8done
	MASK8(CX, Y15)
	GRAD8(LDM)
	VMASKMOVPS   (SI), Y15, Y4
	VSUBPS       Y2, Y4, Y4
	VSUBPS       Y7, Y3, Y3
	VFNMADD231PS Y8, Y4, Y3
	VMULPS       Y6, Y3, Y3
	STORETAIL(Y3, X3, DX, CX)

gp8done:
	VZEROUPPER
	RET

// RELU256 is RELU512 in AVX2: y clears the lanes with the sign bit set to +0
// (Y9 holds 0) and keeps NaNs (Y5 and Y8 are scratch).
#define RELU256(y) \
	VCMPPS    $3, y, y, Y8; \
	VPMAXSD   Y9, y, Y5; \
	VBLENDVPS Y8, y, Y5, y

// func BnAffineAVX2(y, x *float32, n int, a, b float32, relu bool)
TEXT ·BnAffineAVX2(SB), NOSPLIT, $0-33
	MOVQ         y+0(FP), DX
	MOVQ         x+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS a+24(FP), Y6
	VBROADCASTSS b+28(FP), Y7
	MOVBQZX      relu+32(FP), R8
	VPXOR        Y9, Y9, Y9
	SUBQ         $8, CX
	JLT          af8tail

af8loop:
	VMOVUPS     (SI), Y3
	VFMADD213PS Y7, Y6, Y3
	TESTQ       R8, R8
	JEQ         af8store
	RELU256(Y3)

af8store:
	VMOVUPS Y3, (DX)
	ADDQ    $32, DX
	ADDQ    $32, SI
	SUBQ    $8, CX
	JGE     af8loop

af8tail:
	ADDQ        $8, CX
	JEQ         af8done
	MASK8(CX, Y15)
	VMASKMOVPS  (SI), Y15, Y3
	VFMADD213PS Y7, Y6, Y3
	TESTQ       R8, R8
	JEQ         af8tailstore
	RELU256(Y3)

af8tailstore:
	STORETAIL(Y3, X3, DX, CX)

af8done:
	VZEROUPPER
	RET

// func ReluAddAVX2(y, a, b *float32, n int)
// y = max(a + b, 0), negative sums and -0 to +0 (as integers, like relu32),
// NaN sums kept.
TEXT ·ReluAddAVX2(SB), NOSPLIT, $0-32
	MOVQ  y+0(FP), DX
	MOVQ  a+8(FP), SI
	MOVQ  b+16(FP), DI
	MOVQ  n+24(FP), CX
	VPXOR Y9, Y9, Y9
	SUBQ  $8, CX
	JLT   ra8tail

ra8loop:
	VMOVUPS (SI), Y3
	VADDPS  (DI), Y3, Y3
	RELU256(Y3)
	VMOVUPS Y3, (DX)
	ADDQ    $32, DX
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	JGE     ra8loop

ra8tail:
	ADDQ       $8, CX
	JEQ        ra8done
	MASK8(CX, Y15)
	VMASKMOVPS (SI), Y15, Y3
	VMASKMOVPS (DI), Y15, Y4
	VADDPS     Y4, Y3, Y3
	RELU256(Y3)
	STORETAIL(Y3, X3, DX, CX)

ra8done:
	VZEROUPPER
	RET

// func ReluGradAVX2(d, dy, y *float32, n int)
// d = dy where the ReLU output y is positive, else +0.
TEXT ·ReluGradAVX2(SB), NOSPLIT, $0-32
	MOVQ  d+0(FP), DX
	MOVQ  dy+8(FP), DI
	MOVQ  y+16(FP), BX
	MOVQ  n+24(FP), CX
	VPXOR Y9, Y9, Y9
	SUBQ  $8, CX
	JLT   rg8tail

rg8loop:
	VMOVUPS  (BX), Y5
	VPCMPGTD Y9, Y5, Y5
	VANDPS   (DI), Y5, Y3
	VMOVUPS  Y3, (DX)
	ADDQ     $32, DX
	ADDQ     $32, DI
	ADDQ     $32, BX
	SUBQ     $8, CX
	JGE      rg8loop

rg8tail:
	ADDQ       $8, CX
	JEQ        rg8done
	MASK8(CX, Y15)
	VMASKMOVPS (BX), Y15, Y5
	VPCMPGTD   Y9, Y5, Y5
	VMASKMOVPS (DI), Y15, Y3
	VANDPS     Y5, Y3, Y3
	STORETAIL(Y3, X3, DX, CX)

rg8done:
	VZEROUPPER
	RET

// func GatherStride2AVX2(dst *float32, ldd int, src *float32, lds int, rows, cols int)
// dst[r·ldd + i] = src[r·lds + 2i] for r < rows, i < cols: 8 outputs from
// 16 values a step (even lanes picked within each 128-bit half, then the
// halves' pairs reordered); a row's last step loads under masks, reading no
// value past 2·(cols-1).
TEXT ·GatherStride2AVX2(SB), NOSPLIT, $0-48
	MOVQ  dst+0(FP), DI
	MOVQ  ldd+8(FP), R8
	SHLQ  $2, R8
	MOVQ  src+16(FP), SI
	MOVQ  lds+24(FP), R9
	SHLQ  $2, R9
	MOVQ  rows+32(FP), DX
	TESTQ DX, DX
	JEQ   g8done

g8row:
	MOVQ cols+40(FP), R10
	MOVQ SI, R11
	MOVQ DI, R12

g8step:
	CMPQ    R10, $8
	JLE     g8last
	VMOVUPS (R11), Y2
	VMOVUPS 32(R11), Y3
	VSHUFPS $0x88, Y3, Y2, Y1
	VPERMPD $0xd8, Y1, Y1
	VMOVUPS Y1, (R12)
	ADDQ    $64, R11
	ADDQ    $32, R12
	SUBQ    $8, R10
	JMP     g8step

g8last:
	// R10 = t, 1 to 8 outputs from 2t-1 values: min(2t-1, 8) in the
	// first load, the rest (2t-9 when positive) in the second.
	TESTQ R10, R10
	JEQ   g8next
	LEAQ  -1(R10)(R10*1), CX
	MOVQ  CX, BX
	CMPQ  BX, $8
	JLE   g8first
	MOVQ  $8, BX

g8first:
	MASK8(BX, Y14)
	VMASKMOVPS (R11), Y14, Y2
	VXORPS     Y3, Y3, Y3
	SUBQ       $8, CX
	JLE        g8shuf
	MASK8(CX, Y14)
	VMASKMOVPS 32(R11), Y14, Y3

g8shuf:
	VSHUFPS $0x88, Y3, Y2, Y1
	VPERMPD $0xd8, Y1, Y1
	CMPQ    R10, $8
	JLT     g8part
	VMOVUPS Y1, (R12)
	JMP     g8next

g8part:
	SHLQ $2, R10
	STORETAIL(Y1, X1, R12, R10)

g8next:
	ADDQ R9, SI
	ADDQ R8, DI
	DECQ DX
	JNE  g8row

g8done:
	VZEROUPPER
	RET
