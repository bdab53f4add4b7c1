package clock

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestFakeFiresOnlyDueTimers(t *testing.T) {
	t.Parallel()
	c := NewFake(epoch)
	var a, b atomic.Int32
	c.AfterFunc(time.Second, func() { a.Add(1) })
	c.AfterFunc(time.Minute, func() { b.Add(1) })
	c.Advance(999 * time.Millisecond)
	if a.Load() != 0 || c.Pending() != 2 {
		t.Fatalf("fired early: a=%d pending=%d", a.Load(), c.Pending())
	}
	c.Advance(time.Millisecond)
	if a.Load() != 1 || b.Load() != 0 || c.Pending() != 1 {
		t.Fatalf("a=%d b=%d pending=%d", a.Load(), b.Load(), c.Pending())
	}
	if got := c.Now(); !got.Equal(epoch.Add(time.Second)) {
		t.Fatalf("now %v", got)
	}
	c.Advance(time.Hour)
	if a.Load() != 1 || b.Load() != 1 || c.Pending() != 0 {
		t.Fatalf("a=%d b=%d pending=%d", a.Load(), b.Load(), c.Pending())
	}
}

func TestFakeStop(t *testing.T) {
	t.Parallel()
	c := NewFake(epoch)
	var fired atomic.Bool
	tm := c.AfterFunc(time.Second, func() { fired.Store(true) })
	if !tm.Stop() || tm.Stop() {
		t.Fatal("Stop should report true once, then false")
	}
	c.Advance(time.Hour)
	if fired.Load() {
		t.Fatal("a stopped timer fired")
	}
}

func TestTimerArmedByACallbackFiresAtTheNextAdvance(t *testing.T) {
	t.Parallel()
	c := NewFake(epoch)
	var second atomic.Bool
	c.AfterFunc(time.Second, func() { c.AfterFunc(0, func() { second.Store(true) }) })
	c.Advance(time.Second)
	if second.Load() || c.Pending() != 1 {
		t.Fatal("a timer armed during Advance fired in the same Advance")
	}
	c.Advance(0)
	if !second.Load() {
		t.Fatal("the re-armed timer did not fire")
	}
}

func TestWaitPending(t *testing.T) {
	t.Parallel()
	c := NewFake(epoch)
	done := make(chan error, 1)
	go func() { done <- Sleep(context.Background(), c, time.Minute) }()
	if err := c.WaitPending(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Minute)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.WaitPending(ctx, 5); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitPending on a cancelled context: %v", err)
	}
}

func TestSleepStopsOnCancelAndLeavesNoTimer(t *testing.T) {
	t.Parallel()
	c := NewFake(epoch)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Sleep(ctx, c, time.Hour) }()
	if err := c.WaitPending(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep: %v", err)
	}
	if c.Pending() != 0 {
		t.Fatal("Sleep left its timer armed")
	}
	if err := Sleep(context.Background(), c, 0); err != nil {
		t.Fatal(err)
	}
}

func TestWithTimeoutCause(t *testing.T) {
	t.Parallel()
	c := NewFake(epoch)
	mine := errors.New("budget spent")
	ctx, cancel := WithTimeout(context.Background(), c, time.Second, mine)
	defer cancel()
	c.Advance(time.Second)
	<-ctx.Done()
	if !errors.Is(context.Cause(ctx), mine) {
		t.Fatalf("cause %v", context.Cause(ctx))
	}
	ctx2, cancel2 := WithTimeout(context.Background(), c, time.Second, nil)
	cancel2()
	if !errors.Is(context.Cause(ctx2), context.Canceled) || c.Pending() != 0 {
		t.Fatalf("cancel: cause %v, pending %d", context.Cause(ctx2), c.Pending())
	}
	ctx3, cancel3 := WithTimeout(context.Background(), c, time.Second, nil)
	defer cancel3()
	c.Advance(time.Second)
	if !errors.Is(context.Cause(ctx3), ErrTimeout) {
		t.Fatalf("default cause %v", context.Cause(ctx3))
	}
}

func TestRealClock(t *testing.T) {
	t.Parallel()
	done := make(chan struct{})
	Real.AfterFunc(time.Millisecond, func() { close(done) })
	<-done
	if Real.Now().IsZero() {
		t.Fatal("zero time")
	}
}

func TestInstantAndArmedClocks(t *testing.T) {
	t.Parallel()
	in := NewInstant()
	start := in.Now()
	fired := make(chan struct{})
	in.AfterFunc(3*time.Second, func() { close(fired) })
	<-fired
	if got := in.Now().Sub(start); got != 3*time.Second || len(in.Waits()) != 1 || in.Waits()[0] != 3*time.Second {
		t.Fatalf("moved %v, waits %v", got, in.Waits())
	}
	ar := NewArmed()
	ar.AfterFunc(time.Minute, func() {})
	if d := <-ar.Armed; d != time.Minute || ar.Pending() != 1 {
		t.Fatalf("announced %v, pending %d", d, ar.Pending())
	}
}
