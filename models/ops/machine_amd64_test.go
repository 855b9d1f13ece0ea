package ops

import (
	"strings"
	"testing"

	"github.com/gradwire/gradwire/internal/version"
	"github.com/gradwire/gradwire/models/ops/internal/kernels"
)

// TestMachineNamesTheKernels: the vector instructions that version.Machine
// records in run summaries are the ones the GEMM kernels chose, since runs
// agree bit for bit only where they do.
func TestMachineNamesTheKernels(t *testing.T) {
	m := version.Machine()
	want := ""
	switch {
	case kernels.HasAVX512:
		want = "AVX-512"
	case kernels.HasAVX2:
		want = "AVX2"
	}
	chosen := ""
	if best := bestSgemmKernel(); best != nil {
		chosen = map[string]string{"avx512": "AVX-512", "avx2": "AVX2"}[best.name]
	}
	if chosen != want {
		t.Fatalf("the GEMM kernel in use is %q, the CPU flags say %q", chosen, want)
	}
	if want == "" {
		if strings.HasSuffix(m, ", AVX2") || strings.HasSuffix(m, ", AVX-512") {
			t.Fatalf("Machine() = %q names vector instructions the kernels do not use", m)
		}
		return
	}
	if !strings.HasSuffix(m, ", "+want) {
		t.Fatalf("Machine() = %q, want it to end with %q (the kernels in use)", m, want)
	}
}
