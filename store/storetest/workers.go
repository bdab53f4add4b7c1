package storetest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/deputy-run/deputy/store"
)

// testWorkers walks the workers' lifecycle: a join, a second join on a
// held id refused, renewals, an expired lease claimed by one worker and
// lost to its old holder, a takeover owed to its claimer until finished,
// and passed on when the claimer dies first.
func testWorkers(t *testing.T, h Harness) {
	e := newEnv(t, h)
	const ttl = 15 * time.Second
	join := func(id string) error {
		_, err := e.s.JoinWorkers(e.ctx, store.Worker{ID: id, Host: "h-" + id, PID: 7, Version: "v1"}, ttl)
		return err
	}
	noErr(t, "join a", join("a"))
	held, err := e.s.JoinWorkers(e.ctx, store.Worker{ID: "a"}, ttl)
	wantErr(t, "a second join of a", err, store.ErrLeaseHeld)
	if !held.Equal(Epoch.Add(ttl)) {
		t.Fatalf("held until %v, want %v", held, Epoch.Add(ttl))
	}
	noErr(t, "join b", join("b"))

	e.clock.Advance(10 * time.Second)
	noErr(t, "renew a", e.s.RenewLease(e.ctx, "a", ttl, 3))
	ids, err := e.s.ClaimExpired(e.ctx, "b")
	noErr(t, "claim before any lease ran out", err)
	if len(ids) != 0 {
		t.Fatalf("claimed %v while every lease holds", ids)
	}

	e.clock.Advance(10 * time.Second) // b's lease ran out at +15 s; a's holds to +25 s
	wantErr(t, "renewing a lease that ran out", e.s.RenewLease(e.ctx, "b", ttl, 0), store.ErrLeaseLost)
	ids, err = e.s.ClaimExpired(e.ctx, "a")
	noErr(t, "claim", err)
	if !slices.Equal(ids, []string{"b"}) {
		t.Fatalf("claimed %v, want [b]", ids)
	}
	// Until a takeover is finished, its claimer is owed it again (it
	// may have restarted); nobody else is while the claimer lives.
	ids, err = e.s.ClaimExpired(e.ctx, "a")
	noErr(t, "claim again", err)
	if !slices.Equal(ids, []string{"b"}) {
		t.Fatalf("claimed again %v, want [b]: the takeover is not finished", ids)
	}
	noErr(t, "join c", join("c"))
	if ids, err = e.s.ClaimExpired(e.ctx, "c"); err != nil || len(ids) != 0 {
		t.Fatalf("c claimed %v, %v: a live worker's claim is its own", ids, err)
	}
	ws, err := e.s.Workers(e.ctx)
	noErr(t, "workers", err)
	if len(ws) != 3 || ws[0].ID != "a" || ws[0].State != store.WorkerLive || ws[0].Load != 3 || ws[0].Host != "h-a" ||
		!ws[0].LeaseUntil.Equal(Epoch.Add(10*time.Second+ttl)) || ws[2].State != store.WorkerClaimed || ws[2].ClaimedBy != "a" ||
		!ws[2].EndedAt.Equal(Epoch.Add(20*time.Second)) {
		t.Fatalf("workers %+v", ws)
	}
	if err := e.s.FinishTakeover(e.ctx, "b", "c"); err == nil {
		t.Fatal("c finished a takeover it does not hold")
	}
	noErr(t, "finish the takeover", e.s.FinishTakeover(e.ctx, "b", "a"))
	if ids, err = e.s.ClaimExpired(e.ctx, "a"); err != nil || len(ids) != 0 {
		t.Fatalf("after the takeover: claimed %v, %v", ids, err)
	}
	// A claimer that dies before it finishes leaves the takeover to the
	// next claimer.
	noErr(t, "join d", join("d"))
	e.clock.Advance(ttl + time.Second) // every lease runs out
	noErr(t, "c joins again", join("c"))
	ids, err = e.s.ClaimExpired(e.ctx, "c")
	noErr(t, "c claims", err)
	if !slices.Equal(ids, []string{"a", "d"}) {
		t.Fatalf("c claimed %v, want [a d]", ids)
	}
	noErr(t, "d joins again", join("d"))
	if ids, err = e.s.ClaimExpired(e.ctx, "d"); err != nil || len(ids) != 0 {
		t.Fatalf("d claimed %v, %v while c lives", ids, err)
	}
	e.clock.Advance(ttl + time.Second) // c dies with its takeovers unfinished
	noErr(t, "d (whose lease ran out too) joins again", join("d"))
	ids, err = e.s.ClaimExpired(e.ctx, "d")
	noErr(t, "d claims", err)
	if !slices.Equal(ids, []string{"a", "c"}) {
		t.Fatalf("d claimed %v, want [a c]: c's unfinished takeover of a, and c", ids)
	}
	for _, id := range ids {
		noErr(t, "finish "+id, e.s.FinishTakeover(e.ctx, id, "d"))
	}
}

// testWorkerLeaving: a drain keeps the lease, a release gives it back and
// is claimable at once, a gone worker's id may join again, and a crashed
// worker restarting under its id waits out its own lease.
func testWorkerLeaving(t *testing.T, h Harness) {
	e := newEnv(t, h)
	const ttl = 15 * time.Second
	join := func(id string) error {
		_, err := e.s.JoinWorkers(e.ctx, store.Worker{ID: id}, ttl)
		return err
	}
	noErr(t, "join a", join("a"))
	noErr(t, "join b", join("b"))
	// A drain keeps the lease; a release gives it back at once.
	noErr(t, "drain a", e.s.DrainWorker(e.ctx, "a"))
	noErr(t, "renew while draining", e.s.RenewLease(e.ctx, "a", ttl, 1))
	noErr(t, "release a", e.s.ReleaseLease(e.ctx, "a"))
	wantErr(t, "renew after the release", e.s.RenewLease(e.ctx, "a", ttl, 0), store.ErrLeaseLost)
	wantErr(t, "drain after the release", e.s.DrainWorker(e.ctx, "a"), store.ErrLeaseLost)
	ids, err := e.s.ClaimExpired(e.ctx, "b")
	noErr(t, "claim the released", err)
	if !slices.Equal(ids, []string{"a"}) {
		t.Fatalf("claimed %v, want [a] (released, claimable before its lease would have run out)", ids)
	}
	noErr(t, "finish", e.s.FinishTakeover(e.ctx, "a", "b"))
	noErr(t, "a joins again once gone", join("a"))

	// A crashed worker restarting under its id waits out its own lease.
	e.clock.Advance(5 * time.Second)
	_, err = e.s.JoinWorkers(e.ctx, store.Worker{ID: "b"}, ttl)
	wantErr(t, "a restart within the lease", err, store.ErrLeaseHeld)
	e.clock.Advance(ttl)
	noErr(t, "a restart after the lease", join("b"))

	// A restart whose predecessor on the same host is known dead takes
	// the lease at once; only from that predecessor.
	_, err = e.s.JoinWorkers(e.ctx, store.Worker{ID: "c", Host: "h", PID: 10}, ttl)
	noErr(t, "join c", err)
	wantErr(t, "rejoin naming another pid", e.s.RejoinWorkers(e.ctx, store.Worker{ID: "c", Host: "h", PID: 11}, ttl, 9), store.ErrLeaseHeld)
	wantErr(t, "rejoin from another host", e.s.RejoinWorkers(e.ctx, store.Worker{ID: "c", Host: "x", PID: 11}, ttl, 10), store.ErrLeaseHeld)
	noErr(t, "rejoin", e.s.RejoinWorkers(e.ctx, store.Worker{ID: "c", Host: "h", PID: 11}, ttl, 10))
}

// testConcurrentClaims has survivors claim the same dead workers at once,
// three times each: each dead worker goes to exactly one of them.
func testConcurrentClaims(t *testing.T, h Harness) {
	e := newEnv(t, h)
	const ttl = 15 * time.Second
	dead := []string{"d1", "d2", "d3", "d4", "d5"}
	for _, id := range dead {
		_, err := e.s.JoinWorkers(e.ctx, store.Worker{ID: id}, ttl)
		noErr(t, "join "+id, err)
	}
	e.clock.Advance(ttl + time.Second)
	survivors := []string{"s1", "s2", "s3", "s4"}
	for _, id := range survivors {
		_, err := e.s.JoinWorkers(e.ctx, store.Worker{ID: id}, ttl)
		noErr(t, "join "+id, err)
	}
	var mu sync.Mutex
	got := map[string][]string{}
	var wg sync.WaitGroup
	for _, by := range survivors {
		for range 3 {
			wg.Go(func() {
				ids, err := e.s.ClaimExpired(e.ctx, by)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, id := range ids {
					if !slices.Contains(got[id], by) { // a claimer is owed its claim again until it finishes
						got[id] = append(got[id], by)
					}
				}
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	for _, id := range dead {
		if len(got[id]) != 1 {
			t.Errorf("%s claimed by %v, want exactly one", id, got[id])
		}
	}
	if len(got) != len(dead) {
		t.Errorf("claimed %v; only the dead may be", got)
	}
}
