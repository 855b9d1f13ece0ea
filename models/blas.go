//go:build !openblas

package models

import (
	G "gorgonia.org/gorgonia"

	"github.com/gradwire/gradwire/models/ops"
)

// BLAS names the matrix-multiply back-end this binary was built with: pure-Go
// gonum by default (its float32 GEMM replaced by the assembly kernels of
// models/ops where the CPU has AVX2 or AVX-512), OpenBLAS with the openblas
// build tag.
const BLAS = "gonum"

// useBLAS routes Gorgonia's matrix products through ops.BLAS: gonum, with the
// float32 GEMM the fast ops use.
func useBLAS() { G.Use(ops.BLAS{}) }

// BLASCoreType is the kernel set of the BLAS library, for run summaries: empty
// for pure-Go gonum, OpenBLAS's core type (such as SkylakeX) otherwise.
func BLASCoreType() string { return "" }
