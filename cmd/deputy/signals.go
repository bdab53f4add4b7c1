package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// exitInterrupted: the process stopped (a signal, or a run it could not
// carry on) before the run ended, and the run is saved as it stood after
// its last finished step: `deputy worker` resumes it. Not a failure: the
// instance has not ended.
const exitInterrupted = 6

// stopSignals is how a process running instances stops on SIGINT or
// SIGTERM. The first signal ends stop, and the caller closes its engine,
// which drains: no step starts, the running ones finish within the drain's
// bound (durable.Engine.CloseContext). The second ends hurry, which cuts
// the drain short: what still runs is cut off, as at a crash, and
// reported interrupted when the run resumes. A third is the default
// action again (the process dies at once).
//
// Why drain rather than stop at once: a tool call stopped mid-way (a bash
// that had started) is reported to the model as interrupted, never run
// again, so stopping it wastes its work and leaves its effects half done.
func stopSignals(parent context.Context, stderr io.Writer, drain time.Duration, quiet bool) (stop, hurry context.Context, release func()) {
	stop, cancelStop := context.WithCancel(parent)
	hurry, cancelHurry := context.WithCancel(context.WithoutCancel(parent))
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		defer signal.Stop(ch)
		select {
		case <-ch:
		case <-done:
			return
		}
		if !quiet {
			fmt.Fprintf(stderr, "deputy: stopping: running steps may finish (at most %s), nothing new starts; "+
				"signal again to stop at once\n", drain)
		}
		cancelStop()
		select {
		case <-ch:
		case <-done:
			return
		}
		if !quiet {
			fmt.Fprintln(stderr, "deputy: stopping at once: steps still running are cut off")
		}
		cancelHurry()
	}()
	return stop, hurry, func() {
		close(done)
		cancelStop()
		cancelHurry()
	}
}
