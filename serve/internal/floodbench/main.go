// Command floodbench re-measures issue 16, item 5: a real `deputy serve`
// process, an agent on `--model fake` making bash calls, and 20,100
// unauthenticated slow connections from two attacker processes (10,050
// each, as the attack had: one process's descriptor limit is
// 20,000). It measures the latency of authenticated requests during the
// flood, on a keep-alive connection and on a fresh connection each, the
// server's open descriptors, and whether any tool call failed. It prints
// one JSON line per run and a last one with the medians.
//
//	go build -o /tmp/deputy ./cmd/deputy
//	go run ./serve/internal/floodbench -deputy /tmp/deputy [-mode body|headers] [-runs 3]
//
// An attacker slot opens a connection and trickles one byte every -drip:
// of the body (-mode body: the POST /api/instances with
// Content-Length 100000 and no token) or of the headers (-mode headers:
// headers that never end, which no authentication can refuse early).
// When the server closes it, the slot reconnects after -reconnect.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	var o opts
	flag.StringVar(&o.deputy, "deputy", "deputy", "the deputy binary to serve")
	flag.StringVar(&o.mode, "mode", "body", "what the attackers trickle: body or headers")
	flag.IntVar(&o.procs, "procs", 2, "attacker processes")
	flag.IntVar(&o.conns, "conns", 10050, "connections per attacker process")
	flag.DurationVar(&o.drip, "drip", 2*time.Second, "an attacker connection sends a byte this often")
	flag.DurationVar(&o.reconnect, "reconnect", 2*time.Second, "an attacker slot reconnects this long after the server closed it")
	flag.DurationVar(&o.duration, "duration", 30*time.Second, "how long to measure under the flood")
	flag.IntVar(&o.runs, "runs", 3, "runs; the last line has the medians")
	flag.IntVar(&o.maxConns, "max-conns", 0, "deputy serve --max-conns (0: its default)")
	flag.BoolVar(&o.niceAttackers, "nice-attackers", false, "run the attackers at nice 19, as if they were on another machine: their CPU is then not the server's (deputy serve and the measuring client run at this process's priority)")
	attack := flag.Bool("attack", false, "internal: be an attacker process")
	flag.StringVar(&o.addr, "addr", "", "internal: the server's address (attacker)")
	flag.IntVar(&o.ipBase, "ip-base", 0, "internal: the attacker's source addresses are 127.ip-base.*.*")
	flag.Parse()
	if *attack {
		runAttacker(o)
		return
	}
	if err := coordinate(o); err != nil {
		fmt.Fprintln(os.Stderr, "floodbench:", err)
		os.Exit(1)
	}
}

type opts struct {
	deputy, mode, addr        string
	procs, conns, runs        int
	maxConns, ipBase          int
	drip, reconnect, duration time.Duration
	niceAttackers             bool
}

// --- the attacker -------------------------------------------------------

// attackStats is an attacker's status line, once a second on stdout.
type attackStats struct {
	Open       int64 `json:"open"`        // connections open now
	Dials      int64 `json:"dials"`       // connections opened so far
	DialErrors int64 `json:"dial_errors"` // failed dials
	Closed     int64 `json:"closed"`      // connections the server closed (or answered)
}

func runAttacker(o opts) {
	var st struct{ open, dials, dialErrs, closed atomic.Int64 }
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() { // the coordinator closes our stdin to stop us, or dies
		io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	var prefix string
	switch o.mode {
	case "body":
		prefix = "POST /api/instances HTTP/1.1\r\nHost: " + o.addr + "\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"
	case "headers":
		prefix = "POST /api/instances HTTP/1.1\r\nHost: " + o.addr + "\r\nX-Slow: "
	default:
		fmt.Fprintln(os.Stderr, "attacker: unknown mode", o.mode)
		os.Exit(2)
	}
	dialing := make(chan struct{}, 256) // a ramp, not a SYN flood
	var wg sync.WaitGroup
	for i := range o.conns {
		// 250 × 250 source addresses: 20,100 connections and their
		// TIME_WAITs never run out of ephemeral ports.
		src := &net.TCPAddr{IP: net.IPv4(127, byte(o.ipBase), byte(i/250%250), byte(1+i%250))}
		wg.Go(func() {
			d := net.Dialer{LocalAddr: src, Timeout: 10 * time.Second}
			buf := make([]byte, 256)
			for ctx.Err() == nil {
				select {
				case dialing <- struct{}{}:
				case <-ctx.Done():
					return
				}
				c, err := d.DialContext(ctx, "tcp", o.addr)
				<-dialing
				if err != nil {
					st.dialErrs.Add(1)
					sleep(ctx, o.reconnect)
					continue
				}
				st.dials.Add(1)
				st.open.Add(1)
				unhook := context.AfterFunc(ctx, func() { c.Close() })
				_, err = io.WriteString(c, prefix)
				// Spread the drips over the interval.
				next := time.Now().Add(rand.N(o.drip))
				for err == nil {
					c.SetReadDeadline(next)
					if _, err = c.Read(buf); err == nil {
						err = errors.New("answered") // a 401, a 408: the server is done with us
					} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
						_, err = c.Write([]byte("a"))
						next = next.Add(o.drip)
					}
				}
				unhook()
				c.Close()
				st.open.Add(-1)
				if ctx.Err() == nil {
					st.closed.Add(1)
				}
				sleep(ctx, o.reconnect)
			}
		})
	}
	enc := json.NewEncoder(os.Stdout)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for ctx.Err() == nil {
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
		enc.Encode(attackStats{st.open.Load(), st.dials.Load(), st.dialErrs.Load(), st.closed.Load()})
	}
	wg.Wait()
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}

// --- the coordinator ----------------------------------------------------

// latency is one client's figures.
type latency struct {
	N      int     `json:"n"`
	Errors int     `json:"errors"`
	P50ms  float64 `json:"p50_ms"`
	P99ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// figure is one run's JSON line.
type figure struct {
	Run            any     `json:"run"`
	Mode           string  `json:"mode"`
	NiceAttackers  bool    `json:"nice_attackers"`
	AttackConns    int     `json:"attack_conns"`
	NofileServer   int     `json:"server_nofile"`
	Baseline       latency `json:"baseline_keepalive"` // before the flood
	KeepAlive      latency `json:"auth_keepalive"`     // under the flood
	Fresh          latency `json:"auth_fresh_conn"`    // under the flood, a new connection each
	AttackOpenMax  int64   `json:"attack_open_max"`    // attacker connections open at once, at most
	AttackOpenMean float64 `json:"attack_open_mean"`
	AttackDials    int64   `json:"attack_dials"`
	AttackClosed   int64   `json:"attack_closed_by_server"`
	ServerFDsMax   int     `json:"server_fds_max"`
	ServerEMFILE   int     `json:"server_emfile_log_lines"`
	Instances      int     `json:"agent_instances"`
	ToolCalls      int     `json:"tool_calls"`
	ToolErrors     int     `json:"tool_errors"`
	ToolFDErrors   int     `json:"tool_fd_errors"`
	AgentFailed    int     `json:"agent_runs_not_completed"`
	ServerCPU      float64 `json:"server_cpu_cores"`    // under the flood
	AttackCPU      float64 `json:"attackers_cpu_cores"` // under the flood
	LoadAvg        float64 `json:"loadavg_1m"`          // the machine's, at the end of the flood
}

const scenario = `rules:
  - match: {turn: "1-40"}
    tool_calls: [{name: bash, input: {command: "cat /dev/null; ls /proc/self/fd | wc -l"}}]
default:
  text: "done"
`

var fdError = regexp.MustCompile(`(?i)too many open files|EMFILE|ENFILE`)

func coordinate(o opts) error {
	if o.procs*o.conns > 250*250*254 {
		return errors.New("too many connections for the source addresses")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	var figs []figure
	for run := range o.runs {
		f, err := oneRun(o, self, run)
		if err != nil {
			return fmt.Errorf("run %d: %w", run+1, err)
		}
		f.Run = run + 1
		enc.Encode(f)
		figs = append(figs, f)
	}
	enc.Encode(medians(figs))
	return nil
}

// oneRun is one measured run, each on its own server: the agent starts
// calling tools, the latency is measured before the flood and under it,
// and the agent's record is read back once the flood is over.
func oneRun(o opts, self string, run int) (figure, error) {
	f := figure{Mode: o.mode, NiceAttackers: o.niceAttackers, AttackConns: o.procs * o.conns}
	dir, err := os.MkdirTemp("", "floodbench")
	if err != nil {
		return f, err
	}
	defer os.RemoveAll(dir)
	srv, err := startServer(o, dir)
	if err != nil {
		return f, err
	}
	defer srv.stop()
	f.NofileServer = procNofile(srv.pid())
	c := newClient(srv.addr, srv.token)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ag := startAgent(ctx, c)

	f.Baseline = measure(5*time.Second, 10*time.Millisecond, c.probe(c.keep))

	fl, err := startFlood(self, o, srv.addr, run)
	defer fl.stop()
	if err != nil {
		return f, err
	}
	fl.awaitRamp(int64(f.AttackConns), 60*time.Second)
	fmt.Fprintf(os.Stderr, "run %d: flood up (%+v); measuring %v\n", run+1, fl.total(), o.duration)
	measureFlood(ctx, &f, o.duration, srv.pid(), fl, c)
	fl.stop()

	cancel()
	ids := ag.wait()
	for _, id := range ids {
		if err := tallyAgentRun(&f, c, id); err != nil {
			return f, err
		}
	}
	f.Instances = len(ids)
	f.ServerEMFILE = int(srv.emfile.Load())
	return f, nil
}

// server is the `deputy serve` process under test, with what its stderr
// has told so far.
type server struct {
	cmd         *exec.Cmd
	addr, token string
	emfile      atomic.Int64 // log lines reporting descriptor exhaustion
}

// startServer starts `deputy serve` on a fresh database in dir, with the
// agent's scenario and a token file, and waits until it listens. The
// caller stops it; if it never gets that far, startServer does.
func startServer(o opts, dir string) (*server, error) {
	if err := os.WriteFile(filepath.Join(dir, "scenario.yaml"), []byte(scenario), 0o644); err != nil {
		return nil, err
	}
	args := []string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "deputy.db"), "--model", "fake",
		"--scenario", filepath.Join(dir, "scenario.yaml"), "--workspace", dir, "--token-file", filepath.Join(dir, "token")}
	if o.maxConns > 0 {
		args = append(args, "--max-conns", fmt.Sprint(o.maxConns))
	}
	s := &server{cmd: exec.Command(o.deputy, args...)}
	s.cmd.Env = append(os.Environ(), "DEPUTY_FAKE_LATENCY=off")
	s.cmd.Dir = dir
	stderr, _ := s.cmd.StderrPipe()
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	addrc := make(chan string, 1)
	go s.watchLog(stderr, addrc)
	select {
	case s.addr = <-addrc:
	case <-time.After(60 * time.Second):
		s.stop()
		return nil, errors.New("deputy serve did not start")
	}
	tok, err := os.ReadFile(filepath.Join(dir, "token"))
	if err != nil {
		s.stop()
		return nil, err
	}
	s.token = strings.TrimSpace(string(tok))
	return s, nil
}

// watchLog reads the server's stderr to its end: the address it listens
// on goes to addrc, and descriptor exhaustion is counted (and the first
// few lines shown) because the flood's whole point is to provoke it.
func (s *server) watchLog(stderr io.Reader, addrc chan<- string) {
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		line := sc.Text()
		if a, ok := strings.CutPrefix(line, "deputy serve: listening on http://"); ok {
			addrc <- strings.Fields(a)[0]
		}
		if fdError.MatchString(line) {
			if s.emfile.Add(1) <= 3 {
				fmt.Fprintln(os.Stderr, "server:", line)
			}
		}
	}
}

func (s *server) pid() int { return s.cmd.Process.Pid }

// stop asks the server to shut down and kills it if it has not within
// 15 s, so a wedged server cannot hang the benchmark.
func (s *server) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
}

// probePath is what the authenticated clients ask for: cheap, but
// through the token check and the store.
const probePath = "/api/instances?limit=1"

func newClient(addr, token string) *client {
	return &client{base: "http://" + addr, token: token,
		keep:  &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4}},
		fresh: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
}

// probe is one authenticated request on h, for measure.
func (c *client) probe(h *http.Client) func() error {
	return func() error { return c.get(h, probePath, nil) }
}

// agentRuns is the agent under the flood: one run after another, each 40
// bash calls, from before the flood until after it. Its runs' ids are
// kept for the tally.
type agentRuns struct {
	wg  sync.WaitGroup
	mu  sync.Mutex
	ids []string
}

// startAgent starts agent runs, one after another, until ctx ends.
func startAgent(ctx context.Context, c *client) *agentRuns {
	a := &agentRuns{}
	a.wg.Go(func() {
		for ctx.Err() == nil {
			a.runOne(ctx, c)
		}
	})
	return a
}

// runOne starts one agent run and polls it until it ends (or ctx does).
// A failed start is retried a second later: the flood may be what
// refused it.
func (a *agentRuns) runOne(ctx context.Context, c *client) {
	var in struct{ ID string }
	if err := c.post(`{"task": "run bash under the flood", "max_turns": 60}`, &in); err != nil {
		fmt.Fprintln(os.Stderr, "start an agent:", err)
		sleep(ctx, time.Second)
		return
	}
	a.mu.Lock()
	a.ids = append(a.ids, in.ID)
	a.mu.Unlock()
	for ctx.Err() == nil {
		var st struct{ State string }
		if c.get(c.keep, "/api/instances/"+in.ID, &st) == nil && terminal(st.State) {
			return
		}
		sleep(ctx, 200*time.Millisecond)
	}
}

// wait waits for the agent (its context cancelled) and returns its runs.
func (a *agentRuns) wait() []string {
	a.wg.Wait()
	return a.ids
}

// flood is one run's attacker processes.
type flood []*attacker

// startFlood starts o.procs attackers, each on its own source addresses
// (distinct across runs, so one run's TIME_WAITs do not meet the next's).
// On an error the attackers already started are returned, for stop.
func startFlood(self string, o opts, addr string, run int) (flood, error) {
	var fl flood
	for p := range o.procs {
		a, err := startAttacker(self, o, addr, 10+run*o.procs+p)
		if err != nil {
			return fl, err
		}
		fl = append(fl, a)
	}
	return fl, nil
}

// total is the attackers' latest status lines, added up.
func (fl flood) total() (st attackStats) {
	for _, a := range fl {
		s := a.last()
		st.Open += s.Open
		st.Dials += s.Dials
		st.DialErrors += s.DialErrors
		st.Closed += s.Closed
	}
	return st
}

// awaitRamp waits until every slot has connected once (n dials), or for
// limit: measuring a flood still ramping up would flatter the server.
func (fl flood) awaitRamp(n int64, limit time.Duration) {
	for deadline := time.Now().Add(limit); fl.total().Dials < n && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
	}
}

func (fl flood) stop() {
	for _, a := range fl {
		a.stop()
	}
}

// measureFlood measures under the flood for d: the two clients, the
// server's descriptors and the attackers' open connections side by side,
// then the CPU each side spent and the attackers' totals.
func measureFlood(ctx context.Context, f *figure, d time.Duration, pid int, fl flood, c *client) {
	cpu0, acpu0, t0 := cpuSeconds(pid), attackCPU(fl), time.Now()
	mctx, mcancel := context.WithTimeout(ctx, d)
	var wg sync.WaitGroup
	wg.Go(func() { sampleFlood(mctx, f, pid, fl) })
	wg.Go(func() {
		f.Fresh = measure(d, 100*time.Millisecond, c.probe(c.fresh))
	})
	f.KeepAlive = measure(d, 10*time.Millisecond, c.probe(c.keep))
	mcancel()
	wg.Wait()
	el := time.Since(t0).Seconds()
	f.ServerCPU = (cpuSeconds(pid) - cpu0) / el
	f.AttackCPU = (attackCPU(fl) - acpu0) / el
	f.LoadAvg = loadAvg()
	st := fl.total()
	f.AttackDials, f.AttackClosed = st.Dials, st.Closed
}

// sampleFlood samples, every 250 ms until ctx ends, the server's open
// descriptors and the attackers' open connections: their peaks and the
// connections' mean go into f.
func sampleFlood(ctx context.Context, f *figure, pid int, fl flood) {
	var openSum, openN int64
	for ctx.Err() == nil {
		f.ServerFDsMax = max(f.ServerFDsMax, countFDs(pid))
		st := fl.total()
		f.AttackOpenMax = max(f.AttackOpenMax, st.Open)
		openSum += st.Open
		openN++
		sleep(ctx, 250*time.Millisecond)
	}
	if openN > 0 {
		f.AttackOpenMean = float64(openSum) / float64(openN)
	}
}

// transcriptBlock is a transcript content block, as much of it as the
// tally reads.
type transcriptBlock struct {
	Type    string `json:"type"`
	Text    string `json:"text"`
	IsError bool   `json:"is_error"`
}

// tallyAgentRun adds one agent run's record to f: whether it completed,
// and each of its tool calls, failed ones and descriptor errors.
func tallyAgentRun(f *figure, c *client, id string) error {
	var in struct{ State string }
	if err := c.get(c.keep, "/api/instances/"+id, &in); err != nil {
		return err
	}
	// The run still going is cancelled, which can interrupt its last
	// call: its errors are not the flood's (its descriptor errors
	// still count).
	cancelled := !terminal(in.State)
	if cancelled {
		c.postPath("/api/instances/"+id+"/cancel", "")
	} else if in.State != "completed" {
		f.AgentFailed++
	}
	var tr struct {
		Messages []struct {
			Content []transcriptBlock `json:"content"`
		} `json:"messages"`
	}
	if err := c.get(c.keep, "/api/instances/"+id+"/transcript?limit=1000", &tr); err != nil {
		return err
	}
	for _, m := range tr.Messages {
		for _, b := range m.Content {
			if b.Type == "tool_result" {
				f.countToolResult(id, b, cancelled)
			}
		}
	}
	return nil
}

// countToolResult counts one tool result of agent run id; the first few
// errors are shown, since a count alone does not say what failed.
func (f *figure) countToolResult(id string, b transcriptBlock, cancelled bool) {
	f.ToolCalls++
	if b.IsError && !cancelled {
		if f.ToolErrors++; f.ToolErrors <= 3 {
			fmt.Fprintf(os.Stderr, "tool error in %s: %.200s\n", id, b.Text)
		}
	}
	if fdError.MatchString(b.Text) {
		f.ToolFDErrors++
	}
}

func terminal(s string) bool {
	switch s {
	case "completed", "failed", "timed_out", "cancelled":
		return true
	}
	return false
}

// measure calls do every interval (sequentially: a slow answer delays the
// next call, as it would a client's) for d.
func measure(d, every time.Duration, do func() error) latency {
	var l latency
	var ds []time.Duration
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		start := time.Now()
		if err := do(); err != nil {
			l.Errors++
			if l.Errors <= 3 {
				fmt.Fprintln(os.Stderr, "authenticated request:", err)
			}
		} else {
			ds = append(ds, time.Since(start))
		}
		time.Sleep(max(0, every-time.Since(start)))
	}
	l.N = len(ds)
	if len(ds) > 0 {
		slices.Sort(ds)
		ms := func(q float64) float64 {
			return float64(ds[min(len(ds)-1, int(q*float64(len(ds))))].Microseconds()) / 1000
		}
		l.P50ms, l.P99ms, l.MaxMs = ms(0.50), ms(0.99), ms(1)
	}
	return l
}

type client struct {
	base, token string
	keep, fresh *http.Client
}

func (c *client) do(h *http.Client, method, path, body string, v any) error {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.base+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(b))
	}
	if v != nil {
		return json.Unmarshal(b, v)
	}
	return nil
}

func (c *client) get(h *http.Client, path string, v any) error { return c.do(h, "GET", path, "", v) }
func (c *client) post(body string, v any) error {
	return c.do(c.keep, "POST", "/api/instances", body, v)
}
func (c *client) postPath(path, body string) error { return c.do(c.keep, "POST", path, body, nil) }

// attacker is a child process of floodbench -attack.
type attacker struct {
	cmd   *exec.Cmd
	stdin io.Closer
	mu    sync.Mutex
	stats attackStats
	done  chan struct{}
	once  sync.Once
}

func startAttacker(self string, o opts, addr string, ipBase int) (*attacker, error) {
	args := []string{self, "-attack", "-addr", addr, "-mode", o.mode, "-conns", fmt.Sprint(o.conns),
		"-drip", o.drip.String(), "-reconnect", o.reconnect.String(), "-ip-base", fmt.Sprint(ipBase)}
	if o.niceAttackers {
		// An increment of 39 lands on 19, the lowest priority, whatever
		// this process's is; nice(1) execs, so the attacker is the pid.
		args = append([]string{"nice", "-n", "39"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stderr = os.Stderr
	out, _ := cmd.StdoutPipe()
	in, _ := cmd.StdinPipe()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	a := &attacker{cmd: cmd, stdin: in, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		dec := json.NewDecoder(out)
		for {
			var s attackStats
			if dec.Decode(&s) != nil {
				return
			}
			a.mu.Lock()
			a.stats = s
			a.mu.Unlock()
		}
	}()
	return a, nil
}

func (a *attacker) last() attackStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stats
}

func (a *attacker) stop() {
	a.once.Do(func() {
		a.stdin.Close()
		a.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-a.done:
		case <-time.After(20 * time.Second):
			a.cmd.Process.Kill()
		}
		a.cmd.Wait()
	})
}

// cpuSeconds is a process's user and system CPU time so far.
func cpuSeconds(pid int) float64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	// The fields after the command's closing parenthesis: utime and
	// stime are the 12th and 13th, in clock ticks (100 a second).
	_, rest, _ := strings.Cut(string(b), ") ")
	fs := strings.Fields(rest)
	if len(fs) < 13 {
		return 0
	}
	var u, s float64
	fmt.Sscan(fs[11], &u)
	fmt.Sscan(fs[12], &s)
	return (u + s) / 100
}

func attackCPU(as []*attacker) float64 {
	t := 0.0
	for _, a := range as {
		t += cpuSeconds(a.cmd.Process.Pid)
	}
	return t
}

func loadAvg() float64 {
	b, _ := os.ReadFile("/proc/loadavg")
	var l float64
	fmt.Sscan(string(b), &l)
	return l
}

func countFDs(pid int) int {
	es, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(es)
}

// procNofile is a process's soft descriptor limit, from /proc.
func procNofile(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "Max open files") {
			var n int
			fmt.Sscan(strings.Fields(line)[3], &n)
			return n
		}
	}
	return 0
}

// medians is the summary line: each figure's median over the runs (the
// counts of failures are summed instead: one is too many).
func medians(figs []figure) figure {
	med := func(get func(figure) float64) float64 {
		v := make([]float64, len(figs))
		for i, f := range figs {
			v[i] = get(f)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	lat := func(get func(figure) latency) latency {
		return latency{
			N:      int(med(func(f figure) float64 { return float64(get(f).N) })),
			Errors: int(sum(figs, func(f figure) int { return get(f).Errors })),
			P50ms:  med(func(f figure) float64 { return get(f).P50ms }),
			P99ms:  med(func(f figure) float64 { return get(f).P99ms }),
			MaxMs:  med(func(f figure) float64 { return get(f).MaxMs }),
		}
	}
	m := figs[0]
	m.Run = "median"
	m.Baseline = lat(func(f figure) latency { return f.Baseline })
	m.KeepAlive = lat(func(f figure) latency { return f.KeepAlive })
	m.Fresh = lat(func(f figure) latency { return f.Fresh })
	m.AttackOpenMax = int64(med(func(f figure) float64 { return float64(f.AttackOpenMax) }))
	m.AttackOpenMean = med(func(f figure) float64 { return f.AttackOpenMean })
	m.AttackDials = int64(med(func(f figure) float64 { return float64(f.AttackDials) }))
	m.AttackClosed = int64(med(func(f figure) float64 { return float64(f.AttackClosed) }))
	m.ServerFDsMax = int(med(func(f figure) float64 { return float64(f.ServerFDsMax) }))
	m.ServerEMFILE = sum(figs, func(f figure) int { return f.ServerEMFILE })
	m.Instances = sum(figs, func(f figure) int { return f.Instances })
	m.ToolCalls = sum(figs, func(f figure) int { return f.ToolCalls })
	m.ToolErrors = sum(figs, func(f figure) int { return f.ToolErrors })
	m.ToolFDErrors = sum(figs, func(f figure) int { return f.ToolFDErrors })
	m.AgentFailed = sum(figs, func(f figure) int { return f.AgentFailed })
	m.ServerCPU = med(func(f figure) float64 { return f.ServerCPU })
	m.AttackCPU = med(func(f figure) float64 { return f.AttackCPU })
	m.LoadAvg = med(func(f figure) float64 { return f.LoadAvg })
	return m
}

func sum(figs []figure, get func(figure) int) int {
	n := 0
	for _, f := range figs {
		n += get(f)
	}
	return n
}
