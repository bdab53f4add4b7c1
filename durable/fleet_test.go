//go:build unix

package durable_test

// The fleet test: three `deputy worker` processes on one Postgres database
// carry a root with 100 background children at simulated model latency,
// each worker taking at most six runs at once. One worker is killed with
// SIGKILL mid-run, another drained with SIGTERM; the third takes over what
// they left. Every instance must complete; each child fetches a counting
// URL once (a side effect outside deputy, named by the worker that made
// it), and only a fetch cut off by the SIGKILL may be made again; each
// worker that was not killed must have completed at least a fifth of the
// children; no worker ever had more than six model calls in flight, and
// the fleet never more than twelve (its global cap).

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", to read DBOS's table

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/internal/pgtest"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/store"
)

const fleetChildren = 100

// fleetScenario is worker WORKER's script; the children are read-only
// explorers (a writer takes its turn to write the workspace, so writers
// run one at a time), and their one tool call is the counting fetch.
const fleetScenario = `
latency: {first_byte: 150ms}
rules:
  - match: {system: "read-only explorer", turn: 1}
    tool_calls: [{name: web_fetch, input: {url: "COUNT/{{.Task}}/WORKER"}}]
  - match: {system: "read-only explorer"}
    text: "did {{.Task}}"
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, repeat: 100, input: {subagent_type: explorer, task: "job-{{.I}}", background: true}}]
default:
  text: "noted"
`

// counting records the fetches of /TASK/WORKER.
type counting struct {
	mu   sync.Mutex
	hits map[string][]string // task → the workers that fetched it, in order
}

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	task, worker, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	c.mu.Lock()
	c.hits[task] = append(c.hits[task], worker)
	c.mu.Unlock()
	fmt.Fprintf(w, "counted %s", task)
}

// inFlight wraps a worker's model server, keeping the most requests it
// had at once, and the most all of them had (fleet, shared).
type inFlight struct {
	h        http.Handler
	fleet    *inFlight // nil for the fleet's own
	mu       sync.Mutex
	now, max int
}

func (f *inFlight) enter() {
	f.mu.Lock()
	f.now++
	f.max = max(f.max, f.now)
	f.mu.Unlock()
}

func (f *inFlight) leave() { f.mu.Lock(); f.now--; f.mu.Unlock() }

func (f *inFlight) most() int { f.mu.Lock(); defer f.mu.Unlock(); return f.max }

func (f *inFlight) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.enter()
	f.fleet.enter()
	defer f.leave()
	defer f.fleet.leave()
	f.h.ServeHTTP(w, r)
}

// fleet is a test's workers and what they share.
type fleet struct {
	t       testing.TB
	bin, ws string
	env     []string
	mu      sync.Mutex
	procs   map[string]*exec.Cmd
	logs    map[string]*bytes.Buffer
	exited  map[string]chan error // closed when the worker's process ends, after its error is sent
	stopped map[string]bool       // signalled by the test: its end is expected
}

// newFleet is a fleet of deputy binary bin on database url, its workers
// not started yet.
func newFleet(t testing.TB, bin, url string) *fleet {
	return &fleet{t: t, bin: bin, ws: t.TempDir(), procs: map[string]*exec.Cmd{}, logs: map[string]*bytes.Buffer{},
		exited: map[string]chan error{}, stopped: map[string]bool{},
		env: []string{"PATH=" + os.Getenv("PATH"), "DEPUTY_DB=" + url, "ANTHROPIC_API_KEY=test-key", "DEPUTY_LOG=info"}}
}

func (f *fleet) cmd(args ...string) *exec.Cmd {
	cmd := exec.Command(f.bin, args...)
	cmd.Dir = f.ws
	cmd.Env = append([]string{"HOME=" + f.t.TempDir()}, f.env...)
	return cmd
}

// start starts `deputy worker` as executor id, on its model server. The
// lease is 10 s: a worker gives it up when it cannot renew it for 5/6 of
// that, and under -race with every test at once on 2 cores a 3 s lease
// was given up by a live worker starved of CPU (rightly, but not this
// test's subject).
func (f *fleet) start(id, modelURL string) {
	cmd := f.cmd("worker", "-q", "--workspace", f.ws, "--executor-id", id, "--max-runs", "6", "--fleet-max-runs", "12",
		"--lease", "10s")
	cmd.Env = append(cmd.Env, "ANTHROPIC_BASE_URL="+modelURL)
	f.startCmd(id, cmd)
}

// startCmd starts a worker's command as executor id.
func (f *fleet) startCmd(id string, cmd *exec.Cmd) {
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

// diagnose says where a stuck run stands: its unfinished instances, the
// workers, and DBOS's unfinished workflows.
func (f *fleet) diagnose(url, root string) string { return diagnose(url, root) }

func diagnose(url, root string) string {
	ctx := context.Background()
	var b strings.Builder
	st, err := store.Open(ctx, url, store.Options{})
	if err != nil {
		return err.Error()
	}
	defer st.Close()
	db, err := sql.Open("pgx", url)
	if err != nil {
		return err.Error()
	}
	defer db.Close()
	all, _ := st.ListInstances(ctx, store.Filter{Root: root})
	for _, in := range all {
		if in.State != instance.Completed {
			fmt.Fprintf(&b, "instance %s %q: %s %s\n", in.ID, in.Task, in.State, in.Error)
			// Its run's workflow, whatever DBOS says of it, and its steps.
			wf := cmp.Or(in.WorkflowID, "deputy-"+in.ID)
			var status, exec string
			_ = db.QueryRowContext(ctx, `SELECT status, COALESCE(executor_id, '') FROM dbos.workflow_status
				WHERE workflow_uuid = $1`, wf).Scan(&status, &exec)
			fmt.Fprintf(&b, "  workflow %s: %s on %s\n", wf, status, exec)
			steps(ctx, db, wf, &b)
		}
	}
	ws, _ := st.Workers(ctx)
	for _, w := range ws {
		fmt.Fprintf(&b, "worker %+v\n", w)
	}
	rows, err := db.QueryContext(ctx, `SELECT workflow_uuid, name, status, executor_id, COALESCE(queue_name, ''),
		recovery_attempts, created_at, updated_at, COALESCE(error, '') FROM dbos.workflow_status WHERE status NOT IN ('SUCCESS') OR name = 'deputy.instance'`)
	if err != nil {
		return b.String() + err.Error()
	}
	defer rows.Close()
	for rows.Next() {
		var id, name, status, exec, queue string
		var attempts, created, updated int64
		var werr string
		_ = rows.Scan(&id, &name, &status, &exec, &queue, &attempts, &created, &updated, &werr)
		fmt.Fprintf(&b, "workflow %s %s %s on %s queue %q attempts %d created %d updated %d %.500s\n", id, name, status, exec, queue,
			attempts, created%100000, updated%100000, dbosError(werr))
		if status == "ERROR" {
			steps(ctx, db, id, &b)
		}
	}
	return b.String()
}

// dbosError is a workflow's stored error as text: DBOS gob-encodes its
// own error types into the column, so the raw text says nothing.
func dbosError(s string) string {
	if s == "" {
		return ""
	}
	if v, err := dbos.NewGobSerializer().Decode(&s); err == nil {
		return fmt.Sprintf("%v", v)
	}
	return s
}

// steps writes the steps DBOS recorded for workflow id.
func steps(ctx context.Context, db *sql.DB, id string, b *strings.Builder) {
	rows, err := db.QueryContext(ctx, `SELECT function_id, function_name, COALESCE(error, ''), COALESCE(child_workflow_id, ''),
		COALESCE(started_at_epoch_ms, 0) % 100000, COALESCE(completed_at_epoch_ms, 0) % 100000
		FROM dbos.operation_outputs WHERE workflow_uuid = $1 ORDER BY function_id`, id)
	if err != nil {
		fmt.Fprintf(b, "  steps: %v\n", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var fid int
		var name, serr, child string
		var started, done int64
		_ = rows.Scan(&fid, &name, &serr, &child, &started, &done)
		fmt.Fprintf(b, "  step %d %s child %q %d–%d %.300s\n", fid, name, child, started, done, dbosError(serr))
	}
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
	count := &counting{hits: map[string][]string{}}
	cs := httptest.NewServer(count)
	t.Cleanup(cs.Close)
	url := pgtest.URL(t)
	f := newFleet(t, bin, url)
	models, fleetWide := map[string]*inFlight{}, &inFlight{}
	for _, id := range []string{"w1", "w2", "w3"} {
		script := strings.NewReplacer("COUNT", cs.URL, "WORKER", id).Replace(fleetScenario)
		s, err := fake.ParseScenario([]byte(script), id+".yaml")
		if err != nil {
			t.Fatal(err)
		}
		models[id] = &inFlight{h: fake.NewServer(fake.Options{Responder: s}), fleet: fleetWide}
		hs := httptest.NewServer(models[id])
		t.Cleanup(hs.Close)
		f.start(id, hs.URL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The root takes a turn for each batch of relays that reaches it:
	// far more than the default 30 (which would end it, and cancel the
	// children still at work).
	out, err := f.cmd("run", "--detach", "-q", "--model", "anthropic:fake", "--max-parallel", "100", "--max-turns", "500", "--workspace", f.ws,
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
		kids, err := st.ListInstances(ctx, store.Filter{Parent: root, States: []instance.State{instance.Completed}})
		if err != nil {
			t.Fatal(err)
		}
		return len(kids)
	}
	until := func(what string, cond func() bool) {
		t.Helper()
		if !eventually(ctx, st.EventsWritten, func() bool {
			if id := f.died(); id != "" {
				t.Fatalf("worker %s died:\n%s", id, f.log(id))
			}
			return cond()
		}) {
			t.Fatalf("never: %s\n%s\nw1:\n%s\nw2:\n%s\nw3:\n%s", what, f.diagnose(url, root), f.log("w1"), f.log("w2"), f.log("w3"))
		}
	}

	// deputy workers lists the three, live, each with its lease.
	until("deputy workers lists three live workers", func() bool {
		out, err := f.cmd("workers", "--json").CombinedOutput()
		if err != nil {
			t.Fatalf("deputy workers: %v\n%s", err, out)
		}
		var ws []struct {
			ID, State string
			LeaseLeft float64 `json:"lease_left_s"`
		}
		if err := json.Unmarshal(out, &ws); err != nil {
			t.Fatalf("deputy workers --json: %v\n%s", err, out)
		}
		live := 0
		for _, w := range ws {
			if w.State == "live" && w.LeaseLeft > 0 && strings.HasPrefix(w.ID, "w") {
				live++
			}
		}
		return live == 3
	})
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// doneBy counts the children worker id completed: DBOS's record of
	// each child's workflow names the executor that finished it.
	doneBy := func(id string) int {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM dbos.workflow_status
			WHERE name = $1 AND status = 'SUCCESS' AND executor_id = $2`, "deputy.child", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	began := time.Now()
	until("10 children completed", func() bool { return completed() >= 10 })
	t.Logf("%v: 10 completed; SIGKILL w1", time.Since(began))
	if err := f.stop("w1", syscall.SIGKILL); err == nil {
		t.Fatal("w1 survived SIGKILL")
	}
	// w2 is drained mid-run, once it has done its fifth: how the queue
	// shares the work out between two workers is the scheduler's; that the
	// drain hands the rest over is this test's.
	until("w2 completed a fifth of the children", func() bool { return doneBy("w2") >= fleetChildren/5 })
	t.Logf("%v: %d completed, %d by w2; SIGTERM w2", time.Since(began), completed(), doneBy("w2"))
	if err := f.stop("w2", syscall.SIGTERM); err != nil {
		t.Fatalf("w2 did not drain cleanly: %v\n%s", err, f.log("w2"))
	}
	t.Logf("%v: w2 drained", time.Since(began))
	until("the root completed", func() bool {
		in, err := st.GetInstance(ctx, root)
		return err == nil && in.State.Terminal()
	})

	t.Logf("%v: the root completed", time.Since(began))
	// Every instance completed, each child's side effect ran once.
	all, err := st.ListInstances(ctx, store.Filter{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != fleetChildren+1 {
		t.Errorf("%d instances, want the root and %d children", len(all), fleetChildren)
	}
	for _, in := range all {
		if in.State != instance.Completed {
			t.Errorf("instance %s (%s) ended %s: %s", in.ID, in.Task, in.State, in.Error)
		}
	}
	if t.Failed() {
		t.Logf("diagnosis:\n%s", f.diagnose(url, root))
	}
	// Each child fetched once; only w1, killed, may have left a fetch
	// whose step had not finished, which its successor made again.
	count.mu.Lock()
	again := 0
	for i := 1; i <= fleetChildren; i++ { // {{.I}} counts from 1
		task := fmt.Sprintf("job-%d", i)
		hits := count.hits[task]
		switch {
		case len(hits) == 0:
			t.Errorf("%s never fetched", task)
		case len(hits) == 2 && hits[0] == "w1":
			again++
		case len(hits) > 1:
			t.Errorf("%s fetched by %v: a finished step ran again", task, hits)
		}
	}
	count.mu.Unlock()
	if again > 6 {
		t.Errorf("%d fetches made again; w1 had at most 6 runs at work when killed", again)
	}
	for id, m := range models {
		if n := m.most(); n > 6 {
			t.Errorf("%s had %d model calls in flight, over its cap of 6 runs", id, n)
		} else {
			t.Logf("%s: at most %d model calls in flight", id, n)
		}
	}
	if n := fleetWide.most(); n > 12 {
		t.Errorf("the fleet had %d model calls in flight, over its cap of 12 runs", n)
	} else {
		t.Logf("the fleet: at most %d model calls in flight", n)
	}

	by := map[string]int{}
	for _, id := range []string{"w1", "w2", "w3"} {
		by[id] = doneBy(id)
	}
	t.Logf("children completed by worker: %v", by)
	for _, id := range []string{"w2", "w3"} {
		if by[id] < fleetChildren/5 {
			t.Errorf("%s completed %d children, want at least %d: %v", id, by[id], fleetChildren/5, by)
		}
	}
	// w1's lease may outlive the run (when nothing of the run's was left
	// on it, nothing waits for its takeover); it is taken over all the
	// same once the lease runs out.
	var states map[string]string
	until("w1 and w2 taken over", func() bool {
		ws, err := st.Workers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		states = map[string]string{}
		for _, w := range ws {
			states[w.ID] = fmt.Sprintf("%s/%s", w.State, w.ClaimedBy)
		}
		return states["w1"] != "live/" && states["w2"] != "draining/"
	})
	if states["w1"] != "gone/w3" && states["w1"] != "gone/w2" || states["w2"] != "gone/w3" || states["w3"] != "live/" {
		t.Errorf("workers %v: want w1 (killed) and w2 (drained) taken over, w3 live", states)
	}
	if err := f.stop("w3", syscall.SIGTERM); err != nil {
		t.Errorf("w3: %v\n%s", err, f.log("w3"))
	}
}
