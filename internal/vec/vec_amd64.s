#include "textflag.h"

// vec.go's loops, eight float32 lanes at a time: each element's additions
// in the Go loops' order, then the multiplication, so the bits are the Go
// loops'. n is a multiple of 8.

// func addsAVX(dst *float32, srcs *[4]*float32, k, n int): dst += srcs[0],
// then srcs[1], ..., srcs[k-1], k from 1 to 4.
TEXT ·addsAVX(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ srcs+8(FP), SI
	MOVQ k+16(FP), R8
	MOVQ n+24(FP), CX
	XORQ AX, AX

addsLoop:
	CMPQ    AX, CX
	JGE     addsDone
	VMOVUPS (DI)(AX*4), Y0
	XORQ    DX, DX

addsSource:
	MOVQ    (SI)(DX*8), R9
	VADDPS  (R9)(AX*4), Y0, Y0
	INCQ    DX
	CMPQ    DX, R8
	JLT     addsSource
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ    $8, AX
	JMP     addsLoop

addsDone:
	VZEROUPPER
	RET

// func scaleAVX(dst *float32, n int, s float32)
TEXT ·scaleAVX(SB), NOSPLIT, $0-20
	MOVQ         dst+0(FP), DI
	MOVQ         n+8(FP), CX
	VBROADCASTSS s+16(FP), Y1
	XORQ         AX, AX

scaleLoop:
	CMPQ    AX, CX
	JGE     scaleDone
	VMULPS  (DI)(AX*4), Y1, Y0
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ    $8, AX
	JMP     scaleLoop

scaleDone:
	VZEROUPPER
	RET

// func addScaleAVX(out, x, a *float32, n int, s float32): out = (x + a) * s.
TEXT ·addScaleAVX(SB), NOSPLIT, $0-36
	MOVQ         out+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         a+16(FP), R8
	MOVQ         n+24(FP), CX
	VBROADCASTSS s+32(FP), Y1
	XORQ         AX, AX

addScaleLoop:
	CMPQ    AX, CX
	JGE     addScaleDone
	VMOVUPS (SI)(AX*4), Y0
	VADDPS  (R8)(AX*4), Y0, Y0
	VMULPS  Y0, Y1, Y0
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ    $8, AX
	JMP     addScaleLoop

addScaleDone:
	VZEROUPPER
	RET
