// Package kernels holds the assembly micro-kernels of the float32 GEMM in
// models/ops (its driver, blocking and tests are there). They are a package
// of their own because Go assembles Plan 9 assembly only in packages without
// cgo, and models/ops links OpenBLAS through cgo in the openblas build.
package kernels
