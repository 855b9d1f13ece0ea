#include "textflag.h"

// Register-blocked SGEMM micro-kernels (see models/ops/sgemm.go for the blocking around
// them) and the transposing pack. The outer-product kernels compute one tile
// of the row-major C:
//
//	c[i, j] = alpha·Σ_l A(i, l)·B(l, j) + beta·c[i, j],  i < mr, j < nr,
//
// with A(i, l) at a + i·ars + l·aks and B(l, j) at b + l·bks + j (strides in
// float32s), so that both operands are read where they lie whenever their
// layout allows. They broadcast one A value per row and multiply it into
// vectors of B's row: the accumulators hold the tile of C in registers for
// the whole k loop. The dot-product kernel (AVX-512) takes a·bᵀ with both
// operands' rows along k. beta == 0 never reads c.

// Rows of a tile: each row of A has its own pointer, row r = a + r·ars, so
// that rows at or past mr repeat row mr-1 (ROWPTR) instead of reading past
// the matrix: a partial tile needs no copy of A. The k loop runs two steps
// per iteration, the second through the k stride as an index (R10 = aks,
// R11 = bks, in bytes), then moves every pointer two steps on with LEAQ.

// ROWPTR sets row = prev + CX (the row stride) while r < mr (DI), else prev.
#define ROWPTR(prev, row, r) \
	LEAQ    (prev)(CX*1), row; \
	CMPQ    DI, $r;            \
	CMOVQLE prev, row

#define ADVANCE(ptr, stride) \
	LEAQ (ptr)(stride*2), ptr

// ROWPTRS6 and ROWPTRS8 set the row pointers of a 6- or 8-row tile from
// row 0 at SI (CX = row stride, DI = mr).
#define ROWPTRS6 \
	ROWPTR(SI, AX, 1); \
	ROWPTR(AX, BX, 2); \
	ROWPTR(BX, DX, 3); \
	ROWPTR(DX, R8, 4); \
	ROWPTR(R8, R9, 5)

#define ROWPTRS8 \
	ROWPTRS6;           \
	ROWPTR(R9, R12, 6); \
	ROWPTR(R12, R13, 7)

// OUTERARGS loads the outer-product kernels' arguments: the row pointers
// (rowptrs), CX = k, DI = b, R10 = aks and R11 = bks in bytes.
#define OUTERARGS(rowptrs) \
	MOVQ a+8(FP), SI;     \
	MOVQ ars+16(FP), CX;  \
	SHLQ $2, CX;          \
	MOVQ mr+64(FP), DI;   \
	rowptrs;              \
	MOVQ k+0(FP), CX;     \
	MOVQ aks+24(FP), R10; \
	SHLQ $2, R10;         \
	MOVQ b+32(FP), DI;    \
	MOVQ bks+40(FP), R11; \
	SHLQ $2, R11

// KLOOP runs the k loop (CX steps, two per iteration through step and
// stepx, then the odd one) and jumps to store.
#define KLOOP(step, stepx, advance, loop, tail, store) \
	SUBQ $2, CX;   \
	JLT  tail;     \
loop:              \
	step;          \
	stepx;         \
	advance;       \
	SUBQ $2, CX;   \
	JGE  loop;     \
tail:              \
	ADDQ $2, CX;   \
	JEQ  store;    \
	step;          \
	JMP  store

// TAPB points DI at the current tap's B: b + offs[tap] (tap-8(SP)).
#define TAPB \
	MOVQ offs+40(FP), DI;   \
	MOVQ tap-8(SP), CX;     \
	MOVQ (DI)(CX*8), DI;    \
	SHLQ $2, DI;            \
	ADDQ b+32(FP), DI

// ODDK6 moves the 6 row pointers on by k mod 2 values: KLOOP's odd last
// step does not advance A.
#define ODDK6 \
	MOVQ k+0(FP), CX; \
	ANDQ $1, CX;      \
	SHLQ $2, CX;      \
	ADDQ CX, SI;      \
	ADDQ CX, AX;      \
	ADDQ CX, BX;      \
	ADDQ CX, DX;      \
	ADDQ CX, R8;      \
	ADDQ CX, R9

// NEXTTAP counts the tap done and loops to loop while taps remain.
#define NEXTTAP(loop) \
	MOVQ tap-8(SP), CX;    \
	INCQ CX;               \
	MOVQ CX, tap-8(SP);    \
	CMPQ CX, taps+8(FP);   \
	JLT  loop

// ZERO12 clears the 6×16 kernels' accumulators Y0..Y11.
#define ZERO12 \
	VXORPS Y0, Y0, Y0;    \
	VXORPS Y1, Y1, Y1;    \
	VXORPS Y2, Y2, Y2;    \
	VXORPS Y3, Y3, Y3;    \
	VXORPS Y4, Y4, Y4;    \
	VXORPS Y5, Y5, Y5;    \
	VXORPS Y6, Y6, Y6;    \
	VXORPS Y7, Y7, Y7;    \
	VXORPS Y8, Y8, Y8;    \
	VXORPS Y9, Y9, Y9;    \
	VXORPS Y10, Y10, Y10; \
	VXORPS Y11, Y11, Y11

// LOWMASK sets reg to the CX lowest bits: (1 << CX) - 1.
#define LOWMASK(reg) \
	MOVL $1, reg;  \
	SHLQ CX, reg;  \
	DECQ reg

// ZERO16 clears the 16 accumulators of the AVX-512 kernels, SCALE16 scales
// them by f.
#define ZERO16 \
	VPXORD Z0, Z0, Z0;    \
	VPXORD Z1, Z1, Z1;    \
	VPXORD Z2, Z2, Z2;    \
	VPXORD Z3, Z3, Z3;    \
	VPXORD Z4, Z4, Z4;    \
	VPXORD Z5, Z5, Z5;    \
	VPXORD Z6, Z6, Z6;    \
	VPXORD Z7, Z7, Z7;    \
	VPXORD Z8, Z8, Z8;    \
	VPXORD Z9, Z9, Z9;    \
	VPXORD Z10, Z10, Z10; \
	VPXORD Z11, Z11, Z11; \
	VPXORD Z12, Z12, Z12; \
	VPXORD Z13, Z13, Z13; \
	VPXORD Z14, Z14, Z14; \
	VPXORD Z15, Z15, Z15

#define SCALE16(f) \
	VMULPS f, Z0, Z0;   \
	VMULPS f, Z1, Z1;   \
	VMULPS f, Z2, Z2;   \
	VMULPS f, Z3, Z3;   \
	VMULPS f, Z4, Z4;   \
	VMULPS f, Z5, Z5;   \
	VMULPS f, Z6, Z6;   \
	VMULPS f, Z7, Z7;   \
	VMULPS f, Z8, Z8;   \
	VMULPS f, Z9, Z9;   \
	VMULPS f, Z10, Z10; \
	VMULPS f, Z11, Z11; \
	VMULPS f, Z12, Z12; \
	VMULPS f, Z13, Z13; \
	VMULPS f, Z14, Z14; \
	VMULPS f, Z15, Z15

// ---------------------------------------------------------------------------
// AVX-512: 8×32 tile, 16 accumulators (Z0..Z15: row i in Z2i, Z2i+1), rows
// of A at SI, AX, BX, DX, R8, R9, R12, R13. B's two vectors load under masks
// K1 and K2 (the columns below nr), so a partial tile at the right edge of B
// reads no memory past its columns.

#define FMA8x32(z0, z1, bcst) \
	VFMADD231PS Z16, bcst, z0; \
	VFMADD231PS Z17, bcst, z1

#define FMAS8x32 \
	FMA8x32(Z0, Z1, Z18);   \
	FMA8x32(Z2, Z3, Z19);   \
	FMA8x32(Z4, Z5, Z20);   \
	FMA8x32(Z6, Z7, Z21);   \
	FMA8x32(Z8, Z9, Z22);   \
	FMA8x32(Z10, Z11, Z23); \
	FMA8x32(Z12, Z13, Z24); \
	FMA8x32(Z14, Z15, Z25)

// B's two vectors for a step: whole (LOADB) or under masks K1 and K2
// (LOADBM), at DI or a k stride further (the X forms). The masked loads cost
// about 10% of the kernel's speed, so full panels take the unmasked loop.
#define LOADB \
	VMOVUPS (DI), Z16; \
	VMOVUPS 64(DI), Z17

#define LOADBX \
	VMOVUPS (DI)(R11*1), Z16; \
	VMOVUPS 64(DI)(R11*1), Z17

#define LOADBM \
	VMOVUPS.Z (DI), K1, Z16; \
	VMOVUPS.Z 64(DI), K2, Z17

#define LOADBMX \
	VMOVUPS.Z (DI)(R11*1), K1, Z16; \
	VMOVUPS.Z 64(DI)(R11*1), K2, Z17

// One step of k at the pointers, and one a k stride further.
#define STEP8x32(loadb) \
	loadb;                   \
	VBROADCASTSS (SI), Z18;  \
	VBROADCASTSS (AX), Z19;  \
	VBROADCASTSS (BX), Z20;  \
	VBROADCASTSS (DX), Z21;  \
	VBROADCASTSS (R8), Z22;  \
	VBROADCASTSS (R9), Z23;  \
	VBROADCASTSS (R12), Z24; \
	VBROADCASTSS (R13), Z25; \
	FMAS8x32

#define STEP8x32X(loadb) \
	loadb;                          \
	VBROADCASTSS (SI)(R10*1), Z18;  \
	VBROADCASTSS (AX)(R10*1), Z19;  \
	VBROADCASTSS (BX)(R10*1), Z20;  \
	VBROADCASTSS (DX)(R10*1), Z21;  \
	VBROADCASTSS (R8)(R10*1), Z22;  \
	VBROADCASTSS (R9)(R10*1), Z23;  \
	VBROADCASTSS (R12)(R10*1), Z24; \
	VBROADCASTSS (R13)(R10*1), Z25; \
	FMAS8x32

#define ADVANCE8x32 \
	ADVANCE(SI, R10);  \
	ADVANCE(AX, R10);  \
	ADVANCE(BX, R10);  \
	ADVANCE(DX, R10);  \
	ADVANCE(R8, R10);  \
	ADVANCE(R9, R10);  \
	ADVANCE(R12, R10); \
	ADVANCE(R13, R10); \
	ADVANCE(DI, R11)

// Store one row of the tile: c = acc (beta 0) or c = acc + beta·c (Z17 = beta).
#define ROW0_8x32(z0, z1) \
	VMOVUPS z0, K1, (DX); \
	VMOVUPS z1, K2, 64(DX)

#define ROWB_8x32(z0, z1) \
	VMOVUPS.Z   (DX), K1, Z18;   \
	VMOVUPS.Z   64(DX), K2, Z19; \
	VFMADD231PS Z18, Z17, z0;    \
	VFMADD231PS Z19, Z17, z1;    \
	VMOVUPS     z0, K1, (DX);    \
	VMOVUPS     z1, K2, 64(DX)

// NEXTROW moves DX to the next row of c, or leaves when the tile's mr rows
// (BX) are done.
#define NEXTROW(i, done) \
	CMPQ BX, $i; \
	JLE  done;   \
	ADDQ R12, DX

#define ROWS8x32(row) \
	row(Z0, Z1);             \
	NEXTROW(1, avx512done);  \
	row(Z2, Z3);             \
	NEXTROW(2, avx512done);  \
	row(Z4, Z5);             \
	NEXTROW(3, avx512done);  \
	row(Z6, Z7);             \
	NEXTROW(4, avx512done);  \
	row(Z8, Z9);             \
	NEXTROW(5, avx512done);  \
	row(Z10, Z11);           \
	NEXTROW(6, avx512done);  \
	row(Z12, Z13);           \
	NEXTROW(7, avx512done);  \
	row(Z14, Z15);           \
	JMP avx512done

// func sgemmAVX512(k int, a *float32, ars, aks int, b *float32, bks int, c *float32, ldc, mr, nr int, alpha, beta float32)
TEXT ·SgemmAVX512(SB), NOSPLIT, $0-88
	// Column masks: K1 = columns 0..15 below nr, K2 = columns 16..31.
	MOVQ  nr+72(FP), CX
	LOWMASK(AX)
	KMOVW AX, K1
	SHRQ  $16, AX
	KMOVW AX, K2

	OUTERARGS(ROWPTRS8)

	ZERO16

	// Two steps of k per iteration, then the odd one; full panels (K2 all
	// ones) load B unmasked.
	KORTESTW K2, K2
	JCC      avx512masked
	KLOOP(STEP8x32(LOADB), STEP8x32X(LOADBX), ADVANCE8x32, avx512loop, avx512tail, avx512store)

avx512masked:
	KLOOP(STEP8x32(LOADBM), STEP8x32X(LOADBMX), ADVANCE8x32, avx512loopm, avx512tailm, avx512store)

avx512store:
	VBROADCASTSS alpha+80(FP), Z16
	SCALE16(Z16)

	MOVQ c+48(FP), DX
	MOVQ ldc+56(FP), R12
	SHLQ $2, R12
	MOVQ mr+64(FP), BX

	// beta == ±0: write without reading c.
	MOVL beta+84(FP), AX
	ANDL $0x7fffffff, AX
	JEQ  avx512beta0
	VBROADCASTSS beta+84(FP), Z17
	ROWS8x32(ROWB_8x32)

avx512beta0:
	ROWS8x32(ROW0_8x32)

avx512done:
	VZEROUPPER
	RET

// ---------------------------------------------------------------------------
// AVX-512 dot-product kernel for c = alpha·a·bᵀ + beta·c with both operands'
// rows along k (a m×k, b n×k, row-major): an 8×2 tile of c whose 16
// accumulators (Z0..Z15: c[i, j] in Z2i+j) each hold 16 partial sums over k,
// one per lane (l mod 16). Neither operand is copied: the outer-product
// kernel would need b transposed into panels, which costs as much as the
// product itself when m is small. The lanes are added at the end by a tree
// of shuffles (DOTLEVEL): 16 vectors to one whose lane 2i+j is c[i, j]'s
// sum. Rows of a past mr repeat row mr-1 (ROWPTR), the second row of b
// repeats the first when nr is 1, and a partial last chunk of k loads masked.

// One chunk of 16 values of k: b's two rows, then each row of a times both.
// ld loads whole vectors (LDW) or the lanes of K1 (LDM).
#define LDW(addr, z) \
	VMOVUPS addr, z

#define LDM(addr, z) \
	VMOVUPS.Z addr, K1, z

#define DOTROW(ld, row, za, z0, z1) \
	ld((row)(R11*1), za);      \
	VFMADD231PS Z24, za, z0; \
	VFMADD231PS Z25, za, z1

#define DOTCHUNK(ld) \
	ld((DI)(R11*1), Z24);  \
	ld((R10)(R11*1), Z25); \
	DOTROW(ld, SI, Z16, Z0, Z1); \
	DOTROW(ld, AX, Z17, Z2, Z3); \
	DOTROW(ld, BX, Z18, Z4, Z5); \
	DOTROW(ld, DX, Z19, Z6, Z7); \
	DOTROW(ld, R8, Z20, Z8, Z9); \
	DOTROW(ld, R9, Z21, Z10, Z11); \
	DOTROW(ld, R12, Z22, Z12, Z13); \
	DOTROW(ld, R13, Z23, Z14, Z15)

// DOTLEVEL adds x's and y's halves (the 128-bit chunks or the lanes that
// imm1 and imm2 select, with shuf) into x.
#define DOTLEVEL(shuf, imm1, imm2, y, x) \
	shuf imm1, y, x, Z30; \
	shuf imm2, y, x, Z31; \
	VADDPS Z31, Z30, x

// func sgemmDotAVX512(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc, mr, nr int, alpha, beta float32)
TEXT ·SgemmDotAVX512(SB), NOSPLIT, $0-80
	// K1: the lanes of the last, partial chunk of k (none when 16 | k).
	MOVQ  k+0(FP), CX
	ANDQ  $15, CX
	LOWMASK(AX)
	KMOVW AX, K1

	MOVQ a+8(FP), SI
	MOVQ lda+16(FP), CX
	SHLQ $2, CX
	MOVQ mr+56(FP), DI
	ROWPTRS8

	MOVQ    b+24(FP), DI
	MOVQ    ldb+32(FP), R10
	SHLQ    $2, R10
	ADDQ    DI, R10
	CMPQ    nr+64(FP), $1
	CMOVQLE DI, R10

	ZERO16

	XORQ R11, R11 // byte offset along k
	MOVQ k+0(FP), CX
	SHRQ $4, CX
	JEQ  dottail

dotloop:
	DOTCHUNK(LDW)
	ADDQ $64, R11
	DECQ CX
	JNE  dotloop

dottail:
	KORTESTW K1, K1
	JEQ      dotreduce
	DOTCHUNK(LDM)

dotreduce:
	// Pair the vectors so that lane 2i+j of Z0 ends with c[i, j] (Z2i+j):
	// the tree transposes 4×4 blocks, and this order transposes them back.
	DOTLEVEL(VSHUFF32X4, $0x44, $0xee, Z4, Z0)
	DOTLEVEL(VSHUFF32X4, $0x44, $0xee, Z12, Z8)
	DOTLEVEL(VSHUFF32X4, $0x44, $0xee, Z5, Z1)
	DOTLEVEL(VSHUFF32X4, $0x44, $0xee, Z13, Z9)
	DOTLEVEL(VSHUFF32X4, $0x44, $0xee, Z6, Z2)
	DOTLEVEL(VSHUFF32X4, $0x44, $0xee, Z14, Z10)
	DOTLEVEL(VSHUFF32X4, $0x44, $0xee, Z7, Z3)
	DOTLEVEL(VSHUFF32X4, $0x44, $0xee, Z15, Z11)
	DOTLEVEL(VSHUFF32X4, $0x88, $0xdd, Z8, Z0)
	DOTLEVEL(VSHUFF32X4, $0x88, $0xdd, Z9, Z1)
	DOTLEVEL(VSHUFF32X4, $0x88, $0xdd, Z10, Z2)
	DOTLEVEL(VSHUFF32X4, $0x88, $0xdd, Z11, Z3)
	DOTLEVEL(VSHUFPS, $0x88, $0xdd, Z1, Z0)
	DOTLEVEL(VSHUFPS, $0x88, $0xdd, Z3, Z2)
	DOTLEVEL(VSHUFPS, $0x88, $0xdd, Z2, Z0)

	VBROADCASTSS alpha+72(FP), Z16
	VMULPS       Z16, Z0, Z0

	// Row i's two values are lanes 2i, 2i+1: each row stores Z0 under the
	// mask of its lanes (K2, shifted by 2 per row) at c + i·ldc - 2i floats,
	// which puts them at c[i, 0] and c[i, 1].
	MOVQ  nr+64(FP), CX
	LOWMASK(AX)
	KMOVW AX, K2
	MOVQ  c+40(FP), DX
	MOVQ  ldc+48(FP), R12
	SHLQ  $2, R12
	SUBQ  $8, R12
	MOVQ  mr+56(FP), BX
	MOVL  beta+76(FP), AX
	ANDL  $0x7fffffff, AX
	JEQ   dotbeta0
	VBROADCASTSS beta+76(FP), Z17

dotrowb:
	VMOVUPS.Z   (DX), K2, Z1
	VFMADD231PS Z1, Z17, Z0
	VMOVUPS     Z0, K2, (DX)
	DECQ        BX
	JEQ         dotdone
	ADDQ        R12, DX
	KSHIFTLW    $2, K2, K2
	JMP         dotrowb

dotbeta0:
	VMOVUPS  Z0, K2, (DX)
	DECQ     BX
	JEQ      dotdone
	ADDQ     R12, DX
	KSHIFTLW $2, K2, K2
	JMP      dotbeta0

dotdone:
	VZEROUPPER
	RET

// ---------------------------------------------------------------------------
// AVX2 + FMA: 6×16 tile, 12 accumulators (Y0..Y11: row i in Y2i, Y2i+1),
// rows of A at SI, AX, BX, DX, R8, R9. AVX2 has no cheap masked load, so
// B's loads are full: the caller pads a partial panel of B to 16 columns.
// Stores to c are masked when nr < 16.

#define FMA6x16(y0, y1, bcst) \
	VFMADD231PS Y12, bcst, y0; \
	VFMADD231PS Y13, bcst, y1

#define STEP6x16 \
	VMOVUPS      (DI), Y12;   \
	VMOVUPS      32(DI), Y13; \
	VBROADCASTSS (SI), Y14;   \
	VBROADCASTSS (AX), Y15;   \
	FMA6x16(Y0, Y1, Y14);     \
	FMA6x16(Y2, Y3, Y15);     \
	VBROADCASTSS (BX), Y14;   \
	VBROADCASTSS (DX), Y15;   \
	FMA6x16(Y4, Y5, Y14);     \
	FMA6x16(Y6, Y7, Y15);     \
	VBROADCASTSS (R8), Y14;   \
	VBROADCASTSS (R9), Y15;   \
	FMA6x16(Y8, Y9, Y14);     \
	FMA6x16(Y10, Y11, Y15)

#define STEP6x16X \
	VMOVUPS      (DI)(R11*1), Y12;   \
	VMOVUPS      32(DI)(R11*1), Y13; \
	VBROADCASTSS (SI)(R10*1), Y14;   \
	VBROADCASTSS (AX)(R10*1), Y15;   \
	FMA6x16(Y0, Y1, Y14);            \
	FMA6x16(Y2, Y3, Y15);            \
	VBROADCASTSS (BX)(R10*1), Y14;   \
	VBROADCASTSS (DX)(R10*1), Y15;   \
	FMA6x16(Y4, Y5, Y14);            \
	FMA6x16(Y6, Y7, Y15);            \
	VBROADCASTSS (R8)(R10*1), Y14;   \
	VBROADCASTSS (R9)(R10*1), Y15;   \
	FMA6x16(Y8, Y9, Y14);            \
	FMA6x16(Y10, Y11, Y15)

#define ADVANCE6x16 \
	ADVANCE(SI, R10); \
	ADVANCE(AX, R10); \
	ADVANCE(BX, R10); \
	ADVANCE(DX, R10); \
	ADVANCE(R8, R10); \
	ADVANCE(R9, R10); \
	ADVANCE(DI, R11)

// Full-width rows (Y14 = beta).
#define ROW0_6x16(y0, y1) \
	VMOVUPS y0, (DX); \
	VMOVUPS y1, 32(DX)

#define ROWB_6x16(y0, y1) \
	VFMADD231PS (DX), Y14, y0;   \
	VFMADD231PS 32(DX), Y14, y1; \
	VMOVUPS     y0, (DX);        \
	VMOVUPS     y1, 32(DX)

// Rows masked to nr columns (Y12, Y13 = masks, Y14 = beta, Y15 scratch).
#define ROW0M_6x16(y0, y1) \
	VMASKMOVPS y0, Y12, (DX); \
	VMASKMOVPS y1, Y13, 32(DX)

#define ROWBM_6x16(y0, y1) \
	VMASKMOVPS  (DX), Y12, Y15;   \
	VFMADD231PS Y15, Y14, y0;     \
	VMASKMOVPS  32(DX), Y13, Y15; \
	VFMADD231PS Y15, Y14, y1;     \
	VMASKMOVPS  y0, Y12, (DX);    \
	VMASKMOVPS  y1, Y13, 32(DX)

#define ROWS6x16(row) \
	row(Y0, Y1);            \
	NEXTROW(1, avx2done);   \
	row(Y2, Y3);            \
	NEXTROW(2, avx2done);   \
	row(Y4, Y5);            \
	NEXTROW(3, avx2done);   \
	row(Y6, Y7);            \
	NEXTROW(4, avx2done);   \
	row(Y8, Y9);            \
	NEXTROW(5, avx2done);   \
	row(Y10, Y11);          \
	JMP avx2done

// func sgemmAVX2(k int, a *float32, ars, aks int, b *float32, bks int, c *float32, ldc, mr, nr int, alpha, beta float32)
TEXT ·SgemmAVX2(SB), NOSPLIT, $0-88
	OUTERARGS(ROWPTRS6)

	ZERO12

	KLOOP(STEP6x16, STEP6x16X, ADVANCE6x16, avx2loop, avx2tail, avx2store)

avx2store:
	VBROADCASTSS alpha+80(FP), Y14
	VMULPS       Y14, Y0, Y0
	VMULPS       Y14, Y1, Y1
	VMULPS       Y14, Y2, Y2
	VMULPS       Y14, Y3, Y3
	VMULPS       Y14, Y4, Y4
	VMULPS       Y14, Y5, Y5
	VMULPS       Y14, Y6, Y6
	VMULPS       Y14, Y7, Y7
	VMULPS       Y14, Y8, Y8
	VMULPS       Y14, Y9, Y9
	VMULPS       Y14, Y10, Y10
	VMULPS       Y14, Y11, Y11
	VBROADCASTSS beta+84(FP), Y14

	MOVQ c+48(FP), DX
	MOVQ ldc+56(FP), R12
	SHLQ $2, R12
	MOVQ mr+64(FP), BX
	MOVL beta+84(FP), AX
	ANDL $0x7fffffff, AX
	MOVQ nr+72(FP), CX
	CMPQ CX, $16
	JNE  avx2masked

	TESTL AX, AX
	JEQ   avx2full0
	ROWS6x16(ROWB_6x16)

avx2full0:
	ROWS6x16(ROW0_6x16)

avx2masked:
	// Lane j of the masks is all ones when column j (Y12) or 8+j (Y13) is
	// below nr: ·laneMask holds 16 all-ones words and then 16 zeros.
	LEAQ    ·laneMask(SB), R8
	NEGQ    CX
	LEAQ    64(R8)(CX*4), R8
	VMOVUPS (R8), Y12
	VMOVUPS 32(R8), Y13
	TESTL   AX, AX
	JEQ     avx2masked0
	ROWS6x16(ROWBM_6x16)

avx2masked0:
	ROWS6x16(ROW0M_6x16)

avx2done:
	VZEROUPPER
	RET

DATA ·laneMask+0(SB)/8, $0xffffffffffffffff
DATA ·laneMask+8(SB)/8, $0xffffffffffffffff
DATA ·laneMask+16(SB)/8, $0xffffffffffffffff
DATA ·laneMask+24(SB)/8, $0xffffffffffffffff
DATA ·laneMask+32(SB)/8, $0xffffffffffffffff
DATA ·laneMask+40(SB)/8, $0xffffffffffffffff
DATA ·laneMask+48(SB)/8, $0xffffffffffffffff
DATA ·laneMask+56(SB)/8, $0xffffffffffffffff
DATA ·laneMask+64(SB)/8, $0
DATA ·laneMask+72(SB)/8, $0
DATA ·laneMask+80(SB)/8, $0
DATA ·laneMask+88(SB)/8, $0
DATA ·laneMask+96(SB)/8, $0
DATA ·laneMask+104(SB)/8, $0
DATA ·laneMask+112(SB)/8, $0
DATA ·laneMask+120(SB)/8, $0
// ·laneMask is shared with loops_avx2_amd64.s's tail masks.
GLOBL ·laneMask(SB), RODATA|NOPTR, $128

// ---------------------------------------------------------------------------
// Transposing pack (AVX): dst[c·ldd + r] = src[r·lds + c] for r < rows,
// c < cols, both multiples of 8, in 8×8 blocks. Each block loads its rows in
// halves, rows r and r+4 together (so the cross-lane step is done by the
// loads), then runs two 4×4 transposes per 128-bit lane: 8 unpacks and 8
// shuffles for 64 values.

// LOADHALF loads columns off..off+3 of rows r (base) and r+4 (base4).
#define LOADHALF(base, base4, off, y, x) \
	VMOVUPS     off base, x; \
	VINSERTF128 $1, off base4, y, y

// TRANS4 writes the four columns held by y0..y3 (rows 0-3 low, 4-7 high)
// to dst rows at DX, DX+ldd, DX+2·ldd, DX+3·ldd (R11 = ldd, R12 = 3·ldd).
#define TRANS4(y0, y1, y2, y3) \
	VUNPCKLPS y1, y0, Y8;         \
	VUNPCKHPS y1, y0, Y9;         \
	VUNPCKLPS y3, y2, Y10;        \
	VUNPCKHPS y3, y2, Y11;        \
	VSHUFPS   $0x44, Y10, Y8, Y12; \
	VSHUFPS   $0xee, Y10, Y8, Y13; \
	VSHUFPS   $0x44, Y11, Y9, Y14; \
	VSHUFPS   $0xee, Y11, Y9, Y15; \
	VMOVUPS   Y12, (DX);          \
	VMOVUPS   Y13, (DX)(R11*1);   \
	VMOVUPS   Y14, (DX)(R11*2);   \
	VMOVUPS   Y15, (DX)(R12*1)

// func sgemmPackT(dst *float32, ldd int, src *float32, lds, rows, cols int)
TEXT ·PackT(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ ldd+8(FP), R11
	SHLQ $2, R11
	LEAQ (R11)(R11*2), R12
	MOVQ src+16(FP), SI
	MOVQ lds+24(FP), R8
	SHLQ $2, R8
	LEAQ (R8)(R8*2), R9
	MOVQ rows+32(FP), BX
	SHRQ $3, BX
	JEQ  packdone

packrows:
	// SI: row r of src; DI: column r of dst.
	LEAQ (SI)(R8*4), R13
	MOVQ SI, AX
	MOVQ R13, R10
	MOVQ DI, DX
	MOVQ cols+40(FP), CX
	SHRQ $3, CX
	JEQ  packnext

packcols:
	LOADHALF((AX), (R10), 0, Y0, X0)
	LOADHALF((AX)(R8*1), (R10)(R8*1), 0, Y1, X1)
	LOADHALF((AX)(R8*2), (R10)(R8*2), 0, Y2, X2)
	LOADHALF((AX)(R9*1), (R10)(R9*1), 0, Y3, X3)
	LOADHALF((AX), (R10), 16, Y4, X4)
	LOADHALF((AX)(R8*1), (R10)(R8*1), 16, Y5, X5)
	LOADHALF((AX)(R8*2), (R10)(R8*2), 16, Y6, X6)
	LOADHALF((AX)(R9*1), (R10)(R9*1), 16, Y7, X7)

	TRANS4(Y0, Y1, Y2, Y3)
	LEAQ (DX)(R11*4), DX
	TRANS4(Y4, Y5, Y6, Y7)
	LEAQ (DX)(R11*4), DX

	ADDQ $32, AX
	ADDQ $32, R10
	DECQ CX
	JNE  packcols

packnext:
	LEAQ (SI)(R8*8), SI
	ADDQ $32, DI
	DECQ BX
	JNE  packrows

packdone:
	VZEROUPPER
	RET

// ---------------------------------------------------------------------------
// AVX-512 tile of a sum of products over shifted B (conv_shifted.go): 8 rows
// of C by two segments of up to 16 columns, wherever they lie,
//
//	c[i, j]      = Σ_t Σ_l A(i, t·k + l)·B_t(l, j),       j < n1
//	c[i, c2 + j] = Σ_t Σ_l A(i, t·k + l)·B_t(l, b2 + j),  j < n2
//
// with A(i, m) at a + i·ars + m and B_t(l, j) at b + offs[t] + l·bks + j, all
// taps summed in the same accumulators (one sum per element, taps in order,
// l in order within a tap). The steps are the outer-product kernel's; the
// A row pointers run on through the taps (A's row holds the taps' k values
// one after the other) and B's pointer restarts at each tap's offset. The
// segments let a tile cover one image row of up to 32 values or two of up
// to 16 (the second a padded row further in B, an image row further in C),
// so that the output lands in place without the padding's columns.

// Steps of the taps kernel: B's two segments at DI and DI + R10 (whole or
// under K1 and K2), A's values at the row pointers (the outer-product
// kernel's STEP8x32; the second step 4 bytes on), then A two values on and
// B two rows on (R11 = bks).
#define TLOADB \
	VMOVUPS (DI), Z16; \
	VMOVUPS (DI)(R10*1), Z17

#define TLOADBM \
	VMOVUPS.Z (DI), K1, Z16; \
	VMOVUPS.Z (DI)(R10*1), K2, Z17

#define TSTEPX(loadb) \
	ADDQ R11, DI;             \
	loadb;                    \
	VBROADCASTSS 4(SI), Z18;  \
	VBROADCASTSS 4(AX), Z19;  \
	VBROADCASTSS 4(BX), Z20;  \
	VBROADCASTSS 4(DX), Z21;  \
	VBROADCASTSS 4(R8), Z22;  \
	VBROADCASTSS 4(R9), Z23;  \
	VBROADCASTSS 4(R12), Z24; \
	VBROADCASTSS 4(R13), Z25; \
	FMAS8x32

#define TADVANCE \
	ADDQ $8, SI;  \
	ADDQ $8, AX;  \
	ADDQ $8, BX;  \
	ADDQ $8, DX;  \
	ADDQ $8, R8;  \
	ADDQ $8, R9;  \
	ADDQ $8, R12; \
	ADDQ $8, R13; \
	ADDQ R11, DI

// Store one row's segments under K1 and K2 (R10 = c2 in bytes).
#define TROW(z0, z1) \
	VMOVUPS z0, K1, (DX); \
	VMOVUPS z1, K2, (DX)(R10*1)

// func sgemmTapsAVX512(k, taps int, a *float32, ars int, b *float32, offs *int, bks, b2 int, c *float32, ldc, c2, mr, n1, n2 int)
TEXT ·SgemmTapsAVX512(SB), NOSPLIT, $8-112
	// Segment masks: K1 = the n1 lowest lanes, K2 = the n2 lowest.
	MOVQ  n1+96(FP), CX
	LOWMASK(AX)
	KMOVW AX, K1
	MOVQ  n2+104(FP), CX
	LOWMASK(AX)
	KMOVW AX, K2

	MOVQ a+16(FP), SI
	MOVQ ars+24(FP), CX
	SHLQ $2, CX
	MOVQ mr+88(FP), DI
	ROWPTRS8
	MOVQ b2+56(FP), R10
	SHLQ $2, R10
	MOVQ bks+48(FP), R11
	SHLQ $2, R11

	ZERO16
	MOVQ $0, tap-8(SP)

tapsloop:
	TAPB
	MOVQ k+0(FP), CX
	// Two whole segments load unmasked.
	KANDW    K1, K2, K3
	KORTESTW K3, K3
	JCC      tapsmasked
	KLOOP(STEP8x32(TLOADB), TSTEPX(TLOADB), TADVANCE, tapsfull, tapstailf, tapsnext)

tapsmasked:
	KLOOP(STEP8x32(TLOADBM), TSTEPX(TLOADBM), TADVANCE, tapsloopm, tapstailm, tapsnext)

tapsnext:
	ODDK6
	ADDQ CX, R12
	ADDQ CX, R13
	NEXTTAP(tapsloop)

	MOVQ c+64(FP), DX
	MOVQ ldc+72(FP), R12
	SHLQ $2, R12
	MOVQ c2+80(FP), R10
	SHLQ $2, R10
	MOVQ mr+88(FP), BX
	TROW(Z0, Z1)
	NEXTROW(1, tapsdone)
	TROW(Z2, Z3)
	NEXTROW(2, tapsdone)
	TROW(Z4, Z5)
	NEXTROW(3, tapsdone)
	TROW(Z6, Z7)
	NEXTROW(4, tapsdone)
	TROW(Z8, Z9)
	NEXTROW(5, tapsdone)
	TROW(Z10, Z11)
	NEXTROW(6, tapsdone)
	TROW(Z12, Z13)
	NEXTROW(7, tapsdone)
	TROW(Z14, Z15)

tapsdone:
	VZEROUPPER
	RET

// ---------------------------------------------------------------------------
// AVX2 tile of the same sum of products over shifted B: 6 rows of C by one
// segment of up to 16 columns,
//
//	c[i, j] = Σ_t Σ_l A(i, t·k + l)·B_t(l, j),  j < n,
//
// in the 6×16 kernel's registers and steps (A's row pointers run on through
// the taps, B's pointer restarts at each tap's offset). B's rows load 16
// columns whatever n is: the caller makes sure the 16-n values past a
// partial segment are readable (models/ops.shiftGEMM); they only reach
// lanes that are not stored. The stores are masked to n columns.

// func SgemmTapsAVX2(k, taps int, a *float32, ars int, b *float32, offs *int, bks int, c *float32, ldc, mr, n int)
TEXT ·SgemmTapsAVX2(SB), NOSPLIT, $8-88
	MOVQ a+16(FP), SI
	MOVQ ars+24(FP), CX
	SHLQ $2, CX
	MOVQ mr+72(FP), DI
	ROWPTRS6
	MOVQ $4, R10
	MOVQ bks+48(FP), R11
	SHLQ $2, R11

	ZERO12
	MOVQ   $0, tap-8(SP)

t6tap:
	TAPB
	MOVQ k+0(FP), CX
	KLOOP(STEP6x16, STEP6x16X, ADVANCE6x16, t6loop, t6tail, t6next)

t6next:
	ODDK6
	NEXTTAP(t6tap)

	// Masks of the n lowest columns: ·laneMask holds 16 all-ones words,
	// then 16 zeros.
	MOVQ    n+80(FP), CX
	LEAQ    ·laneMask(SB), R8
	NEGQ    CX
	LEAQ    64(R8)(CX*4), R8
	VMOVUPS (R8), Y12
	VMOVUPS 32(R8), Y13
	MOVQ    c+56(FP), DX
	MOVQ    ldc+64(FP), R12
	SHLQ    $2, R12
	MOVQ    mr+72(FP), BX
	ROW0M_6x16(Y0, Y1)
	NEXTROW(1, t6done)
	ROW0M_6x16(Y2, Y3)
	NEXTROW(2, t6done)
	ROW0M_6x16(Y4, Y5)
	NEXTROW(3, t6done)
	ROW0M_6x16(Y6, Y7)
	NEXTROW(4, t6done)
	ROW0M_6x16(Y8, Y9)
	NEXTROW(5, t6done)
	ROW0M_6x16(Y10, Y11)

t6done:
	VZEROUPPER
	RET

// ---------------------------------------------------------------------------
// AVX2 + FMA dot-product kernel: the 8×2 tile of SgemmDotAVX512 in two halves
// of 4×2, each value a dot product summed 8 lanes wide in its own accumulator
// (Y0..Y7: c[i, j] in Y(2i+j)), A's rows at SI, AX, BX, R8 (rows at or past
// mr repeat row 0), B's at DI and R10. The last k mod 8 values load under the
// mask Y15 (lanes below k mod 8), the others as zeros.

DATA dotlanes<>+0(SB)/4, $0
DATA dotlanes<>+4(SB)/4, $1
DATA dotlanes<>+8(SB)/4, $2
DATA dotlanes<>+12(SB)/4, $3
DATA dotlanes<>+16(SB)/4, $4
DATA dotlanes<>+20(SB)/4, $5
DATA dotlanes<>+24(SB)/4, $6
DATA dotlanes<>+28(SB)/4, $7
GLOBL dotlanes<>(SB), RODATA|NOPTR, $32

#define DOT4x2(load) \
	load(DI, Y8);                \
	load(R10, Y9);               \
	load(SI, Y10);               \
	VFMADD231PS Y8, Y10, Y0;     \
	VFMADD231PS Y9, Y10, Y1;     \
	load(AX, Y10);               \
	VFMADD231PS Y8, Y10, Y2;     \
	VFMADD231PS Y9, Y10, Y3;     \
	load(BX, Y10);               \
	VFMADD231PS Y8, Y10, Y4;     \
	VFMADD231PS Y9, Y10, Y5;     \
	load(R8, Y10);               \
	VFMADD231PS Y8, Y10, Y6;     \
	VFMADD231PS Y9, Y10, Y7

// A row's pair (x, lanes 0 and 1) into c at DX under the store mask X13:
// c = x + beta·c (beta in X12), or c = x.
#define DOTROWBETA(x) \
	VMASKMOVPS  (DX), X13, X4; \
	VFMADD231PS X4, X12, x;    \
	VMASKMOVPS  x, X13, (DX)

// Done after row r of the half (R9 rows left), else DX to the next row.
#define DOTNEXTROW(r) \
	CMPQ R9, $r;    \
	JLE  dot2done; \
	ADDQ R13, DX

#define LDFULL(ptr, y) VMOVUPS (ptr)(R11*1), y
#define LDTAIL(ptr, y) VMASKMOVPS (ptr)(R11*1), Y15, y

// func SgemmDotAVX2(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc, mr, nr int, alpha, beta float32)
TEXT ·SgemmDotAVX2(SB), NOSPLIT, $0-80
	VMOVDQU dotlanes<>(SB), Y14
	MOVQ    k+0(FP), CX
	ANDQ    $7, CX
	VMOVD   CX, X15
	VPBROADCASTD X15, Y15
	VPCMPGTD Y14, Y15, Y15 // lanes below k mod 8
	MOVQ    nr+64(FP), CX
	VMOVD   CX, X13
	VPBROADCASTD X13, X13
	VPCMPGTD X14, X13, X13 // the store mask of a row's pair: lanes below nr

	MOVQ    a+8(FP), SI
	MOVQ    lda+16(FP), R12
	SHLQ    $2, R12
	MOVQ    b+24(FP), DI
	MOVQ    ldb+32(FP), R10
	SHLQ    $2, R10
	ADDQ    DI, R10
	CMPQ    nr+64(FP), $1
	CMOVQLE DI, R10
	MOVQ    c+40(FP), R14
	MOVQ    ldc+48(FP), R13
	SHLQ    $2, R13
	MOVQ    mr+56(FP), R9 // rows left

dot2half:
	LEAQ    (SI)(R12*1), AX
	CMPQ    R9, $2
	CMOVQLT SI, AX
	LEAQ    (AX)(R12*1), BX
	CMPQ    R9, $3
	CMOVQLT SI, BX
	LEAQ    (BX)(R12*1), R8
	CMPQ    R9, $4
	CMOVQLT SI, R8
	VXORPS  Y0, Y0, Y0
	VXORPS  Y1, Y1, Y1
	VXORPS  Y2, Y2, Y2
	VXORPS  Y3, Y3, Y3
	VXORPS  Y4, Y4, Y4
	VXORPS  Y5, Y5, Y5
	VXORPS  Y6, Y6, Y6
	VXORPS  Y7, Y7, Y7
	XORQ    R11, R11 // byte offset along k
	MOVQ    k+0(FP), CX
	SHRQ    $3, CX
	JEQ     dot2tail

dot2loop:
	DOT4x2(LDFULL)
	ADDQ $32, R11
	DECQ CX
	JNE  dot2loop

dot2tail:
	MOVQ k+0(FP), CX
	ANDQ $7, CX
	JEQ  dot2reduce
	DOT4x2(LDTAIL)

dot2reduce:
	// Pairwise sums: Y0 ends as [c00 c01 c10 c11 | c20 c21 c30 c31].
	VHADDPS    Y1, Y0, Y0
	VHADDPS    Y3, Y2, Y2
	VHADDPS    Y5, Y4, Y4
	VHADDPS    Y7, Y6, Y6
	VHADDPS    Y2, Y0, Y0
	VHADDPS    Y6, Y4, Y4
	VPERM2F128 $0x20, Y4, Y0, Y1
	VPERM2F128 $0x31, Y4, Y0, Y2
	VADDPS     Y2, Y1, Y0
	VBROADCASTSS alpha+72(FP), Y11
	VMULPS     Y11, Y0, Y0
	VEXTRACTF128 $1, Y0, X1 // rows 2 and 3
	VPERMILPS  $0xee, X0, X2 // row 1
	VPERMILPS  $0xee, X1, X3 // row 3
	MOVQ       R14, DX
	MOVL       beta+76(FP), CX
	ANDL       $0x7fffffff, CX
	JEQ        dot2beta0
	VBROADCASTSS beta+76(FP), X12
	DOTROWBETA(X0)
	DOTNEXTROW(1)
	DOTROWBETA(X2)
	DOTNEXTROW(2)
	DOTROWBETA(X1)
	DOTNEXTROW(3)
	DOTROWBETA(X3)
	JMP dot2next

dot2beta0:
	VMASKMOVPS X0, X13, (DX)
	DOTNEXTROW(1)
	VMASKMOVPS X2, X13, (DX)
	DOTNEXTROW(2)
	VMASKMOVPS X1, X13, (DX)
	DOTNEXTROW(3)
	VMASKMOVPS X3, X13, (DX)

dot2next:
	// The second half: rows 4..7.
	SUBQ $4, R9
	JLE  dot2done
	LEAQ (SI)(R12*4), SI
	LEAQ (R14)(R13*4), R14
	JMP  dot2half

dot2done:
	VZEROUPPER
	RET
