package main

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// onInterrupt: a command that watches its context is cancelled by the first
// signal and ended by the second; any other command is ended by the first.
func TestOnInterrupt(t *testing.T) {
	for _, watching := range []bool{false, true} {
		sigs := make(chan os.Signal, 2)
		cancelled := make(chan struct{})
		exited := make(chan int, 1)
		var stderr bytes.Buffer
		go onInterrupt(sigs, func() { close(cancelled) }, func() bool { return watching },
			func(code int) { exited <- code }, &stderr)
		sigs <- os.Interrupt
		if watching {
			select {
			case <-cancelled:
			case <-time.After(5 * time.Second):
				t.Fatal("watching: the first signal did not cancel the context")
			}
			select {
			case code := <-exited:
				t.Fatalf("watching: exited (%d) at the first signal", code)
			case <-time.After(50 * time.Millisecond):
			}
			sigs <- syscall.SIGTERM
		}
		select {
		case code := <-exited:
			if code != 130 {
				t.Errorf("watching %v: exit code %d, want 130", watching, code)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("watching %v: no exit after the last signal", watching)
		}
		if !watching {
			select {
			case <-cancelled:
				t.Error("not watching: the context was cancelled instead of exiting")
			default:
			}
		}
		if !strings.Contains(stderr.String(), "stopped") {
			t.Errorf("watching %v: stderr %q does not say the process stopped", watching, stderr.String())
		}
	}
}

// The commands that stop by themselves on a cancelled context are marked;
// the others (which would otherwise swallow Ctrl-C) are not.
func TestWatchesContextAnnotations(t *testing.T) {
	want := map[string]bool{"gradwire train": true, "gradwire sweep": true, "gradwire data fetch": true}
	root := newRootCmd()
	for _, c := range allCommands(root) {
		got := c.Annotations[watchesContextAnnotation] == "true"
		if got != want[c.CommandPath()] {
			t.Errorf("%s: watches its context %v, want %v", c.CommandPath(), got, want[c.CommandPath()])
		}
	}
}

// allCommands lists c and every command under it.
func allCommands(c *cobra.Command) []*cobra.Command {
	all := []*cobra.Command{c}
	for _, sub := range c.Commands() {
		all = append(all, allCommands(sub)...)
	}
	return all
}

// A command that does not watch its context ends at SIGINT: bench (without
// --engine) timing ResNet-20 for far longer than the test waits.
func TestInterruptEndsUnwatchedCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the command in a child process")
	}
	if os.Getenv("GRADWIRE_TEST_RUN_MAIN") == "1" {
		os.Args = append([]string{"gradwire"}, strings.Fields(os.Getenv("GRADWIRE_TEST_ARGS"))...)
		main()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestInterruptEndsUnwatchedCommand$")
	cmd.Env = append(os.Environ(), "GRADWIRE_TEST_RUN_MAIN=1",
		"GRADWIRE_TEST_ARGS=bench --model resnet20 --batch 64 --steps 100000 --warmup 1 --trials 1")
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Signal only once the child prints its first progress line: main's
	// handler is installed by then, whatever the machine's load. The
	// reader owns the output until the pipe closes.
	started, done := make(chan struct{}), make(chan error, 1)
	var stderr strings.Builder
	var once sync.Once
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			stderr.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "bench: resnet20") {
				once.Do(func() { close(started) })
			}
		}
		done <- cmd.Wait() // after the last read, as exec requires
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("the child ended before its first progress line (%v); stderr:\n%s", err, stderr.String())
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("the child printed no progress line in 60 s (%v)", <-done)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 130 {
			t.Fatalf("ended with %v, want exit status 130; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("still running 20 s after SIGINT (%v)", <-done)
	}
}
