package models

import "testing"

func TestBLASCoreType(t *testing.T) {
	core := BLASCoreType()
	t.Logf("BLAS %s, core type %q", BLAS, core)
	if (BLAS == "gonum") != (core == "") {
		t.Errorf("BLAS %s: core type %q", BLAS, core)
	}
}
