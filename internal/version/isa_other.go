//go:build !amd64

package version

// vectorISA is empty: the assembly kernels are amd64's only.
func vectorISA() string { return "" }
