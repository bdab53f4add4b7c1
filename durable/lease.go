package durable

// A worker of a fleet (Options.Lease > 0): several processes, each under
// its own executor id, on one Postgres database. DBOS recovers only a
// process's own executor id at launch; knowing that another worker is dead
// is deputy's, through the leases of store.Worker.
//
// The timeline of one lease of length L, from the start t of its last
// successful renewal (renewals every L/3):
//
//	t + 2L/3   steps stop starting (admit waits): a late renewal may yet
//	           come, but no new step begins on a lease that may be lost
//	t + 5L/6   the worker gives up: OnLeaseLost (by default the process
//	           exits, so nothing it runs writes again)
//	t + L      the lease has run out; survivors claim it (they look every
//	           ClaimInterval) and re-enqueue its pending workflows, which
//	           resume from their last finished step on any worker
//
// So a step never runs on two live workers, provided the workers' clocks
// agree to well within L/6 (2.5 s at the default 15 s). A step that was
// running when its worker died runs again on the new one: it had not
// finished, its result was never recorded.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"syscall"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/deputy-run/deputy/clock"
	"github.com/deputy-run/deputy/internal/pgdial"
	"github.com/deputy-run/deputy/store"
)

// DefaultLease is a worker's lease unless Options.Lease says otherwise.
const DefaultLease = 15 * time.Second

// ExitLeaseLost is the exit status of a worker that gave its lease up
// (deputy's CLI exit codes: 5).
const ExitLeaseLost = 5

// ErrLeaseLost is what OnLeaseLost hears.
var ErrLeaseLost = errors.New("this worker lost its lease")

// lease is a worker's hold on its executor id. What steps may start is
// the engine's gate's (drain.go): the lease moves its horizon as it is
// renewed and closes it when lost.
type lease struct {
	e   *Engine
	ttl time.Duration

	stop context.CancelFunc
	done chan struct{}
}

// admitUntil is when steps stop being admitted after a renewal that began
// at t (2L/3), and giveUpAt when the worker gives the lease up (5L/6):
// both well before the lease recorded at t can run out.
func (l *lease) admitUntil(t time.Time) time.Time { return t.Add(l.ttl - l.ttl/3) }
func (l *lease) giveUpAt(t time.Time) time.Time   { return t.Add(l.ttl - l.ttl/6) }

// join records this engine as a live worker, waiting out a lease its
// executor id still holds (the same id's process before a restart), then
// starts the keeper.
func (e *Engine) join(ctx context.Context) error {
	l := &lease{e: e, ttl: e.opts.Lease, done: make(chan struct{})}
	host, _ := os.Hostname()
	w := store.Worker{ID: e.opts.ExecutorID, Host: host, PID: os.Getpid(), Version: AppVersion}
	var start time.Time
	for {
		start = e.opts.Clock.Now()
		held, err := e.st.JoinWorkers(ctx, w, l.ttl)
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrLeaseHeld) || held.Sub(start) > l.ttl {
			return fmt.Errorf("durable: %w", err)
		}
		// Held by this id's previous process on this machine, now dead
		// (killed, then restarted): nothing of it can write any more, so
		// the lease is taken over at once rather than waited out.
		if pid := e.deadPredecessor(ctx, w); pid != 0 {
			if err := e.st.RejoinWorkers(ctx, w, l.ttl, pid); err == nil {
				break
			}
		}
		if e.opts.OnLeaseWait != nil {
			e.opts.OnLeaseWait(held)
		}
		if err := clock.Sleep(ctx, e.opts.Clock, held.Sub(start)+time.Millisecond); err != nil {
			return fmt.Errorf("durable: waiting for the lease of %s: %w", w.ID, err)
		}
	}
	e.gate.extend(l.admitUntil(start))
	kctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	l.stop = stop
	e.lease = l
	go l.keep(kctx, start)
	return nil
}

// deadPredecessor returns the pid of the process that holds w's executor
// id on this host when that process no longer exists, else 0.
func (e *Engine) deadPredecessor(ctx context.Context, w store.Worker) int {
	ws, err := e.st.Workers(ctx)
	if err != nil {
		return 0
	}
	for _, o := range ws {
		if o.ID == w.ID && o.Host == w.Host && o.PID != w.PID && o.PID > 0 {
			if err := syscall.Kill(o.PID, 0); errors.Is(err, syscall.ESRCH) {
				return o.PID
			}
		}
	}
	return 0
}

// keep renews the lease, claims the leases that ran out and takes their
// work over, until stopped or the lease is lost. lastOK is when the join
// that took the lease began: every deadline counts from the start of the
// last successful call, which is before the database's own clock read.
func (l *lease) keep(ctx context.Context, lastOK time.Time) {
	defer close(l.done)
	e := l.e
	renewEvery, claimEvery := l.ttl/3, e.opts.ClaimInterval
	nextRenew, nextClaim := lastOK.Add(renewEvery), lastOK // claim at once: a worker may have died while none ran
	for {
		next := slices.MinFunc([]time.Time{nextRenew, nextClaim, l.giveUpAt(lastOK)}, time.Time.Compare)
		if err := clock.Sleep(ctx, e.opts.Clock, next.Sub(e.opts.Clock.Now())); err != nil {
			return
		}
		now := e.opts.Clock.Now()
		if !now.Before(nextRenew) {
			// Bounded by the moment the lease is given up: a renewal
			// hanging on a cut-off network must not keep the worker from
			// giving up in time. (A real-time bound: it is the network's
			// time that runs, and no fake clock's timer is left behind.)
			rctx, cancel := context.WithTimeout(ctx, l.giveUpAt(lastOK).Sub(now))
			err := e.st.RenewLease(rctx, e.opts.ExecutorID, l.ttl, e.runsHere())
			cancel()
			switch {
			case err == nil:
				lastOK = now
				e.gate.extend(l.admitUntil(now))
				nextRenew = now.Add(renewEvery)
			case errors.Is(err, store.ErrLeaseLost):
				l.lose(err)
				return
			case ctx.Err() != nil:
				return
			default:
				// The database may be out of reach: try again soon, and
				// give up before the lease can run out.
				nextRenew = now.Add(min(time.Second, renewEvery))
				e.log("renewing the lease failed", "err", err)
			}
		}
		if !now.Before(l.giveUpAt(lastOK)) {
			l.lose(fmt.Errorf("%w: not renewed since %s", ErrLeaseLost, lastOK.Format(time.RFC3339Nano)))
			return
		}
		if !now.Before(nextClaim) {
			nextClaim = now.Add(claimEvery)
			cctx, cancel := context.WithTimeout(ctx, l.giveUpAt(lastOK).Sub(now))
			l.claim(cctx)
			cancel()
		}
	}
}

// claim takes over the work of every worker whose lease ran out.
func (l *lease) claim(ctx context.Context) {
	e := l.e
	ids, err := e.st.ClaimExpired(ctx, e.opts.ExecutorID)
	if err != nil {
		e.log("claiming expired leases failed", "err", err)
		return
	}
	for _, dead := range ids {
		if err := e.takeOver(ctx, dead); err != nil {
			// Owed still: the next claim returns it again.
			e.log("taking over a dead worker's work failed", "worker", dead, "err", err)
		}
	}
}

// takeOver re-enqueues dead's pending workflows of this version, each on
// the queue it was on (DBOS's internal queue when none), so they resume
// from their last finished step on whichever worker dequeues them, this
// one included. Only the claimer does this: re-enqueueing a workflow
// another worker has dequeued meanwhile would run it twice.
func (e *Engine) takeOver(ctx context.Context, dead string) error {
	wfs, err := dbos.ListWorkflows(e.dbos, dbos.WithFilterExecutorIDs(dead), dbos.WithFilterStatus(dbos.WorkflowStatusPending),
		dbos.WithFilterAppVersion(AppVersion), dbos.WithFilterLoadInput(false), dbos.WithFilterLoadOutput(false))
	if err != nil {
		return fmt.Errorf("list the runs of %s: %w", dead, err)
	}
	byQueue := map[string][]string{}
	for _, w := range wfs {
		byQueue[w.QueueName] = append(byQueue[w.QueueName], w.ID)
	}
	for _, q := range slices.Sorted(maps.Keys(byQueue)) {
		var opts []dbos.ResumeWorkflowOption
		if q != "" {
			opts = append(opts, dbos.WithResumeQueue(q))
		}
		if _, err := e.dbos.ResumeWorkflows(e.dbos, byQueue[q], opts...); err != nil {
			return fmt.Errorf("resume the runs of %s: %w", dead, err)
		}
	}
	if err := e.st.FinishTakeover(ctx, dead, e.opts.ExecutorID); err != nil {
		return err
	}
	if h := e.opts.OnTakeover; h != nil {
		h(dead, len(wfs))
	}
	return nil
}

// lose gives the lease up for good: no step starts again (admit waits
// until its run's context ends), and OnLeaseLost hears why. The runs here
// are not cancelled: a cancelled run records its end, and its end is not
// this worker's to record any more.
func (l *lease) lose(err error) {
	if !errors.Is(err, ErrLeaseLost) {
		err = fmt.Errorf("%w: %w", ErrLeaseLost, err)
	}
	if !l.e.gate.lose(err) {
		return
	}
	if h := l.e.opts.OnLeaseLost; h != nil {
		h(err)
		return
	}
	// Nothing this process runs may write again: its work is another
	// worker's now. Its connections are reset first, so what it wrote and
	// the network has not delivered yet never is (pgdial), then it exits.
	pgdial.Abort()
	fmt.Fprintf(os.Stderr, "deputy: %v; exiting so that nothing runs twice\n", err)
	os.Exit(ExitLeaseLost)
}

// close stops the keeper (the lease stays until released or run out).
func (l *lease) close() {
	l.stop()
	<-l.done
}

// runsHere is the runs this engine carries now.
func (e *Engine) runsHere() int {
	n := 0
	e.running.Range(func(_, _ any) bool { n++; return true })
	return n
}
