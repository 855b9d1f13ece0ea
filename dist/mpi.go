//go:build mpi && cgo

package dist

/*
#cgo pkg-config: ompi-c
#include <mpi.h>

// OpenMPI defines these handles as macros over its internal symbols, which
// cgo cannot reach: tiny functions expose them.
static MPI_Comm gw_world(void) { return MPI_COMM_WORLD; }
static MPI_Datatype gw_float(void) { return MPI_FLOAT; }
static MPI_Datatype gw_byte(void) { return MPI_BYTE; }
static MPI_Errhandler gw_errors_return(void) { return MPI_ERRORS_RETURN; }

// MPI_IN_PLACE is not a valid pointer ((void *)1), which Go must never hold:
// the in-place calls pass it on the C side.
static int gw_allreduce_sum_in_place(float *buf, int count) {
	return MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}
static int gw_allgather_in_place(void *buf, int bytes_each) {
	return MPI_Allgather(MPI_IN_PLACE, 0, MPI_BYTE, buf, bytes_each, MPI_BYTE, MPI_COMM_WORLD);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"unsafe"
)

// mpiMaxCount is the largest count passed to one MPI call (elements for
// AllReduce and Broadcast, bytes for the AllGather data): MPI counts and
// displacements are C ints, so longer buffers go in chunks. Tests lower it to
// exercise the chunking.
var mpiMaxCount = math.MaxInt32

// mpiInit guards MPI_Init_thread, which may run only once per process.
var mpiInit struct {
	sync.Mutex
	done bool
}

// NewMPI initialises MPI and returns this process's member of MPI_COMM_WORLD:
// Rank and Size are the process's MPI rank and the number of processes (1
// when started without mpirun). Call it once per process and Close it before
// exiting: a rank that exits without MPI_Finalize fails the job. Use it as
// the world of NewHierarchical to host several logical workers per process.
// It fails when the launcher (DetectLaunch) started another number of
// processes than the world has.
//
// MPI runs with MPI_THREAD_SERIALIZED: a mutex serialises the calls, since
// goroutines move between OS threads. Errors are returned, not fatal
// (MPI_ERRORS_RETURN). Members must pass equal lengths to AllReduce and
// Broadcast; MPI cannot check it.
func NewMPI() (Collective, error) {
	mpiInit.Lock()
	defer mpiInit.Unlock()
	if mpiInit.done {
		return nil, errors.New("dist: NewMPI called twice; MPI can be initialised once per process")
	}
	// Read before MPI_Init, which may set variables of its own.
	launch, err := DetectLaunch(os.Getenv)
	if err != nil {
		return nil, err
	}
	var provided C.int
	if rc := C.MPI_Init_thread(nil, nil, C.MPI_THREAD_SERIALIZED, &provided); rc != C.MPI_SUCCESS {
		return nil, mpiError("MPI_Init_thread", rc)
	}
	mpiInit.done = true
	w := &mpiWorld{}
	fail := func(err error) (Collective, error) {
		C.MPI_Finalize()
		return nil, err
	}
	if provided < C.MPI_THREAD_SERIALIZED {
		return fail(fmt.Errorf("dist: this MPI library provides thread level %d, gradwire needs MPI_THREAD_SERIALIZED", provided))
	}
	if rc := C.MPI_Comm_set_errhandler(C.gw_world(), C.gw_errors_return()); rc != C.MPI_SUCCESS {
		return fail(mpiError("MPI_Comm_set_errhandler", rc))
	}
	var rank, size C.int
	if rc := C.MPI_Comm_rank(C.gw_world(), &rank); rc != C.MPI_SUCCESS {
		return fail(mpiError("MPI_Comm_rank", rc))
	}
	if rc := C.MPI_Comm_size(C.gw_world(), &size); rc != C.MPI_SUCCESS {
		return fail(mpiError("MPI_Comm_size", rc))
	}
	w.rank, w.size = int(rank), int(size)
	if err := launch.CheckWorld(w.size); err != nil {
		return fail(err)
	}
	w.lens = make([]int64, w.size)
	w.counts = make([]C.int, w.size)
	w.displs = make([]C.int, w.size)
	w.out = make([][]byte, w.size)
	return w, nil
}

// mpiWorld is this process's member of MPI_COMM_WORLD.
type mpiWorld struct {
	mu         sync.Mutex // held across every MPI call (MPI_THREAD_SERIALIZED)
	rank, size int
	closed     bool

	// AllGather state, reused: lengths, MPI counts and displacements, the
	// received bytes and the result slices into them.
	lens           []int64
	counts, displs []C.int
	recv           []byte
	out            [][]byte
}

var (
	_ Collective = (*mpiWorld)(nil)
	_ Aborter    = (*mpiWorld)(nil)
)

func mpiError(fn string, rc C.int) error {
	var buf [C.MPI_MAX_ERROR_STRING]C.char
	var n C.int
	if C.MPI_Error_string(rc, &buf[0], &n) != C.MPI_SUCCESS {
		return fmt.Errorf("dist: %s failed with MPI error %d", fn, rc)
	}
	return fmt.Errorf("dist: %s: %s", fn, C.GoStringN(&buf[0], n))
}

func (w *mpiWorld) Rank() int { return w.rank }
func (w *mpiWorld) Size() int { return w.size }

// lock takes the MPI lock, failing once the world is closed.
func (w *mpiWorld) lock() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	return nil
}

// AllReduce sums buf over all processes in place (MPI_Allreduce with
// MPI_IN_PLACE).
func (w *mpiWorld) AllReduce(buf []float32) error {
	if err := w.lock(); err != nil {
		return err
	}
	defer w.mu.Unlock()
	for off := 0; off < len(buf); off += mpiMaxCount {
		n := min(mpiMaxCount, len(buf)-off)
		if rc := C.gw_allreduce_sum_in_place((*C.float)(&buf[off]), C.int(n)); rc != C.MPI_SUCCESS {
			return mpiError("MPI_Allreduce", rc)
		}
	}
	return nil
}

// AllGather exchanges the payload lengths (MPI_Allgather), then the bytes
// (MPI_Allgatherv) into one buffer holding all payloads in rank order. The
// results are slices of that buffer: valid until the next call, and not to be
// modified. The payload is copied; the caller may reuse it at once.
func (w *mpiWorld) AllGather(payload []byte) ([][]byte, error) {
	if err := w.lock(); err != nil {
		return nil, err
	}
	defer w.mu.Unlock()
	w.lens[w.rank] = int64(len(payload))
	if rc := C.gw_allgather_in_place(unsafe.Pointer(&w.lens[0]), 8); rc != C.MPI_SUCCESS {
		return nil, mpiError("MPI_Allgather", rc)
	}
	total, mine := 0, 0 // all bytes; where this rank's payload starts among them
	for r, l := range w.lens {
		if r == w.rank {
			mine = total
		}
		total += int(l)
	}
	if cap(w.recv) < total {
		w.recv = make([]byte, total)
	}
	w.recv = w.recv[:total]
	// Rank r's payload lies at [start_r, start_r+len_r) of the concatenation.
	// Each round moves one window of at most mpiMaxCount bytes of it, so that
	// counts and displacements (relative to the window) fit a C int.
	for lo := 0; lo < total; lo += mpiMaxCount {
		hi := min(lo+mpiMaxCount, total)
		start := 0
		for r, l := range w.lens {
			a, b := max(start, lo), min(start+int(l), hi)
			w.counts[r], w.displs[r] = 0, 0
			if a < b {
				w.counts[r], w.displs[r] = C.int(b-a), C.int(a-lo)
			}
			start += int(l)
		}
		var send unsafe.Pointer
		if n := w.counts[w.rank]; n > 0 {
			send = unsafe.Pointer(&payload[max(mine, lo)-mine])
		}
		rc := C.MPI_Allgatherv(send, w.counts[w.rank], C.gw_byte(),
			unsafe.Pointer(&w.recv[lo]), &w.counts[0], &w.displs[0], C.gw_byte(), C.gw_world())
		if rc != C.MPI_SUCCESS {
			return nil, mpiError("MPI_Allgatherv", rc)
		}
	}
	start := 0
	for r, l := range w.lens {
		end := start + int(l)
		w.out[r] = w.recv[start:end:end]
		start = end
	}
	return w.out, nil
}

// Broadcast copies root's buf into every process's buf (MPI_Bcast).
func (w *mpiWorld) Broadcast(buf []float32, root int) error {
	if root < 0 || root >= w.size {
		return fmt.Errorf("dist: Broadcast root %d out of range [0, %d)", root, w.size)
	}
	if err := w.lock(); err != nil {
		return err
	}
	defer w.mu.Unlock()
	for off := 0; off < len(buf); off += mpiMaxCount {
		n := min(mpiMaxCount, len(buf)-off)
		if rc := C.MPI_Bcast(unsafe.Pointer(&buf[off]), C.int(n), C.gw_float(), C.int(root), C.gw_world()); rc != C.MPI_SUCCESS {
			return mpiError("MPI_Bcast", rc)
		}
	}
	return nil
}

// Barrier returns once every process has called it (MPI_Barrier).
func (w *mpiWorld) Barrier() error {
	if err := w.lock(); err != nil {
		return err
	}
	defer w.mu.Unlock()
	if rc := C.MPI_Barrier(C.gw_world()); rc != C.MPI_SUCCESS {
		return mpiError("MPI_Barrier", rc)
	}
	return nil
}

// Abort prints err and ends the whole MPI job (MPI_Abort; it does not
// return): the other processes could not learn of the failure otherwise, and
// MPI_Finalize would wait for them forever. It skips the lock on purpose: a
// collective of this process may hold it while waiting for processes that
// wait for this one.
func (w *mpiWorld) Abort(err error) {
	fmt.Fprintf(os.Stderr, "dist: MPI rank %d aborts the job: %v\n", w.rank, err)
	C.MPI_Abort(C.gw_world(), 1)
}

// Close finalises MPI (MPI_Finalize, which waits for every process to reach
// it). Closing again does nothing; MPI cannot be initialised again.
func (w *mpiWorld) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	if rc := C.MPI_Finalize(); rc != C.MPI_SUCCESS {
		return mpiError("MPI_Finalize", rc)
	}
	return nil
}
