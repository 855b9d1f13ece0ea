//go:build openblas

package models

// #cgo LDFLAGS: -lopenblas
import "C"

import (
	"gonum.org/v1/netlib/blas/netlib"
	G "gorgonia.org/gorgonia"
)

// BLAS names the matrix-multiply back-end this binary was built with.
const BLAS = "openblas"

// useBLAS routes Gorgonia's matrix products through OpenBLAS (cgo, libopenblas-dev).
func useBLAS() { G.Use(netlib.Implementation{}) }
