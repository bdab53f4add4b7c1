package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite" // database/sql driver "sqlite", to tamper with the file as another program would

	"github.com/deputy-run/deputy/store"
)

// The durable CLI against bad databases (issue 5, "Bad input"): an unknown
// id, a corrupt, locked or newer database is one clear line and exit 2,
// and the file is left as it was. And the store-backed commands end to
// end: run --detach, worker, ps, show.

// dbFile is the default database of a workspace.
func dbFile(ws string) string { return filepath.Join(ws, ".deputy", "deputy.db") }

// recordRun runs the offline demo in a new workspace, recording it in the
// workspace's default database, and returns the workspace and the root id.
func recordRun(t *testing.T, extra ...string) (ws, id string) {
	t.Helper()
	ws = t.TempDir()
	out, errOut, code := deputy(t, ws, nil, append([]string{"run", "--model", "fake", "--json", "-q"}, append(extra, "count files")...)...)
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, errOut)
	}
	var res struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.ID == "" {
		t.Fatalf("run --json: %v\n%s", err, out)
	}
	return ws, res.ID
}

// readBytes reads a file, failing the test if it cannot.
func readBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sqlDB opens the SQLite file directly, as another program would.
func sqlDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// queryInt runs a query returning one integer.
func queryInt(t *testing.T, db *sql.DB, query string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// oneErrorLine checks a refused command: exit 2, nothing on stdout, and
// exactly one line on stderr, "deputy: ...", containing every want.
func oneErrorLine(t *testing.T, args []string, stdout, stderr string, code int, want ...string) {
	t.Helper()
	if code != exitUsage || stdout != "" || !strings.HasPrefix(stderr, "deputy: ") ||
		strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
		t.Errorf("%v: want exit 2, empty stdout and one line on stderr; got exit %d\nstdout %q\nstderr %q", args, code, stdout, stderr)
		return
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("%v: stderr lacks %q: %q", args, w, stderr)
		}
	}
}

// onlyFile checks that dir holds only the database: no -wal or -shm left
// behind, and nothing else created beside it.
func onlyFile(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		// The engine lock of a run made before the damage is no journal:
		// it stays by design (removing an flock file races its next user).
		if e.Name() != "deputy.db.engine.lock" {
			names = append(names, e.Name())
		}
	}
	if !slices.Equal(names, []string{"deputy.db"}) {
		t.Errorf("%s holds %v, want only deputy.db", dir, names)
	}
}

func TestShowUnknownIDExits2(t *testing.T) {
	t.Parallel()
	ws, _ := recordRun(t)
	for _, args := range [][]string{{"show", "NOPE"}, {"show", "--json", "NOPE"}, {"show", "NOPE", "--json"}} {
		out, errOut, code := deputy(t, ws, nil, args...)
		oneErrorLine(t, args, out, errOut, code, `"NOPE"`, "no instance")
	}
}

// allCommands are the commands that open the database; each must refuse a
// bad one before doing anything. show's id need not exist: the database is
// refused before it is looked up.
var allCommands = [][]string{
	{"run", "--model", "fake", "x"},
	{"run", "--detach", "--model", "fake", "x"},
	{"run", "--json", "--model", "fake", "x"},
	{"ps"},
	{"ps", "--all", "--json"},
	{"show", "X"},
	{"show", "--json", "X"},
	{"worker", "--until-idle"},
}

func TestCorruptDatabaseExits2AndIsLeftAsItIs(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 2)) // garbage, but the same every run
	noise := make([]byte, 8192)
	for i := range noise {
		noise[i] = byte(rng.Uint32())
	}
	cases := []struct {
		name    string
		content []byte
	}{
		{"text", []byte("these are my notes, not a database\n")},
		{"random", noise},
		// The header is right, the rest is not: SQLite gets past the magic.
		{"header", append([]byte("SQLite format 3\x00"), noise[16:]...)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ws := t.TempDir()
			path := dbFile(ws)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, c.content, 0o644); err != nil {
				t.Fatal(err)
			}
			for _, args := range allCommands {
				out, errOut, code := deputy(t, ws, nil, args...)
				oneErrorLine(t, args, out, errOut, code, filepath.Join(".deputy", "deputy.db"), "not a SQLite database")
			}
			// Named by --db and by $DEPUTY_DB from another directory, the
			// message names the file as it was given.
			elsewhere := t.TempDir()
			out, errOut, code := deputy(t, elsewhere, nil, "ps", "--db", path)
			oneErrorLine(t, []string{"ps", "--db", path}, out, errOut, code, path, "not a SQLite database")
			out, errOut, code = deputy(t, elsewhere, []string{"DEPUTY_DB=" + path}, "show", "X")
			oneErrorLine(t, []string{"DEPUTY_DB", "show"}, out, errOut, code, path, "not a SQLite database")

			if !bytes.Equal(readBytes(t, path), c.content) {
				t.Error("the corrupt file was changed")
			}
			onlyFile(t, filepath.Dir(path))
			if _, err := os.Stat(filepath.Join(elsewhere, ".deputy")); !os.IsNotExist(err) {
				t.Errorf("a command with --db or $DEPUTY_DB created .deputy in its directory: %v", err)
			}
		})
	}
}

// TestDamagedPageExits2 damages one page of a valid database: the file
// opens, and the damage shows when a read reaches the page. Reading
// commands then say which database is damaged, exit 2, and change nothing.
func TestDamagedPageExits2(t *testing.T) {
	t.Parallel()
	ws, id := recordRun(t)
	path := dbFile(ws)
	db := sqlDB(t, path)
	pageSize := queryInt(t, db, "PRAGMA page_size")
	root := queryInt(t, db, "SELECT rootpage FROM sqlite_master WHERE name = 'deputy_instances'")
	db.Close() // the last connection checkpoints the WAL into the file
	// A page of text: its first byte is no b-tree page type, so SQLite
	// reports it as malformed whatever else it holds.
	garbage := bytes.Repeat([]byte("not a b-tree page. "), pageSize/19+1)[:pageSize]
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(garbage, int64(root-1)*int64(pageSize)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	before := readBytes(t, path)
	for _, args := range [][]string{{"ps", "--all"}, {"ps", "--all", "--json"}, {"show", id}, {"show", "--json", id}} {
		out, errOut, code := deputy(t, ws, nil, args...)
		oneErrorLine(t, args, out, errOut, code, filepath.Join(".deputy", "deputy.db"), "malformed")
	}
	if !bytes.Equal(readBytes(t, path), before) {
		t.Error("reading commands changed the damaged file")
	}
}

func TestNewerSchemaExits2AndChangesNothing(t *testing.T) {
	t.Parallel()
	ws, id := recordRun(t)
	// A queued run too: a worker that ignored the schema would run it.
	queued, errOut, code := deputy(t, ws, nil, "run", "--detach", "--model", "fake", "x")
	if code != 0 {
		t.Fatalf("run --detach: exit %d: %s", code, errOut)
	}
	queued = strings.TrimSpace(queued)
	path := dbFile(ws)
	newer := store.LatestSchemaVersion() + 1
	db := sqlDB(t, path)
	// What a newer deputy's migration would leave: one more version row.
	if _, err := db.Exec(`INSERT INTO deputy_schema (version, applied_at) VALUES (?, ?)`, newer, time.Now().UnixMicro()); err != nil {
		t.Fatal(err)
	}
	instances := queryInt(t, db, "SELECT COUNT(*) FROM deputy_instances")
	db.Close()
	before := readBytes(t, path)

	commands := append(slices.Clone(allCommands), []string{"show", id}, []string{"show", "--json", queued})
	for _, args := range commands {
		out, errOut, code := deputy(t, ws, nil, args...)
		oneErrorLine(t, args, out, errOut, code, filepath.Join(".deputy", "deputy.db"), "schema is newer",
			fmt.Sprintf("version %d", newer), "nothing was changed")
	}
	if !bytes.Equal(readBytes(t, path), before) {
		t.Error("the newer database's file was changed")
	}
	onlyFile(t, filepath.Dir(path))
	db = sqlDB(t, path)
	if v := queryInt(t, db, "SELECT MAX(version) FROM deputy_schema"); v != newer {
		t.Errorf("schema version %d, want %d", v, newer)
	}
	if n := queryInt(t, db, "SELECT COUNT(*) FROM deputy_instances"); n != instances {
		t.Errorf("%d instances, want %d", n, instances)
	}
	var state string
	if err := db.QueryRow(`SELECT state FROM deputy_instances WHERE id = ?`, queued).Scan(&state); err != nil || state != "created" {
		t.Errorf("queued instance %s: state %q, %v; want it still created", queued, state, err)
	}
}

// startDeputy starts the binary like deputy() does and returns a function
// that waits for it.
func startDeputy(t *testing.T, dir string, args ...string) func() (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "DEPUTY_FAKE_LATENCY=off"}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return func() (string, string, int) {
		err := cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok {
			return o.String(), e.String(), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return o.String(), e.String(), 0
	}
}

// TestLockedDatabaseExits2 holds the database's write lock from another
// connection while commands open it.
//
// SLOW (about 5 s): the CLI has no way to shorten the store's busy
// timeout (store.DefaultBusyTimeout, 5 s), so each command waits it out
// before it fails. The commands run at once, so the test waits once. It is
// deterministic: the lock is taken before the commands start and released
// only after they have exited.
func TestLockedDatabaseExits2(t *testing.T) {
	t.Parallel()
	ws, _ := recordRun(t)
	path := dbFile(ws)
	db := sqlDB(t, path)
	instances := queryInt(t, db, "SELECT COUNT(*) FROM deputy_instances")
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	commands := [][]string{{"ps"}, {"run", "--detach", "--model", "fake", "x"}, {"worker", "--until-idle"}}
	start := time.Now()
	var waits []func() (string, string, int)
	for _, args := range commands {
		waits = append(waits, startDeputy(t, ws, args...))
	}
	for i, wait := range waits {
		out, errOut, code := wait()
		oneErrorLine(t, commands[i], out, errOut, code, filepath.Join(".deputy", "deputy.db"), "locked",
			fmt.Sprintf("waited %v", store.DefaultBusyTimeout))
	}
	// They waited for the lock (SQLite's busy handler sleeps to within
	// 100 ms of the timeout) rather than failing at once.
	if d := time.Since(start); d < store.DefaultBusyTimeout-time.Second {
		t.Errorf("the commands failed after %v, before the busy timeout of %v", d, store.DefaultBusyTimeout)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if n := queryInt(t, db, "SELECT COUNT(*) FROM deputy_instances"); n != instances {
		t.Errorf("%d instances after the locked run --detach, want %d", n, instances)
	}
	// Released, the same database works.
	out, errOut, code := deputy(t, ws, nil, "ps", "--all", "--json")
	var list []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != instances {
		t.Fatalf("after the lock: exit %d, %d instances, want %d\n%s\n%s", code, len(list), instances, out, errOut)
	}
}

// instanceKeys are the keys issue 5 promises on every instance object of
// show --json and ps --json, with the API's names since issue 18 (the
// report is "report").
var instanceKeys = []string{"id", "parent", "type", "state", "usage", "report"}

// decodeInstance decodes one instance object and checks that it carries
// every promised key.
func decodeInstance(t *testing.T, raw json.RawMessage) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, raw)
	}
	for _, k := range instanceKeys {
		if _, ok := m[k]; !ok {
			t.Errorf("instance lacks %q: %s", k, raw)
		}
	}
	return m
}

func str(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	if string(raw) == "null" {
		return ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("not a string: %s", raw)
	}
	return s
}

type usageJSON struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

func TestDetachThenWorkerRunsIt(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	out, errOut, code := deputy(t, ws, nil, "run", "--detach", "--model", "fake", "count files")
	if code != 0 || errOut != "" || !regexp.MustCompile(`^[A-Za-z0-9_-]+\n$`).MatchString(out) {
		t.Fatalf("run --detach: exit %d\nstdout %q (want only an id)\nstderr %q", code, out, errOut)
	}
	id := strings.TrimSpace(out)
	if _, err := os.Stat(filepath.Join(ws, "deputy-demo.md")); !os.IsNotExist(err) {
		t.Fatalf("run --detach ran the task itself: %v", err)
	}

	out, errOut, code = deputy(t, ws, nil, "ps", "--json")
	var active []json.RawMessage
	if code != 0 || json.Unmarshal([]byte(out), &active) != nil || len(active) != 1 {
		t.Fatalf("ps --json: exit %d\n%s\n%s", code, out, errOut)
	}
	m := decodeInstance(t, active[0])
	if st := str(t, m["state"]); str(t, m["id"]) != id || !slices.Contains([]string{"created", "queued", "running"}, st) {
		t.Fatalf("ps --json before the worker: %s", active[0])
	}

	out, errOut, code = deputy(t, ws, nil, "worker", "--until-idle", "-q")
	if code != 0 || out != "" || errOut != "" {
		t.Fatalf("worker: exit %d\nstdout %q\nstderr %q", code, out, errOut)
	}
	// The run worked in the workspace it was recorded with.
	if _, err := os.Stat(filepath.Join(ws, "deputy-demo.md")); err != nil {
		t.Fatalf("the worker's run did not write its file: %v", err)
	}

	out, errOut, code = deputy(t, ws, nil, "show", id, "--json")
	if code != 0 {
		t.Fatalf("show --json: exit %d: %s", code, errOut)
	}
	m = decodeInstance(t, json.RawMessage(out))
	var u usageJSON
	var transcript []json.RawMessage
	if json.Unmarshal(m["usage"], &u) != nil || json.Unmarshal(m["transcript"], &transcript) != nil {
		t.Fatalf("show --json: %s", out)
	}
	if str(t, m["id"]) != id || str(t, m["state"]) != "completed" || str(t, m["parent"]) != "" ||
		!strings.Contains(str(t, m["report"]), "count files") || u.InputTokens <= 0 || u.OutputTokens <= 0 || len(transcript) < 3 {
		t.Fatalf("show --json after the worker: state %s, report %s, usage %+v, %d messages", m["state"], m["report"], u, len(transcript))
	}
	if string(m["parent"]) != `""` {
		t.Errorf("a root's parent is %s, want \"\"", m["parent"])
	}

	out, errOut, code = deputy(t, ws, nil, "ps", "--all", "--json")
	var all []json.RawMessage
	if code != 0 || json.Unmarshal([]byte(out), &all) != nil {
		t.Fatalf("ps --all --json: exit %d\n%s\n%s", code, out, errOut)
	}
	// The demo's root and the three explorers it spawned.
	if len(all) != 4 {
		t.Fatalf("ps --all --json lists %d instances, want 4:\n%s", len(all), out)
	}
	for _, raw := range all {
		m := decodeInstance(t, raw)
		var u usageJSON
		if json.Unmarshal(m["usage"], &u) != nil || u.OutputTokens <= 0 || str(t, m["state"]) != "completed" || str(t, m["report"]) == "" {
			t.Errorf("instance after the worker: %s", raw)
		}
		if str(t, m["id"]) != id && (str(t, m["parent"]) != id || str(t, m["type"]) != "explorer") {
			t.Errorf("child: %s", raw)
		}
		// The run's configuration travelled with it: the worker put the
		// explorers on the demo's haiku tier and priced them.
		if str(t, m["id"]) != id && (str(t, m["model"]) != "fake:haiku" || string(m["cost"]) == "null") {
			t.Errorf("a child run by the worker lost the run's config: %s", raw)
		}
	}
	// Nothing is active any more: an empty array, not null.
	out, _, code = deputy(t, ws, nil, "ps", "--json")
	if code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("ps --json after the worker: exit %d: %q", code, out)
	}
}

func TestRunJSONThenShowPrintsTheTranscript(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	out, errOut, code := deputy(t, ws, nil, "run", "--json", "-q", "--model", "fake", "count files")
	if code != 0 {
		t.Fatalf("run --json: exit %d: %s", code, errOut)
	}
	var res struct {
		ID        string            `json:"id"`
		Answer    string            `json:"answer"`
		Instances []json.RawMessage `json:"instances"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.ID == "" || len(res.Instances) != 4 {
		t.Fatalf("run --json: %v\n%s", err, out)
	}
	root := decodeInstance(t, res.Instances[0])
	if str(t, root["id"]) != res.ID {
		t.Fatalf("the first instance %s is not the root %s", root["id"], res.ID)
	}
	child := str(t, decodeInstance(t, res.Instances[1])["id"])

	out, errOut, code = deputy(t, ws, nil, "show", res.ID, "--json")
	var shown struct {
		Transcript []struct {
			Role    string `json:"role"`
			Content []struct {
				Type string `json:"type"`
				Name string `json:"name"`
			} `json:"content"`
		} `json:"transcript"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &shown) != nil || len(shown.Transcript) < 3 {
		t.Fatalf("show --json: exit %d\n%s\n%s", code, out, errOut)
	}

	text, errOut, code := deputy(t, ws, nil, "show", res.ID)
	if code != 0 || errOut != "" {
		t.Fatalf("show: exit %d: %s", code, errOut)
	}
	header := regexp.MustCompile(`^` + regexp.QuoteMeta(res.ID) + ` +root +completed\n`)
	if !header.MatchString(text) || !strings.Contains(text, fmt.Sprintf("transcript (%d messages)\n", len(shown.Transcript))) {
		t.Errorf("show: no header or transcript count:\n%s", text)
	}
	// The task opens the transcript; every tool call of the JSON transcript
	// has its line; the answer closes the output.
	if !regexp.MustCompile(`(?m)^ +0 user +count files$`).MatchString(text) {
		t.Errorf("show: no task line:\n%s", text)
	}
	calls := 0
	for i, m := range shown.Transcript {
		for _, b := range m.Content {
			if b.Type == "tool_use" {
				calls++
				line := regexp.MustCompile(fmt.Sprintf(`(?m)^ *%d %s +call %s `, i, m.Role, regexp.QuoteMeta(b.Name)))
				if !line.MatchString(text) {
					t.Errorf("show: no line for message %d's call of %s:\n%s", i, b.Name, text)
				}
			}
		}
	}
	if n := len(regexp.MustCompile(`(?m)^ *\d+ assistant call `).FindAllString(text, -1)); calls == 0 || n != calls {
		t.Errorf("show: %d call lines, the JSON transcript has %d calls", n, calls)
	}
	if !strings.HasSuffix(text, "\nresult\n"+res.Answer+"\n") {
		t.Errorf("show: does not end with the answer:\n%s", text)
	}

	// A child names its parent.
	text, errOut, code = deputy(t, ws, nil, "show", child)
	if code != 0 || !strings.Contains(text, "parent   "+res.ID+"\n") || !strings.Contains(text, "explorer") {
		t.Errorf("show %s: exit %d\n%s\n%s", child, code, text, errOut)
	}
}

// TestOneEnginePerDatabase: while another process runs instances on a
// database, a second `deputy run` or worker is refused (it would take over
// the first one's live runs), and a detached run is still queued.
func TestOneEnginePerDatabase(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	db := filepath.Join(ws, "deputy.db")
	env := []string{"DEPUTY_DB=" + db, "DEPUTY_FAKE_LATENCY=off"}
	if _, errOut, code := deputy(t, ws, env, "run", "-q", "--model", "fake", "first"); code != 0 {
		t.Fatalf("first run: %d %s", code, errOut)
	}
	// Hold the engine lock as a running engine does.
	f, err := os.OpenFile(db+".engine.lock", os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"run", "-q", "--model", "fake", "second"}, {"worker", "-q", "--until-idle"}} {
		_, errOut, code := deputy(t, ws, env, args...)
		if code != exitUsage || !strings.Contains(errOut, "another deputy process") || !strings.Contains(errOut, "--detach") {
			t.Errorf("%s while the engine is held: exit %d: %s", args[0], code, errOut)
		}
	}
	out, errOut, code := deputy(t, ws, env, "run", "--detach", "--model", "fake", "queued")
	if code != 0 || !strings.HasPrefix(out, "i-") {
		t.Fatalf("detach while the engine is held: exit %d: %s %s", code, out, errOut)
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	if _, errOut, code := deputy(t, ws, env, "worker", "-q", "--until-idle"); code != 0 {
		t.Fatalf("worker after the lock: %d %s", code, errOut)
	}
	out, _, _ = deputy(t, ws, env, "show", "--json", strings.TrimSpace(out))
	if !strings.Contains(out, `"state": "completed"`) {
		t.Errorf("the queued run did not complete: %s", out)
	}
}
