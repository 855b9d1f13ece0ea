//go:build mpi && cgo

package dist

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gradwire/gradwire/dist/mpitest"
)

// The launcher tests (TestMPI...) re-run this test binary under mpirun; the
// worker tests (...Worker) do the MPI work there and skip anywhere else.
// failEnv selects the failure a worker simulates.
const (
	workerOK = "gradwire mpi worker ok"
	failEnv  = "GRADWIRE_MPI_FAIL"
)

func TestMPI(t *testing.T) {
	for _, np := range []int{2, 4} {
		out, err := mpitest.Run(t, np, "TestMPIWorker")
		if err != nil {
			t.Fatalf("mpirun -np %d: %v\n%s", np, err, out)
		}
		if got := strings.Count(out, workerOK); got != np {
			t.Fatalf("mpirun -np %d: %d of %d ranks finished the worker test:\n%s", np, got, np, out)
		}
	}
}

// mpiOps runs every operation with the lengths given on member m, checking
// the results against values every rank computes itself.
func mpiOps(m Collective, lens []int) error {
	n, r := m.Size(), m.Rank()
	for _, l := range lens {
		// Small integers: the sum is exact whatever the summation order.
		buf := make([]float32, l)
		for k := range buf {
			buf[k] = float32((r + 1) * (k%17 + 1))
		}
		if err := m.AllReduce(buf); err != nil {
			return err
		}
		for k, v := range buf {
			if want := float32(n * (n + 1) / 2 * (k%17 + 1)); v != want {
				return fmt.Errorf("AllReduce of %d floats: element %d is %v, want %v", l, k, v, want)
			}
		}
		for i := range 2 {
			all, err := m.AllGather(payload(r, i, l))
			if err != nil {
				return err
			}
			if len(all) != n {
				return fmt.Errorf("AllGather returned %d payloads, want %d", len(all), n)
			}
			for q, p := range all {
				if !bytes.Equal(p, payload(q, i, l)) {
					return fmt.Errorf("AllGather (l=%d, round %d): payload of rank %d has %d bytes, not the %d sent", l, i, q, len(p), len(payload(q, i, l)))
				}
			}
		}
		for root := range n {
			for k := range buf {
				buf[k] = float32(math.NaN())
				if r == root {
					buf[k] = float32(root*1000 + k%1000)
				}
			}
			if err := m.Broadcast(buf, root); err != nil {
				return err
			}
			for k, v := range buf {
				if want := float32(root*1000 + k%1000); v != want {
					return fmt.Errorf("Broadcast of %d floats from %d: element %d is %v, want %v", l, root, k, v, want)
				}
			}
		}
		if err := m.Barrier(); err != nil {
			return err
		}
	}
	return nil
}

func TestMPIWorker(t *testing.T) {
	if !mpitest.Worker() || os.Getenv(failEnv) != "" {
		t.Skip("run by TestMPI under mpirun")
	}
	world, err := NewMPI()
	if err != nil {
		t.Fatal(err)
	}
	hier, err := NewHierarchical(world, 2)
	if err != nil {
		t.Fatal(err)
	}
	// A failing rank ends the job at once: its peers would wait for it forever.
	run := func(what string, members []Collective, lens []int) {
		for r, err := range each(t, members, func(m Collective) error { return mpiOps(m, lens) }) {
			if err != nil {
				world.(Aborter).Abort(fmt.Errorf("%s, member %d: %w", what, r, err))
			}
		}
	}
	all := []int{0, 1, 7, 1000, 100003}
	run("MPI", []Collective{world}, all)
	run("hierarchical", hier, all)
	// Chunked calls: tiny chunks, then chunks that split payloads unevenly.
	mpiMaxCount = 3
	run("MPI, chunks of 3", []Collective{world}, []int{0, 1, 7, 1000})
	run("hierarchical, chunks of 3", hier, []int{0, 1, 7, 1000})
	mpiMaxCount = 4099
	run("MPI, chunks of 4099", []Collective{world}, []int{100003})
	run("hierarchical, chunks of 4099", hier, []int{100003})
	mpiMaxCount = math.MaxInt32

	rank, size := world.Rank(), world.Size()
	if err := world.Close(); err != nil {
		t.Fatal(err)
	}
	if err := world.Barrier(); !errors.Is(err, ErrClosed) {
		t.Errorf("Barrier after Close: %v, want ErrClosed", err)
	}
	fmt.Printf("%s: rank %d of %d\n", workerOK, rank, size)
}

// TestMPIDyingRank checks that a rank dying before a collective ends the job
// quickly, and that mpirun names it.
func TestMPIDyingRank(t *testing.T) {
	start := time.Now()
	out, err := mpitest.Run(t, 3, "TestMPIDyingWorker", failEnv+"=die")
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("mpirun took %v to give up after rank 1 died:\n%s", took, out)
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("mpirun: %v, want exit status 3 (the dead rank's):\n%s", err, out)
	}
	// mpirun prints:
	//   mpirun detected that one or more processes exited with non-zero status, [...]
	//     Process name: [[4163,1],1]
	//     Exit code:    3
	// where [[job,1],1] is rank 1 of the application.
	for _, want := range []string{"exited with non-zero status", "Process name: [[", ",1],1]", "Exit code:    3"} {
		if !strings.Contains(out, want) {
			t.Fatalf("mpirun's output does not contain %q:\n%s", want, out)
		}
	}
}

func TestMPIDyingWorker(t *testing.T) {
	if !mpitest.Worker() || os.Getenv(failEnv) != "die" {
		t.Skip("run by TestMPIDyingRank under mpirun")
	}
	world, err := NewMPI()
	if err != nil {
		t.Fatal(err)
	}
	if world.Rank() == 1 {
		os.Exit(3) // without MPI_Finalize, as a crash would
	}
	err = world.AllReduce(make([]float32, 10))
	t.Errorf("AllReduce returned (error %v) although rank 1 died", err)
}

// TestMPIAbort checks that a logical worker's Abort in a hierarchical group
// ends the whole job, naming the worker and the cause.
func TestMPIAbort(t *testing.T) {
	start := time.Now()
	out, err := mpitest.Run(t, 2, "TestMPIAbortWorker", failEnv+"=abort")
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("mpirun took %v to give up after an abort:\n%s", took, out)
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("mpirun: %v, want a non-zero exit:\n%s", err, out)
	}
	// mpirun's own "MPI_ABORT was invoked on rank 1" notice is relayed from
	// the dying rank and sometimes lost; Abort's line is printed first.
	if want := "dist: MPI rank 1 aborts the job: dist: rank 3 failed: replica failed"; !strings.Contains(out, want) {
		t.Fatalf("mpirun's output does not contain %q:\n%s", want, out)
	}
}

func TestMPIAbortWorker(t *testing.T) {
	if !mpitest.Worker() || os.Getenv(failEnv) != "abort" {
		t.Skip("run by TestMPIAbort under mpirun")
	}
	world, err := NewMPI()
	if err != nil {
		t.Fatal(err)
	}
	hier, err := NewHierarchical(world, 2)
	if err != nil {
		t.Fatal(err)
	}
	each(t, hier, func(m Collective) error {
		if m.Rank() == 3 {
			time.Sleep(100 * time.Millisecond) // the others wait in AllReduce
			m.(Aborter).Abort(errors.New("replica failed"))
			return nil
		}
		return m.AllReduce(make([]float32, 10))
	})
	t.Error("still running after rank 3 aborted")
}

// TestMPISingleton runs NewMPI without mpirun: a world of one process. In a
// Slurm step of 2 tasks, as under srun without PMI support, NewMPI must fail
// loudly.
func TestMPISingleton(t *testing.T) {
	if mpitest.Worker() {
		t.Skip("not under mpirun")
	}
	for _, tc := range []struct{ ntasks, want string }{
		{"", workerOK},
		{"2", "MPI world has 1 process(es) but the launcher set SLURM_STEP_NUM_TASKS=2 SLURM_PROCID=0"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestMPISingletonWorker$", "-test.count=1")
		cmd.Env = append(os.Environ(), failEnv+"=singleton", "SLURM_STEP_NUM_TASKS="+tc.ntasks, "SLURM_PROCID=0")
		out, err := cmd.CombinedOutput()
		if (err == nil) != (tc.ntasks == "") || !strings.Contains(string(out), tc.want) {
			t.Fatalf("singleton with SLURM_STEP_NUM_TASKS=%q: %v, want output with %q:\n%s", tc.ntasks, err, tc.want, out)
		}
	}
}

func TestMPISingletonWorker(t *testing.T) {
	if os.Getenv(failEnv) != "singleton" {
		t.Skip("run by TestMPISingleton")
	}
	world, err := NewMPI()
	if err != nil {
		t.Fatal(err)
	}
	if world.Rank() != 0 || world.Size() != 1 {
		t.Errorf("singleton has rank %d of %d", world.Rank(), world.Size())
	}
	if err := mpiOps(world, []int{0, 7}); err != nil {
		t.Error(err)
	}
	if _, err := NewMPI(); err == nil {
		t.Error("second NewMPI succeeded")
	}
	if err := world.Close(); err != nil {
		t.Fatal(err)
	}
	if err := world.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	fmt.Println(workerOK)
}
