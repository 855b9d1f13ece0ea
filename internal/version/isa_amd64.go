package version

import "golang.org/x/sys/cpu"

// vectorISA names the widest vector instructions the assembly kernels
// (models/ops/internal/kernels) run on this CPU, as they choose them:
// AVX-512 (AVX512F), else AVX2 (with FMA), else none ("").
func vectorISA() string {
	switch {
	case cpu.X86.HasAVX512F:
		return "AVX-512"
	case cpu.X86.HasAVX2 && cpu.X86.HasFMA:
		return "AVX2"
	}
	return ""
}
