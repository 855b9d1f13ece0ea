package models

import (
	"fmt"
	"reflect"
	"unsafe"

	G "gorgonia.org/gorgonia"
)

// Gorgonia's TapeMachine.RunAll locks its goroutine to the OS thread, starts
// a goroutine that executes the program (runall) and blocks until it is done.
// A locked goroutine that blocks makes the Go scheduler hand its P to another
// OS thread, and when the other core is busy (two replicas on two cores) the
// kernel can take milliseconds to run that thread: traces of 8 workers on 2
// replicas showed one core idle for about 1.8 ms after half of the RunAll
// calls, about 4 ms of a 9.6 ms LeNet-5 step. runall itself needs neither the
// locked thread (that is for CUDA contexts) nor its own goroutine, so a
// directTape calls it on the caller's goroutine.

// tapeRunall is gorgonia's (*tapeMachine).runall; the receiver is its first
// argument. It sends one value, on errc or on done, and returns.
//
//go:linkname tapeRunall gorgonia.org/gorgonia.(*tapeMachine).runall
func tapeRunall(m unsafe.Pointer, errc chan error, done chan struct{})

// directTape runs a tape machine's program on the calling goroutine. It is
// used only for machines built without dual values: RunAll's closure queue,
// which it does not run, is filled only for those.
type directTape struct {
	vm   G.VM
	m    unsafe.Pointer
	errc chan error
	done chan struct{}
	work interface{ DoWork() error }
}

// newDirectTape wraps vm, or returns nil when vm is not the tape machine the
// linkname was written for (then the caller uses RunAll). The linkname ties
// this to the pinned Gorgonia version (go.mod); TestDirectTape fails if a new
// version renames the type.
func newDirectTape(vm G.VM) *directTape {
	t := reflect.TypeOf(vm)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Name() != "tapeMachine" || t.Elem().PkgPath() != "gorgonia.org/gorgonia" {
		return nil
	}
	d := &directTape{vm: vm, m: reflect.ValueOf(vm).UnsafePointer(), errc: make(chan error, 1), done: make(chan struct{}, 1)}
	d.work, _ = vm.(interface{ DoWork() error })
	return d
}

// RunAll executes the program once, as vm.RunAll does.
func (d *directTape) RunAll() error {
	tapeRunall(d.m, d.errc, d.done)
	select {
	case err := <-d.errc:
		return err
	case <-d.done:
	default:
		return fmt.Errorf("models: the tape machine returned without a result")
	}
	if d.work != nil {
		return d.work.DoWork()
	}
	return nil
}
