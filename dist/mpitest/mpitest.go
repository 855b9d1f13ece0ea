// Package mpitest runs tests across MPI processes: a launcher test re-runs its
// own test binary under mpirun, naming a worker test that skips unless it was
// started by mpirun (Worker). It needs OpenMPI's mpirun at run time only, so
// it builds everywhere.
package mpitest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// RequireEnv names the variable that makes a missing mpirun a test failure
// instead of a skip; CI sets it to 1.
const RequireEnv = "GRADWIRE_REQUIRE_MPI"

// Timeout bounds one mpirun (less when the test's own deadline is nearer).
const Timeout = 2 * time.Minute

// Worker reports whether this process is a rank started by mpirun.
func Worker() bool { return os.Getenv("OMPI_COMM_WORLD_SIZE") != "" }

// Run runs the test testName of the running test binary on np ranks under
// mpirun and returns mpirun's combined output; err is mpirun's failure (an
// *exec.ExitError for a non-zero exit) or the timeout. env adds NAME=value
// variables for the ranks. Run skips t when mpirun is missing, unless
// RequireEnv is 1.
func Run(t *testing.T, np int, testName string, env ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := Job{NP: np, Test: testName, Env: env}.Run(t, &out, &out)
	return out.String(), err
}

// Job is one mpirun launch: of a program, or of a test of the running test
// binary. Ranks may outnumber cores (--oversubscribe), run unbound, may run as
// root, and avoid shared-memory single copy, which fails in containers.
type Job struct {
	NP      int
	Argv    []string      // program and arguments; unused when Test is set
	Test    string        // the test of the running test binary to run
	Env     []string      // NAME=value variables added for the ranks
	Timeout time.Duration // 0: Timeout; less when the test's own deadline is nearer
}

// Run runs the job, writing the ranks' stdout and stderr to the writers
// (which may be one), and returns mpirun's failure (an *exec.ExitError for a
// non-zero exit) or the timeout. It skips t when mpirun is missing, unless
// RequireEnv is 1.
func (j Job) Run(t *testing.T, stdout, stderr io.Writer) error {
	t.Helper()
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("mpirun not found and %s=1: install openmpi-bin", RequireEnv)
		}
		t.Skipf("mpirun not found (set %s=1 to fail instead)", RequireEnv)
	}
	timeout := Timeout
	if j.Timeout > 0 {
		timeout = j.Timeout
	}
	if dl, ok := t.Deadline(); ok {
		timeout = min(timeout, time.Until(dl)-5*time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	args := []string{"-np", strconv.Itoa(j.NP), "--oversubscribe", "--bind-to", "none"}
	if os.Geteuid() == 0 {
		args = append(args, "--allow-run-as-root")
	}
	argv := j.Argv
	if j.Test != "" {
		argv = []string{os.Args[0], "-test.run", "^" + j.Test + "$", "-test.count=1", fmt.Sprintf("-test.timeout=%v", timeout)}
	}
	cmd := exec.CommandContext(ctx, mpirun, append(args, argv...)...)
	cmd.Env = append(os.Environ(), "OMPI_MCA_btl_vader_single_copy_mechanism=none")
	cmd.Env = append(cmd.Env, j.Env...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// SIGTERM lets mpirun stop its ranks; SIGKILL would orphan them.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("mpirun -np %d %v: timed out after %v: %w", j.NP, argv, timeout, err)
	}
	return err
}
