package dist

import (
	"fmt"
	"strconv"
)

// Launch is what a parallel launcher told this process through its
// environment: how many processes it started together and which one this is.
type Launch struct {
	Size int    // processes started together; 0 when no launcher said (a plain start, or PMIx without a size)
	Rank int    // this process's index among them
	From string // the variables read, e.g. "OMPI_COMM_WORLD_SIZE=2", for messages
}

// launchers lists the launchers' variables, most specific first: mpirun may
// run inside a Slurm step, and srun --mpi=pmix sets PMIX_RANK too.
//   - OpenMPI's mpirun (4.x; 5.x through PRRTE keeps these names).
//   - MPICH's and Intel MPI's Hydra, and srun --mpi=pmi2 (PMI-1/PMI-2).
//   - MVAPICH2's mpirun_rsh.
//   - srun: SLURM_STEP_NUM_TASKS is set for a job step only. SLURM_NTASKS is
//     not used: sbatch sets it for the batch script too, which runs once.
var launchers = []struct{ size, rank string }{
	{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"},
	{"PMI_SIZE", "PMI_RANK"},
	{"MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_RANK"},
	{"SLURM_STEP_NUM_TASKS", "SLURM_PROCID"},
}

// DetectLaunch reads the launcher's variables through getenv (os.Getenv, or
// a map in tests). Without any it returns Size 0. PMIx launchers announce
// the rank only (PMIX_RANK): Size is then 0 and Rank the rank. A variable
// that is set but not a valid number is an error naming it.
func DetectLaunch(getenv func(string) string) (Launch, error) {
	for _, l := range launchers {
		sv := getenv(l.size)
		if sv == "" {
			continue
		}
		size, err := strconv.Atoi(sv)
		if err != nil || size < 1 {
			return Launch{}, fmt.Errorf("dist: launcher variable %s=%q is not a positive number", l.size, sv)
		}
		rv := getenv(l.rank)
		rank, err := strconv.Atoi(rv)
		if err != nil || rank < 0 || rank >= size {
			return Launch{}, fmt.Errorf("dist: launcher variable %s=%q is not a rank in [0, %d) (%s=%d)", l.rank, rv, size, l.size, size)
		}
		return Launch{Size: size, Rank: rank, From: fmt.Sprintf("%s=%d %s=%d", l.size, size, l.rank, rank)}, nil
	}
	if rv := getenv("PMIX_RANK"); rv != "" {
		rank, err := strconv.Atoi(rv)
		if err != nil || rank < 0 {
			return Launch{}, fmt.Errorf("dist: launcher variable PMIX_RANK=%q is not a rank", rv)
		}
		return Launch{Rank: rank, From: "PMIX_RANK=" + rv}, nil
	}
	return Launch{}, nil
}

// Parallel reports whether the launcher started more than this one process.
func (l Launch) Parallel() bool { return l.Size > 1 || l.Rank > 0 }

// CheckWorld returns an error when the MPI world has another number of
// processes than the launcher started. srun without PMI support, for one,
// starts every task as an MPI singleton of size 1, which would otherwise
// train several independent models without a word.
func (l Launch) CheckWorld(size int) error {
	if l.Size > 0 && l.Size != size || l.Size == 0 && l.Rank >= size {
		return fmt.Errorf("dist: MPI world has %d process(es) but the launcher set %s: the processes did not join one MPI job "+
			"(under Slurm launch with srun --mpi=pmix, or mpirun inside the allocation)", size, l.From)
	}
	return nil
}
