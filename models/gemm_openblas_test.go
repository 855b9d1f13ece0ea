//go:build openblas

package models

import "testing"

// TestForcedCoreType pins the rule by which the program re-executes itself
// with OPENBLAS_CORETYPE=SkylakeX: only on an AVX-512 CPU that OpenBLAS
// detected as a core without AVX-512 kernels, and never over the user's choice.
func TestForcedCoreType(t *testing.T) {
	haswell, empty := "Haswell", ""
	for _, c := range []struct {
		env      *string
		detected string
		avx512   bool
		want     string
	}{
		{nil, "Haswell", true, "SkylakeX"},
		{nil, "Zen", true, "SkylakeX"},
		{nil, "Haswell", false, ""},
		{nil, "SkylakeX", true, ""},
		{nil, "COOPERLAKE", true, ""},
		{nil, "SapphireRapids", true, ""},
		{&haswell, "Haswell", true, ""},
		{&empty, "Prescott", true, ""},
	} {
		env := "(unset)"
		if c.env != nil {
			env = *c.env
		}
		if got := forcedCoreType(c.env, c.detected, c.avx512); got != c.want {
			t.Errorf("OPENBLAS_CORETYPE %s, detected %s, AVX-512 %v: forced %q, expected %q", env, c.detected, c.avx512, got, c.want)
		}
	}
}
