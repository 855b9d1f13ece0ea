package dist

import (
	"strings"
	"testing"
)

// fakeEnv is a fake environment for DetectLaunch.
func fakeEnv(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestDetectLaunch(t *testing.T) {
	for _, tc := range []struct {
		name     string
		getenv   func(string) string
		want     Launch
		parallel bool
	}{
		{"plain start", fakeEnv(), Launch{}, false},
		// What mpirun (OpenMPI 4.1) sets for rank 1 of 2.
		{"mpirun", fakeEnv("OMPI_COMM_WORLD_SIZE", "2", "OMPI_COMM_WORLD_RANK", "1", "PMIX_RANK", "1"),
			Launch{Size: 2, Rank: 1, From: "OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1"}, true},
		{"mpirun -np 1", fakeEnv("OMPI_COMM_WORLD_SIZE", "1", "OMPI_COMM_WORLD_RANK", "0", "PMIX_RANK", "0"),
			Launch{Size: 1, From: "OMPI_COMM_WORLD_SIZE=1 OMPI_COMM_WORLD_RANK=0"}, false},
		// mpirun -np 2 inside a 4-task Slurm step: mpirun's count wins.
		{"mpirun in srun", fakeEnv("OMPI_COMM_WORLD_SIZE", "2", "OMPI_COMM_WORLD_RANK", "0", "SLURM_STEP_NUM_TASKS", "4", "SLURM_PROCID", "3"),
			Launch{Size: 2, From: "OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0"}, true},
		{"hydra", fakeEnv("PMI_SIZE", "3", "PMI_RANK", "2"), Launch{Size: 3, Rank: 2, From: "PMI_SIZE=3 PMI_RANK=2"}, true},
		{"mvapich2", fakeEnv("MV2_COMM_WORLD_SIZE", "4", "MV2_COMM_WORLD_RANK", "0"), Launch{Size: 4, From: "MV2_COMM_WORLD_SIZE=4 MV2_COMM_WORLD_RANK=0"}, true},
		{"srun", fakeEnv("SLURM_STEP_NUM_TASKS", "4", "SLURM_NTASKS", "4", "SLURM_PROCID", "0"),
			Launch{Size: 4, From: "SLURM_STEP_NUM_TASKS=4 SLURM_PROCID=0"}, true},
		// sbatch's batch script: one process in a 4-task allocation.
		{"sbatch script", fakeEnv("SLURM_NTASKS", "4", "SLURM_PROCID", "0", "SLURM_JOB_ID", "7"), Launch{}, false},
		{"srun --mpi=pmix, rank 0", fakeEnv("PMIX_RANK", "0"), Launch{From: "PMIX_RANK=0"}, false},
		{"pmix, rank 2", fakeEnv("PMIX_RANK", "2"), Launch{Rank: 2, From: "PMIX_RANK=2"}, true},
	} {
		got, err := DetectLaunch(tc.getenv)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got != tc.want || got.Parallel() != tc.parallel {
			t.Errorf("%s: %+v (parallel %v), want %+v (parallel %v)", tc.name, got, got.Parallel(), tc.want, tc.parallel)
		}
	}
}

func TestDetectLaunchMalformed(t *testing.T) {
	for _, tc := range []struct {
		getenv func(string) string
		want   string
	}{
		{fakeEnv("OMPI_COMM_WORLD_SIZE", "two", "OMPI_COMM_WORLD_RANK", "0"), `OMPI_COMM_WORLD_SIZE="two" is not a positive number`},
		{fakeEnv("OMPI_COMM_WORLD_SIZE", "0", "OMPI_COMM_WORLD_RANK", "0"), `OMPI_COMM_WORLD_SIZE="0" is not a positive number`},
		{fakeEnv("OMPI_COMM_WORLD_SIZE", "2"), `OMPI_COMM_WORLD_RANK="" is not a rank in [0, 2)`},
		{fakeEnv("PMI_SIZE", "2", "PMI_RANK", "2"), `PMI_RANK="2" is not a rank in [0, 2)`},
		{fakeEnv("SLURM_STEP_NUM_TASKS", "2", "SLURM_PROCID", "-1"), `SLURM_PROCID="-1" is not a rank in [0, 2)`},
		{fakeEnv("PMIX_RANK", "x"), `PMIX_RANK="x" is not a rank`},
	} {
		_, err := DetectLaunch(tc.getenv)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one containing %s", err, tc.want)
		}
	}
}

func TestLaunchCheckWorld(t *testing.T) {
	for _, tc := range []struct {
		l    Launch
		size int
		want string // "" for no error
	}{
		{Launch{}, 1, ""},
		{Launch{}, 3, ""}, // a singleton may not know its launcher
		{Launch{Size: 4, From: "SLURM_STEP_NUM_TASKS=4 SLURM_PROCID=0"}, 4, ""},
		{Launch{Size: 4, From: "SLURM_STEP_NUM_TASKS=4 SLURM_PROCID=0"}, 1,
			"MPI world has 1 process(es) but the launcher set SLURM_STEP_NUM_TASKS=4 SLURM_PROCID=0"},
		{Launch{Size: 2, Rank: 1, From: "OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1"}, 3,
			"MPI world has 3 process(es) but the launcher set OMPI_COMM_WORLD_SIZE=2"},
		{Launch{Rank: 1, From: "PMIX_RANK=1"}, 2, ""},
		{Launch{Rank: 2, From: "PMIX_RANK=2"}, 1, "MPI world has 1 process(es) but the launcher set PMIX_RANK=2"},
	} {
		err := tc.l.CheckWorld(tc.size)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v, world of %d: %v, want %q", tc.l, tc.size, err, tc.want)
		}
	}
}
