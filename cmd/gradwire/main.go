// Command gradwire trains models with data-parallel workers that exchange
// compressed gradients. See README.md.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go onInterrupt(sigs, cancel, watchesContext.Load, os.Exit, os.Stderr)
	err := newRootCmd().ExecuteContext(ctx)
	signal.Stop(sigs)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gradwire:", err)
		os.Exit(1)
	}
}

// watchesContext is true while the running command stops by itself, after
// writing what it must (a checkpoint, a sweep's table), once its context is
// cancelled: train, sweep, data fetch, bench --engine (the commands marked
// watchesContextAnnotation).
var watchesContext atomic.Bool

// watchesContextAnnotation marks a command that watches its context.
const watchesContextAnnotation = "watches-context"

// onInterrupt handles SIGINT and SIGTERM. For a command that watches its
// context the first signal cancels it and a second one exits at once; any
// other command (measure, influence, report, ...) exits at the first, since
// nothing else would stop it. Every file gradwire writes is written whole and
// renamed into place, so an exit leaves none half-written.
func onInterrupt(sigs <-chan os.Signal, cancel func(), watching func() bool, exit func(int), stderr io.Writer) {
	s := <-sigs
	if watching() {
		cancel()
		s = <-sigs
	}
	fmt.Fprintf(stderr, "gradwire: %v: stopped\n", s)
	exit(130)
}
