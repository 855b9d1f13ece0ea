//go:build !(mpi && cgo)

package dist

import "errors"

// NewMPI would return this process's member of the MPI world; this build has
// no MPI (it needs the mpi build tag and cgo).
func NewMPI() (Collective, error) {
	return nil, errors.New(`dist.backend "mpi": this gradwire was built without MPI; rebuild with -tags mpi (needs OpenMPI: apt-get install libopenmpi-dev openmpi-bin)`)
}
