//go:build openblas

package models

/*
#cgo LDFLAGS: -lopenblas
#include <stdlib.h>
#include <strings.h>
#include <unistd.h>

char *openblas_get_corename(void);

// gw_avx512 reports whether the CPU and the OS support the AVX-512 subsets
// that OpenBLAS's SkylakeX kernels use (libgcc checks the OS state as well).
static int gw_avx512(void) {
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
		__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
		__builtin_cpu_supports("avx512vl");
}

// gw_avx512_core reports whether OpenBLAS runs kernels written for AVX-512.
static int gw_avx512_core(const char *core) {
	return strcasecmp(core, "SkylakeX") == 0 || strcasecmp(core, "Cooperlake") == 0 ||
		strcasecmp(core, "SapphireRapids") == 0;
}

// gw_core_to_force is the OPENBLAS_CORETYPE to run with, or NULL to keep
// OpenBLAS's choice: SkylakeX on an AVX-512 CPU that OpenBLAS did not
// recognise as one (0.3.21 takes newer Xeons for Haswell and runs its AVX2
// kernels, at half the speed), unless the user set OPENBLAS_CORETYPE.
static const char *gw_core_to_force(const char *env, const char *detected, int avx512) {
	if (env != NULL || !avx512 || gw_avx512_core(detected)) {
		return NULL;
	}
	return "SkylakeX";
}

// OpenBLAS picks its kernels in its own constructor, which runs before this
// one (a library initialises before the program that links it), so a core
// type can only take effect in a new process image: this constructor, run
// before the Go runtime starts, executes the program again with
// OPENBLAS_CORETYPE set. The new image finds the variable set and goes on.
__attribute__((constructor))
static void gw_openblas_coretype(int argc, char **argv, char **envp) {
	const char *core = gw_core_to_force(getenv("OPENBLAS_CORETYPE"), openblas_get_corename(), gw_avx512());
	if (core == NULL || argv == NULL || setenv("OPENBLAS_CORETYPE", core, 1) != 0) {
		return;
	}
	execv("/proc/self/exe", argv);
	unsetenv("OPENBLAS_CORETYPE"); // no exec: run on with OpenBLAS's choice
}
*/
import "C"

import (
	"unsafe"

	G "gorgonia.org/gorgonia"

	"github.com/gradwire/gradwire/models/ops"
)

// BLAS names the matrix-multiply back-end this binary was built with.
const BLAS = "openblas"

// useBLAS routes Gorgonia's matrix products through OpenBLAS (cgo,
// libopenblas-dev), float32 products through the assembly GEMM where the CPU
// has a kernel for it (ops.OpenBLAS).
func useBLAS() { G.Use(ops.OpenBLAS{}) }

// BLASCoreType is the kernel set OpenBLAS runs (OPENBLAS_CORETYPE names, such
// as SkylakeX or Haswell), for run summaries.
func BLASCoreType() string { return C.GoString(C.openblas_get_corename()) }

// forcedCoreType exposes the core-type rule of the constructor above to tests.
func forcedCoreType(env *string, detected string, avx512 bool) string {
	var e *C.char
	if env != nil {
		e = C.CString(*env)
		defer C.free(unsafe.Pointer(e))
	}
	d := C.CString(detected)
	defer C.free(unsafe.Pointer(d))
	a := C.int(0)
	if avx512 {
		a = 1
	}
	if r := C.gw_core_to_force(e, d, a); r != nil {
		return C.GoString(r)
	}
	return ""
}
