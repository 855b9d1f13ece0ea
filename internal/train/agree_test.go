package train

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gradwire/gradwire/dist"
)

// recorder wraps one member and records the length of each AllGather payload
// it sends; corrupt, when set, replaces the payload of the call with that
// index (0-based) by garbage.
type recorder struct {
	dist.Collective
	sent    []int
	corrupt int
}

func (r *recorder) AllGather(p []byte) ([][]byte, error) {
	if len(r.sent) == r.corrupt {
		p = []byte("{not json")
	}
	r.sent = append(r.sent, len(p))
	return r.Collective.AllGather(p)
}

// agreeAll runs agreeAcrossRanks on an in-process group, rank r passing
// fps[r] from its own goroutine, and returns each rank's error and recorder.
// corruptRank's second payload is replaced by garbage (-1: none).
func agreeAll(t *testing.T, fps []map[string]string, corruptRank int) ([]error, []*recorder) {
	t.Helper()
	members, err := dist.NewLocal(len(fps))
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]error, len(fps))
	recs := make([]*recorder, len(fps))
	var wg sync.WaitGroup
	for r, m := range members {
		recs[r] = &recorder{Collective: m, corrupt: -1}
		if r == corruptRank {
			recs[r].corrupt = 1
		}
		wg.Go(func() { errs[r] = agreeAcrossRanks(recs[r], fps[r]) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("agreeAcrossRanks did not return on every rank: a rank waits for the others")
	}
	return errs, recs
}

// baseFingerprint is a run's fingerprint as setupWorkers builds it, cut down.
func baseFingerprint() map[string]string {
	return map[string]string{
		"model.name": "lenet5", "data.batch_size": "64", "dist.check_every": "3",
		"compress.name": "none", "model.hidden": "[300 100]", "build.version": "v0.1.0-dev",
		"data.digest": "sha256:6f1ed002ab5595859014ebf0951522d9",
	}
}

func fingerprints(n int, edit func(r int, fp map[string]string)) []map[string]string {
	fps := make([]map[string]string, n)
	for r := range fps {
		fps[r] = baseFingerprint()
		edit(r, fps[r])
	}
	return fps
}

// TestAgreeEqual: equal fingerprints pass after one all-gather of a 32-byte
// digest on every rank.
func TestAgreeEqual(t *testing.T) {
	for _, n := range []int{1, 2, 5} {
		errs, recs := agreeAll(t, fingerprints(n, func(int, map[string]string) {}), -1)
		for r, err := range errs {
			if err != nil {
				t.Errorf("%d ranks, rank %d: %v", n, r, err)
			}
			if got := fmt.Sprint(recs[r].sent); got != "[32]" {
				t.Errorf("%d ranks, rank %d sent all-gathers of %s bytes, want [32] (the digest only)", n, r, got)
			}
		}
	}
}

// sameErrorEverywhere checks that every rank returned an error and that all
// are the same, and returns it.
func sameErrorEverywhere(t *testing.T, errs []error) string {
	t.Helper()
	for r, err := range errs {
		if err == nil {
			t.Fatalf("rank %d passed the agreement; every rank must fail", r)
		}
		if err.Error() != errs[0].Error() {
			t.Fatalf("rank %d: %v\nrank 0: %v\nevery rank must return the same error", r, err, errs[0])
		}
	}
	return errs[0].Error()
}

const agreePrefix = "ranks disagree on the run (every rank needs the same config, data and gradwire build): "

func TestAgreeTwoRanksDiffer(t *testing.T) {
	for _, tc := range []struct{ key, v1, want string }{
		{"model.name", "mlp", "model.name: lenet5 on rank 0, mlp on rank 1"},
		{"data.batch_size", "32", "data.batch_size: 64 on rank 0, 32 on rank 1"},
		{"dist.check_every", "5", "dist.check_every: 3 on rank 0, 5 on rank 1"},
		{"compress.name", "topk", "compress.name: none on rank 0, topk on rank 1"},
		{"data.digest", "sha256:00", "data.digest: sha256:6f1ed002ab5595859014ebf0951522d9 on rank 0, sha256:00 on rank 1"},
		{"model.hidden", "[300 10]", `model.hidden: "[300 100]" on rank 0, "[300 10]" on rank 1`},
		{"build.version", "", `build.version: v0.1.0-dev on rank 0, "" on rank 1`},
	} {
		fps := fingerprints(2, func(r int, fp map[string]string) {
			if r == 1 {
				fp[tc.key] = tc.v1
			}
		})
		errs, recs := agreeAll(t, fps, -1)
		if got := sameErrorEverywhere(t, errs); got != agreePrefix+tc.want {
			t.Errorf("%s differs: error\n%s\nwant\n%s", tc.key, got, agreePrefix+tc.want)
		}
		// The digest, then the whole fingerprint.
		for r, rec := range recs {
			if len(rec.sent) != 2 || rec.sent[0] != 32 || rec.sent[1] < 100 {
				t.Errorf("%s differs: rank %d sent all-gathers of %v bytes, want the 32-byte digest, then its fingerprint", tc.key, r, rec.sent)
			}
		}
	}
}

// TestAgreeManyRanks: values grouped by rank, runs of ranks shortened, keys
// in order, a key only some ranks have.
func TestAgreeManyRanks(t *testing.T) {
	fps := fingerprints(6, func(r int, fp map[string]string) {
		switch r {
		case 2:
			fp["dist.check_every"] = "5"
		case 4:
			fp["dist.check_every"] = "7"
			fp["model.name"] = "mlp"
		case 5:
			delete(fp, "data.digest")
		}
	})
	errs, _ := agreeAll(t, fps, -1)
	want := agreePrefix + "data.digest: sha256:6f1ed002ab5595859014ebf0951522d9 on ranks 0-4, (not set) on rank 5; " +
		"dist.check_every: 3 on ranks 0-1,3,5, 5 on rank 2, 7 on rank 4; model.name: lenet5 on ranks 0-3,5, mlp on rank 4"
	if got := sameErrorEverywhere(t, errs); got != want {
		t.Errorf("error\n%s\nwant\n%s", got, want)
	}
}

// TestAgreeUnreadable: a rank whose fingerprint cannot be decoded is named on
// every rank.
func TestAgreeUnreadable(t *testing.T) {
	fps := fingerprints(3, func(r int, fp map[string]string) {
		if r == 2 {
			fp["model.name"] = "mlp"
		}
	})
	errs, _ := agreeAll(t, fps, 1)
	got := sameErrorEverywhere(t, errs)
	if !strings.HasPrefix(got, "ranks disagree on the run: rank 1 sent an unreadable description of its run (9 bytes: ") {
		t.Errorf("error %q does not name rank 1's unreadable payload of 9 bytes", got)
	}
}

func TestAgreeMessageLimits(t *testing.T) {
	// 15 differing keys: 12 named, the rest counted.
	fps := []map[string]string{{}, {}}
	for k := range 15 {
		fps[1][fmt.Sprintf("k%02d", k)] = "x"
	}
	err := disagreement(fps)
	if err == nil || !strings.HasSuffix(err.Error(), "k11: (not set) on rank 0, x on rank 1; and 3 more keys") ||
		strings.Contains(err.Error(), "k12:") {
		t.Errorf("15 differing keys: %v", err)
	}
	// 6 values of one key: 4 listed.
	fps = make([]map[string]string, 6)
	for r := range fps {
		fps[r] = map[string]string{"seed": fmt.Sprint(r)}
	}
	want := agreePrefix + "seed: 0 on rank 0, 1 on rank 1, 2 on rank 2, 3 on rank 3, 2 more values"
	if err := disagreement(fps); err == nil || err.Error() != want {
		t.Errorf("6 values: %v, want %s", err, want)
	}
	if err := disagreement([]map[string]string{{"a": "1"}, {"a": "1"}}); err != nil {
		t.Errorf("equal fingerprints: %v", err)
	}
}

func TestRankList(t *testing.T) {
	for _, tc := range []struct {
		ranks []int
		want  string
	}{
		{[]int{3}, "rank 3"},
		{[]int{0, 1}, "ranks 0-1"},
		{[]int{0, 2}, "ranks 0,2"},
		{[]int{0, 1, 2, 5, 7, 8}, "ranks 0-2,5,7-8"},
	} {
		if got := rankList(tc.ranks); got != tc.want {
			t.Errorf("rankList(%v) = %q, want %q", tc.ranks, got, tc.want)
		}
	}
}

func TestCheckLocalLaunch(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, tc := range []struct {
		name   string
		getenv func(string) string
		want   string // "" for no error
	}{
		{"plain start", env(), ""},
		{"mpirun -np 1", env("OMPI_COMM_WORLD_SIZE", "1", "OMPI_COMM_WORLD_RANK", "0"), ""},
		{"sbatch script", env("SLURM_NTASKS", "4", "SLURM_PROCID", "0"), ""},
		{"mpirun -np 2, rank 0", env("OMPI_COMM_WORLD_SIZE", "2", "OMPI_COMM_WORLD_RANK", "0", "PMIX_RANK", "0"),
			"dist.backend: local trains in one process, but a launcher started this one as rank 0 of 2 " +
				"(OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0), so every rank would train alone into the same run directory: " +
				"add --set dist.backend=mpi (with gradwire built with -tags mpi) to train as one job, " +
				"or start a single process without the launcher"},
		{"srun -n 4, rank 3", env("SLURM_STEP_NUM_TASKS", "4", "SLURM_PROCID", "3"),
			"as rank 3 of 4 (SLURM_STEP_NUM_TASKS=4 SLURM_PROCID=3)"},
		{"pmix, rank 1", env("PMIX_RANK", "1"), "as rank 1 (PMIX_RANK=1)"},
		{"malformed", env("PMI_SIZE", "x"), `dist.backend: local: dist: launcher variable PMI_SIZE="x" is not a positive number`},
	} {
		err := checkLocalLaunch(tc.getenv)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestLocalBackendUnderLauncher: Run with the local backend refuses to start
// in a process that mpirun started as one of two, before writing anything.
func TestLocalBackendUnderLauncher(t *testing.T) {
	cfg := smallConfig(t, "mlp")
	t.Setenv("OMPI_COMM_WORLD_SIZE", "2")
	t.Setenv("OMPI_COMM_WORLD_RANK", "1")
	out := filepath.Join(t.TempDir(), "run")
	_, err := Run(context.Background(), cfg, Options{OutDir: out})
	if err == nil || !strings.Contains(err.Error(), "add --set dist.backend=mpi") {
		t.Fatalf("local backend as rank 1 of 2: %v, want the launcher error", err)
	}
	if _, serr := os.Stat(out); !os.IsNotExist(serr) {
		t.Errorf("the run directory was created (%v)", serr)
	}
}
