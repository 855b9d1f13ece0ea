//go:build !openblas

package models

// BLAS names the matrix-multiply back-end this binary was built with: pure-Go
// gonum by default, OpenBLAS with the openblas build tag.
const BLAS = "gonum"

func useBLAS() {}

// BLASCoreType is the kernel set of the BLAS library, for run summaries: empty
// for pure-Go gonum, OpenBLAS's core type (such as SkylakeX) otherwise.
func BLASCoreType() string { return "" }
