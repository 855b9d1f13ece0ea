//go:build !openblas

package models

// BLAS names the matrix-multiply back-end this binary was built with: pure-Go
// gonum by default, OpenBLAS with the openblas build tag.
const BLAS = "gonum"

func useBLAS() {}
