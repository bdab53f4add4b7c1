package durable

import (
	"context"
	"testing"
)

// A run gives its place up while it waits, however many waits overlap,
// and takes one again when the last ends.
func TestSlotsYieldWhileWaiting(t *testing.T) {
	s := &slots{ch: make(chan struct{}, 1)}
	ctx := context.Background()
	queued := 0
	runCtx, release, err := s.take(ctx, func() { queued++ })
	if err != nil || queued != 0 || len(s.ch) != 1 {
		t.Fatalf("take: %v, queued %d, %d taken", err, queued, len(s.ch))
	}
	r1, r2 := s.yield(runCtx), s.yield(runCtx)
	if len(s.ch) != 0 {
		t.Fatal("the place is held while its run waits")
	}
	// A child takes the place meanwhile and gives it back.
	_, childRelease, _ := s.take(ctx, func() { queued++ })
	childRelease()
	r1()
	if len(s.ch) != 0 {
		t.Fatal("the place was taken again while a wait goes on")
	}
	r2()
	if len(s.ch) != 1 {
		t.Fatal("the place was not taken again after the last wait")
	}
	release()
	release() // twice is harmless
	if len(s.ch) != 0 || queued != 0 {
		t.Fatalf("%d taken after release, queued %d", len(s.ch), queued)
	}
	if resume := s.yield(ctx); resume != nil {
		resume() // a context without a place: nothing to give up
	}
	if len(s.ch) != 0 {
		t.Fatal("yield without a place changed the count")
	}
}
