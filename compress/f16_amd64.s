#include "textflag.h"

// func cpuid1ECX() uint32
// ECX of CPUID leaf 1 (bit 29: F16C).
TEXT ·cpuid1ECX(SB), NOSPLIT, $0-4
	MOVL $1, AX
	XORL CX, CX
	CPUID
	MOVL CX, ret+0(FP)
	RET

// func roundF16AVX(v *float32, n int)
// Rounds v[0:n] (n a multiple of 8) to half precision and back in place,
// eight at a time: VCVTPS2PH with round to nearest even, VCVTPH2PS. A NaN
// becomes sign | 0x7fc00000, the quiet NaN that F32FromF16(F16FromF32(x))
// gives, where the instructions would keep some of its payload.
TEXT ·roundF16AVX(SB), NOSPLIT, $0-16
	MOVQ         v+0(FP), SI
	MOVQ         n+8(FP), CX
	MOVL         $0x80000000, AX
	MOVL         AX, X6
	VPBROADCASTD X6, Y6
	MOVL         $0x7fc00000, AX
	MOVL         AX, X7
	VPBROADCASTD X7, Y7
	TESTQ        CX, CX
	JZ           done

loop:
	VMOVUPS   (SI), Y0
	VCVTPS2PH $0, Y0, X1
	VCVTPH2PS X1, Y1
	VCMPPS    $3, Y0, Y0, Y2 // unordered with itself: NaN
	VANDPS    Y6, Y0, Y3
	VORPS     Y7, Y3, Y3
	VBLENDVPS Y2, Y3, Y1, Y1
	VMOVUPS   Y1, (SI)
	ADDQ      $32, SI
	SUBQ      $8, CX
	JNZ       loop

done:
	VZEROUPPER
	RET
