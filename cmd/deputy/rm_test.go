package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// deputy rm deletes an ended tree with every record of it, the engine's
// rows of its runs too, and refuses what has not ended; a second rm is
// "no instance". prune --dry-run lists and deletes nothing; prune deletes
// the ended trees and keeps the live one.
func TestRmAndPrune(t *testing.T) {
	t.Parallel()
	ws, first := recordRun(t)
	out, errOut, code := deputy(t, ws, nil, "run", "--model", "fake", "--json", "-q", "count again")
	var second struct{ ID string }
	if code != 0 || json.Unmarshal([]byte(out), &second) != nil {
		t.Fatalf("second run: exit %d\n%s", code, errOut)
	}
	live, errOut, code := deputy(t, ws, nil, "run", "--model", "fake", "--detach", "queued for later")
	live = strings.TrimSpace(live)
	if code != 0 || live == "" {
		t.Fatalf("run --detach: exit %d: %s", code, errOut)
	}
	db := sqlDB(t, dbFile(ws))
	count := func(id string) (deputyRows, engineRows int) {
		t.Helper()
		for _, table := range []string{"deputy_messages", "deputy_events", "deputy_transitions", "deputy_runs"} {
			deputyRows += queryInt(t, db, "SELECT COUNT(*) FROM "+table+" WHERE instance_id IN "+
				"(SELECT id FROM deputy_instances WHERE root = '"+id+"')")
		}
		deputyRows += queryInt(t, db, "SELECT COUNT(*) FROM deputy_instances WHERE root = '"+id+"'")
		engineRows = queryInt(t, db, "SELECT COUNT(*) FROM workflow_status WHERE workflow_uuid LIKE 'deputy-"+id+"%'") +
			queryInt(t, db, "SELECT COUNT(*) FROM operation_outputs WHERE workflow_uuid LIKE 'deputy-"+id+"%'")
		return
	}
	if d, e := count(first); d == 0 || e == 0 {
		t.Fatalf("the run left %d of deputy's rows and %d of the engine's: nothing to delete", d, e)
	}

	args := []string{"rm", live}
	out, errOut, code = deputy(t, ws, nil, args...)
	oneErrorLine(t, args, out, errOut, code, "is created, not ended", "deputy cancel "+live)

	out, errOut, code = deputy(t, ws, nil, "rm", first)
	if code != 0 || !strings.Contains(out, "removed "+first+" and its 3 subagents") {
		t.Fatalf("rm: exit %d\n%s\n%s", code, out, errOut)
	}
	if d, e := count(first); d != 0 || e != 0 {
		t.Errorf("after rm: %d of deputy's rows and %d of the engine's left", d, e)
	}
	if d, e := count(second.ID); d == 0 || e == 0 {
		t.Errorf("rm of one tree deleted another's rows")
	}
	args = []string{"rm", first}
	out, errOut, code = deputy(t, ws, nil, args...)
	oneErrorLine(t, args, out, errOut, code, "no instance")

	cutoff := justAfterTree(t, ws, second.ID)
	out, errOut, code = deputy(t, ws, nil, "prune", "--before", cutoff, "--dry-run", "--json")
	var dry struct {
		DryRun  bool `json:"dry_run"`
		Removed int  `json:"removed"`
		Trees   []struct {
			Root      string `json:"root"`
			Instances int    `json:"instances"`
		} `json:"trees"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &dry) != nil || !dry.DryRun || dry.Removed != 0 || len(dry.Trees) != 1 ||
		dry.Trees[0].Root != second.ID || dry.Trees[0].Instances != 4 {
		t.Fatalf("prune --dry-run: exit %d\n%s\n%s", code, out, errOut)
	}
	if d, _ := count(second.ID); d == 0 {
		t.Fatal("a dry run deleted")
	}
	out, errOut, code = deputy(t, ws, nil, "prune", "--before", cutoff)
	if code != 0 || !strings.Contains(out, "removed 1 trees (4 instances)") {
		t.Fatalf("prune: exit %d\n%s\n%s", code, out, errOut)
	}
	if d, e := count(second.ID); d != 0 || e != 0 {
		t.Errorf("after prune: %d of deputy's rows and %d of the engine's left", d, e)
	}
	out, _, _ = deputy(t, ws, nil, "ps", "--all", "--json")
	var left []struct{ ID string }
	if json.Unmarshal([]byte(out), &left) != nil || len(left) != 1 || left[0].ID != live {
		t.Errorf("after prune, ps --all lists %s; want only the queued %s", out, live)
	}
	for _, bad := range []string{"0", "-3h", "soon", "1.5d", "2026-01-02", "2026-01-02T15:04:05"} {
		args := []string{"prune", "--before", bad}
		out, errOut, code := deputy(t, ws, nil, args...)
		oneErrorLine(t, args, out, errOut, code, "positive duration")
	}
}

// A cancel says what happened, and a second cancel of a cancelled
// instance is a no-op that exits 0 (as a pause of a paused one is).
func TestSecondCancelIsANoOp(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	id, errOut, code := deputy(t, ws, nil, "run", "--model", "fake", "--detach", "wait for me")
	id = strings.TrimSpace(id)
	if code != 0 {
		t.Fatalf("run --detach: exit %d: %s", code, errOut)
	}
	out, errOut, code := deputy(t, ws, nil, "cancel", id)
	if code != 0 || out != "cancelled "+id+" (now cancelled)\n" {
		t.Fatalf("cancel: exit %d\n%q\n%s", code, out, errOut)
	}
	out, errOut, code = deputy(t, ws, nil, "cancel", id)
	if code != 0 || out != id+" is cancelled already: nothing to do\n" || errOut != "" {
		t.Fatalf("second cancel: exit %d\n%q\n%q", code, out, errOut)
	}
	out, _, code = deputy(t, ws, nil, "cancel", "--json", id)
	var j controlJSON
	if code != 0 || json.Unmarshal([]byte(out), &j) != nil || j != (controlJSON{id, "cancel", "cancelled", "already"}) {
		t.Fatalf("cancel --json: exit %d\n%s", code, out)
	}
	// What cannot hold is still refused: an ended instance is not paused.
	args := []string{"pause", id}
	out, errOut, code = deputy(t, ws, nil, args...)
	oneErrorLine(t, args, out, errOut, code, "cannot be paused")
}

// justAfterTree is --before's RFC 3339 time a microsecond (the store's
// grain) after the last of root's tree ended, read from ps --all --json:
// a prune --before it takes the tree, with no wait on the wall clock.
func justAfterTree(t *testing.T, ws, root string) string {
	t.Helper()
	out, errOut, code := deputy(t, ws, nil, "ps", "--all", "--json")
	var all []struct {
		Root    string    `json:"root"`
		EndedAt time.Time `json:"ended_at"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &all) != nil {
		t.Fatalf("ps --all --json: exit %d\n%s\n%s", code, out, errOut)
	}
	var last time.Time
	for _, in := range all {
		if in.Root == root {
			if in.EndedAt.IsZero() {
				t.Fatalf("an instance of %s has not ended:\n%s", root, out)
			}
			if in.EndedAt.After(last) {
				last = in.EndedAt
			}
		}
	}
	if last.IsZero() {
		t.Fatalf("ps --all lists no instance of %s:\n%s", root, out)
	}
	return last.Add(time.Microsecond).Format(time.RFC3339Nano)
}
