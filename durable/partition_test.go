//go:build linux

package durable_test

// The partition test: the database and two workers on three hosts, each a
// network namespace joined to the database's by a veth pair with
// loopback-range addresses (127.0.1.x, 127.0.2.x; route_localnet lets them
// off lo). The "database host" holds this test's listeners: a proxy to the
// tests' Postgres, which notes when each worker last sent it anything, and
// the workers' model servers. Worker w1's link is cut mid-run: its runs
// must move to w2 once its lease runs out, and w1 must give up (exit 5)
// before that, writing nothing after the cut, not even once the link is
// back.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/deputy-run/deputy/durable"
	"github.com/deputy-run/deputy/instance"
	"github.com/deputy-run/deputy/internal/pgtest"
	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/store"
)

const partitionScenario = `
latency: {first_byte: 300ms}
rules:
  - match: {system: "read-only explorer", turn: 1}
    tool_calls: [{name: glob, input: {pattern: "*"}}]
  - match: {system: "read-only explorer"}
    text: "looked at {{.Task}}"
  - match: {turn: 1}
    tool_calls: [{name: spawn_subagent, repeat: 24, input: {subagent_type: explorer, task: "look {{.I}}", background: true}}]
default:
  text: "noted"
`

// netns runs ip (or sh) inside namespace ns, or in this one when ns is "".
func netns(t *testing.T, ns string, args ...string) {
	t.Helper()
	if ns != "" {
		args = append([]string{"netns", "exec", ns}, args...)
	}
	cmd := exec.Command("ip", args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// listenIn opens a TCP listener inside network namespace ns: a socket
// belongs to the namespace of the thread that made it, so one thread
// enters ns for the call and comes back.
func listenIn(ns, addr string) (net.Listener, error) {
	type result struct {
		ln  net.Listener
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: err}
			return
		}
		defer orig.Close()
		target, err := os.Open("/run/netns/" + ns)
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: err}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- result{err: err}
			return
		}
		ln, lerr := net.Listen("tcp", addr)
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			// The thread stays locked and dies with this goroutine:
			// Go retires it rather than reuse it in the wrong namespace.
			done <- result{ln, lerr}
			return
		}
		runtime.UnlockOSThread()
		done <- result{ln, lerr}
	}()
	r := <-done
	return r.ln, r.err
}

// pgProxy forwards connections to Postgres and notes the last time each
// client host sent anything.
type pgProxy struct {
	target string
	mu     sync.Mutex
	last   map[string]time.Time // client IP → last bytes received
}

func (p *pgProxy) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		go func() { _, _ = io.Copy(c, s); c.Close() }()
		go func() {
			defer s.Close()
			buf := make([]byte, 32<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					p.mu.Lock()
					p.last[host] = time.Now()
					p.mu.Unlock()
					if _, err := s.Write(buf[:n]); err != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

func (p *pgProxy) lastFrom(host string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last[host]
}

func TestPartitionTakeover(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		if os.Getenv("DEPUTY_REQUIRE_NETNS") != "" {
			t.Fatal("DEPUTY_REQUIRE_NETNS is set, but network namespaces need root")
		}
		t.Skip("network namespaces need root (set DEPUTY_REQUIRE_NETNS to make this a failure)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		if os.Getenv("DEPUTY_REQUIRE_NETNS") != "" {
			t.Fatal("DEPUTY_REQUIRE_NETNS is set, but ip (iproute2) is missing")
		}
		t.Skip("ip (iproute2) is missing")
	}
	bin := buildDeputy(t)
	pgURL := pgtest.URL(t)
	u, err := neturl.Parse(pgURL)
	if err != nil {
		t.Fatal(err)
	}

	// Three hosts: db, w1, w2.
	tag := make([]byte, 3)
	_, _ = rand.Read(tag)
	id := hex.EncodeToString(tag)
	db, ns := "dp"+id+"db", map[string]string{"w1": "dp" + id + "w1", "w2": "dp" + id + "w2"}
	netns(t, "", "netns", "add", db)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", db).Run() })
	localnet := func(n, dev string) {
		for _, d := range []string{"all", dev} {
			cmd := exec.Command("ip", "netns", "exec", n, "sh", "-c", "echo 1 > /proc/sys/net/ipv4/conf/"+d+"/route_localnet")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("route_localnet in %s: %v\n%s", n, err, out)
			}
		}
	}
	for i, w := range []string{"w1", "w2"} {
		n := ns[w]
		dbEnd, wEnd := fmt.Sprintf("dp%sd%d", id, i+1), fmt.Sprintf("dp%sw%d", id, i+1)
		netns(t, "", "netns", "add", n)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", n).Run() })
		netns(t, "", "link", "add", dbEnd, "type", "veth", "peer", "name", wEnd)
		netns(t, "", "link", "set", dbEnd, "netns", db)
		netns(t, "", "link", "set", wEnd, "netns", n)
		netns(t, db, "ip", "addr", "add", fmt.Sprintf("127.0.%d.1/24", i+1), "dev", dbEnd)
		netns(t, db, "ip", "link", "set", dbEnd, "up")
		localnet(db, dbEnd)
		netns(t, n, "ip", "addr", "add", fmt.Sprintf("127.0.%d.2/24", i+1), "dev", wEnd)
		netns(t, n, "ip", "link", "set", wEnd, "up")
		localnet(n, wEnd)
	}

	// The database host's listeners: Postgres (through the proxy) and a
	// model server per worker.
	s, err := fake.ParseScenario([]byte(partitionScenario), "partition.yaml")
	if err != nil {
		t.Fatal(err)
	}
	proxy := &pgProxy{target: u.Host, last: map[string]time.Time{}}
	model := fake.NewServer(fake.Options{Responder: s})
	for i := 1; i <= 2; i++ {
		pl, err := listenIn(db, fmt.Sprintf("127.0.%d.1:5432", i))
		if err != nil {
			t.Fatalf("listen in %s: %v", db, err)
		}
		t.Cleanup(func() { pl.Close() })
		go proxy.serve(pl)
		ml, err := listenIn(db, fmt.Sprintf("127.0.%d.1:8080", i))
		if err != nil {
			t.Fatalf("listen in %s: %v", db, err)
		}
		hs := &http.Server{Handler: model}
		go func() { _ = hs.Serve(ml) }()
		t.Cleanup(func() { hs.Close() })
	}

	ws := t.TempDir()
	type proc struct {
		cmd    *exec.Cmd
		out    bytes.Buffer
		exited chan struct{}
		at     time.Time
	}
	procs := map[string]*proc{}
	for i, w := range []string{"w1", "w2"} {
		wu := *u
		wu.Host = fmt.Sprintf("127.0.%d.1:5432", i+1)
		p := &proc{exited: make(chan struct{})}
		p.cmd = exec.Command("ip", "netns", "exec", ns[w], bin, "worker", "-q", "--workspace", ws, "--executor-id", w,
			"--max-runs", "3", "--lease", "6s")
		p.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "DEPUTY_DB=" + wu.String(),
			"ANTHROPIC_API_KEY=test-key", "DEPUTY_LOG=info", fmt.Sprintf("ANTHROPIC_BASE_URL=http://127.0.%d.1:8080", i+1)}
		p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { _ = p.cmd.Wait(); p.at = time.Now(); close(p.exited) }()
		t.Cleanup(func() { _ = p.cmd.Process.Signal(syscall.SIGKILL); <-p.exited })
		procs[w] = p
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	st, err := store.Open(ctx, pgURL, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var root string
	until := func(what string, cond func() bool) {
		t.Helper()
		if !eventually(ctx, st.EventsWritten, func() bool {
			select {
			case <-procs["w2"].exited:
				t.Fatalf("w2 died:\n%s", procs["w2"].out.String())
			default:
			}
			return cond()
		}) {
			t.Fatalf("never: %s\n%s\nw1:\n%s\nw2:\n%s", what, diagnose(pgURL, root), procs["w1"].out.String(), procs["w2"].out.String())
		}
	}
	until("both workers live", func() bool {
		ws, err := st.Workers(ctx)
		return err == nil && len(ws) == 2 && ws[0].State == store.WorkerLive && ws[1].State == store.WorkerLive
	})
	run := exec.Command(bin, "run", "--detach", "-q", "--db", pgURL, "--model", "anthropic:fake", "--max-parallel", "100",
		"--workspace", ws, "look around")
	run.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "ANTHROPIC_API_KEY=test-key"}
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("run --detach: %v\n%s", err, out)
	}
	root = strings.TrimSpace(string(out))

	// Cut w1 off while it carries runs.
	until("w1 at work", func() bool {
		ws, err := st.Workers(ctx)
		if err != nil {
			return false
		}
		for _, w := range ws {
			if w.ID == "w1" && w.Load > 0 {
				return true
			}
		}
		return false
	})
	netns(t, ns["w1"], "ip", "link", "set", fmt.Sprintf("dp%sw1", id), "down")
	cut := time.Now()
	var lease time.Time
	if ws, err := st.Workers(ctx); err == nil {
		for _, w := range ws {
			if w.ID == "w1" {
				lease = w.LeaseUntil
			}
		}
	}
	select {
	case <-procs["w1"].exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("w1 never gave up its lease:\n%s", procs["w1"].out.String())
	}
	if code := procs["w1"].cmd.ProcessState.ExitCode(); code != durable.ExitLeaseLost {
		t.Errorf("w1 exited %d, want %d (lost its lease):\n%s", code, durable.ExitLeaseLost, procs["w1"].out.String())
	}
	if !procs["w1"].at.Before(lease) {
		t.Errorf("w1 exited at %v, after its lease ran out at %v", procs["w1"].at, lease)
	}
	netns(t, ns["w1"], "ip", "link", "set", fmt.Sprintf("dp%sw1", id), "up") // the partition heals

	until("the root completed", func() bool {
		in, err := st.GetInstance(ctx, root)
		return err == nil && in.State.Terminal()
	})
	all, err := st.ListInstances(ctx, store.Filter{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 25 {
		t.Errorf("%d instances, want the root and 24 children", len(all))
	}
	for _, in := range all {
		if in.State != instance.Completed {
			t.Errorf("instance %s (%s) ended %s: %s", in.ID, in.Task, in.State, in.Error)
		}
	}
	ws2, err := st.Workers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws2 {
		if w.ID == "w1" && (w.State != store.WorkerGone || w.ClaimedBy != "w2") {
			t.Errorf("w1 %+v: want gone, taken over by w2", w)
		}
	}
	if last := proxy.lastFrom("127.0.1.2"); last.After(cut) {
		t.Errorf("w1 sent the database something at %v, after it was cut off at %v", last, cut)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("timed out")
	}
	_ = procs["w2"].cmd.Process.Signal(syscall.SIGTERM)
	<-procs["w2"].exited
}
