//go:build unix

package durable_test

// The fleet test: three `deputy worker` processes on one Postgres database
// carry a root with 100 background children at simulated model latency,
// each taking at most a few runs at once. One worker is killed with
// SIGKILL mid-run, another drained with SIGTERM; the third takes over what
// they left. Every instance must complete, the shell command each child
// runs (a side effect nothing can undo) must have run exactly once per
// child, and each worker that was not killed must have completed at least
// a fifth of the children.

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", to read DBOS's table

	"github.com/deputy-run/deputy/internal/pgtest"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/store"
)

const fleetChildren = 100

const fleetScenario = `
latency: {first_byte: 150ms}
rules:
  - match: {system: "subagent working", turn: 1}
    tool_calls: [{name: bash, input: {command: "echo '{{.Task}}' >> count.txt"}}]
  - match: {system: "subagent working"}
    text: "did {{.Task}}"
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, repeat: 100, input: {subagent_type: general-purpose, task: "job {{.I}}", background: true}}]
default:
  text: "noted"
`

// fleet is a test's workers and what they share.
type fleet struct {
	t       *testing.T
	bin, ws string
	env     []string
	mu      sync.Mutex
	procs   map[string]*exec.Cmd
	logs    map[string]*bytes.Buffer
	exited  map[string]chan error // closed when the worker's process ends, after its error is sent
	stopped map[string]bool       // signalled by the test: its end is expected
}

func (f *fleet) cmd(args ...string) *exec.Cmd {
	cmd := exec.Command(f.bin, args...)
	cmd.Dir = f.ws
	cmd.Env = append([]string{"HOME=" + f.t.TempDir()}, f.env...)
	return cmd
}

// start starts `deputy worker` as executor id.
func (f *fleet) start(id string, extra ...string) {
	cmd := f.cmd(append([]string{"worker", "-q", "--workspace", f.ws, "--executor-id", id, "--max-runs", "6", "--lease", "3s"}, extra...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	exited := make(chan error, 1)
	f.mu.Lock()
	f.procs[id], f.logs[id], f.exited[id] = cmd, &out, exited
	f.mu.Unlock()
	go func() { exited <- cmd.Wait(); close(exited) }()
	f.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	})
}

// stop signals worker id and waits for its end.
func (f *fleet) stop(id string, sig syscall.Signal) error {
	f.mu.Lock()
	f.stopped[id] = true
	cmd, exited := f.procs[id], f.exited[id]
	f.mu.Unlock()
	if err := cmd.Process.Signal(sig); err != nil {
		return err
	}
	return <-exited
}

// died names a worker whose process ended without the test stopping it.
func (f *fleet) died() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, ch := range f.exited {
		if f.stopped[id] {
			continue
		}
		select {
		case <-ch:
			return id
		default:
		}
	}
	return ""
}

func (f *fleet) log(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.logs[id].String()
}

func TestMultiWorkerTakeoverAndDrain(t *testing.T) {
	t.Parallel()
	bin := buildDeputy(t)
	s, err := fake.ParseScenario([]byte(fleetScenario), "fleet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(fake.NewServer(fake.Options{Responder: s}))
	t.Cleanup(hs.Close)
	url := pgtest.URL(t)
	f := &fleet{t: t, bin: bin, ws: t.TempDir(), procs: map[string]*exec.Cmd{}, logs: map[string]*bytes.Buffer{},
		exited: map[string]chan error{}, stopped: map[string]bool{},
		env: []string{"PATH=" + os.Getenv("PATH"), "DEPUTY_DB=" + url, "ANTHROPIC_API_KEY=test-key", "ANTHROPIC_BASE_URL=" + hs.URL}}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	for _, id := range []string{"w1", "w2", "w3"} {
		f.start(id)
	}
	out, err := f.cmd("run", "--detach", "-q", "--model", "anthropic:fake", "--max-parallel", "100", "--workspace", f.ws,
		"fan out to a hundred").CombinedOutput()
	if err != nil {
		t.Fatalf("deputy run --detach: %v\n%s", err, out)
	}
	root := strings.TrimSpace(string(out))

	st, err := store.Open(ctx, url, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	completed := func() int {
		kids, err := st.ListInstances(ctx, store.Filter{Parent: root, States: []store.State{store.Completed}})
		if err != nil {
			t.Fatal(err)
		}
		return len(kids)
	}
	until := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if id := f.died(); id != "" {
				t.Fatalf("worker %s died:\n%s", id, f.log(id))
			}
			select {
			case <-ctx.Done():
				t.Fatalf("never: %s\nw1:\n%s\nw2:\n%s\nw3:\n%s", what, f.log("w1"), f.log("w2"), f.log("w3"))
			case <-time.After(20 * time.Millisecond):
			}
		}
	}

	until("10 children completed", func() bool { return completed() >= 10 })
	if err := f.stop("w1", syscall.SIGKILL); err == nil {
		t.Fatal("w1 survived SIGKILL")
	}
	until("60 children completed", func() bool { return completed() >= 60 })
	if err := f.stop("w2", syscall.SIGTERM); err != nil {
		t.Fatalf("w2 did not drain cleanly: %v\n%s", err, f.log("w2"))
	}
	until("the root completed", func() bool {
		in, err := st.GetInstance(ctx, root)
		return err == nil && in.State.Terminal()
	})

	// Every instance completed, each child's side effect ran once.
	all, err := st.ListInstances(ctx, store.Filter{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != fleetChildren+1 {
		t.Errorf("%d instances, want the root and %d children", len(all), fleetChildren)
	}
	for _, in := range all {
		if in.State != store.Completed {
			t.Errorf("instance %s (%s) ended %s: %s", in.ID, in.Task, in.State, in.Error)
		}
	}
	counts, _ := os.ReadFile(filepath.Join(f.ws, "count.txt"))
	lines := strings.Fields(strings.ReplaceAll(string(counts), "job ", "job-"))
	slices.Sort(lines)
	if len(lines) != fleetChildren || len(slices.Compact(slices.Clone(lines))) != fleetChildren {
		t.Errorf("the children's shell command ran %d times for %d distinct children, want %d once each",
			len(lines), len(slices.Compact(lines)), fleetChildren)
	}

	// Who completed what: DBOS's record of each child's workflow names the
	// executor that finished it.
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT executor_id, count(*) FROM dbos.workflow_status
		WHERE name = $1 AND status = 'SUCCESS' GROUP BY executor_id`, "deputy.child")
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		by[id] = n
	}
	rows.Close()
	t.Logf("children completed by worker: %v", by)
	for _, id := range []string{"w2", "w3"} {
		if by[id] < fleetChildren/5 {
			t.Errorf("%s completed %d children, want at least %d: %v", id, by[id], fleetChildren/5, by)
		}
	}
	ws, err := st.Workers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, w := range ws {
		states[w.ID] = fmt.Sprintf("%s/%s", w.State, w.ClaimedBy)
	}
	if states["w1"] != "gone/w3" && states["w1"] != "gone/w2" || states["w2"] != "gone/w3" || states["w3"] != "live/" {
		t.Errorf("workers %v: want w1 (killed) and w2 (drained) taken over, w3 live", states)
	}
	if err := f.stop("w3", syscall.SIGTERM); err != nil {
		t.Errorf("w3: %v\n%s", err, f.log("w3"))
	}
}
