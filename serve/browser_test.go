package serve_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/cost"
	"github.com/deputy-run/deputy/llm"
	"github.com/deputy-run/deputy/serve"
	"github.com/deputy-run/deputy/serve/web"
)

// chromiumPath is Debian's chromium, which CI installs (.ci/run).
const chromiumPath = "/usr/bin/chromium"

// browserScenario: the root spawns two researchers, which each call the
// test's hold tool (it returns when the test says so, so the page is seen
// with both children running), then asks the person a question and
// finishes with the answer. A second task only asks, and is paused and
// cancelled from the page.
const browserScenario = `
latency: {first_byte: 120ms, per_token: 2ms}
rules:
  - match: {system: "field researcher", turn: 1}
    text: "Gathering notes."
    tool_calls: [{name: hold, input: {topic: "{{truncate 60 .Task}}"}}]
  - match: {system: "field researcher"}
    text: "Conclusion: {{index .ToolResults 0}}. Sources: the notes tool."
  - match: {last_user: "Pick a colour", turn: 1}
    tool_calls: [{name: ask_parent, input: {question: "Blue or green?"}}]
  - match: {turn: 1}
    text: "Two researchers will look at this in parallel."
    tool_calls:
      - {name: spawn_subagent, input: {subagent_type: researcher, description: "sources", task: "Survey what changed since the last release."}}
      - {name: spawn_subagent, input: {subagent_type: researcher, description: "risks", task: "List the risks of shipping on a Friday."}}
  - match: {turn: 2}
    text: "Both reports are in. One decision is yours."
    tool_calls: [{name: ask_parent, input: {question: "Ship on Friday, or wait until Monday?"}}]
  - match: {turn: 3}
    text: "Release plan ready. Decision: {{index .ToolResults 0}}. Both researchers reported: the changes are listed and the Friday risks are known."
`

// hold is the researchers' one tool: it returns when release is closed.
type hold struct{ release <-chan struct{} }

func (hold) Spec() llm.ToolSpec {
	return llm.ToolSpec{Name: "hold", Description: "Gathers notes on a topic.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"topic":{"type":"string"}},"required":["topic"]}`)}
}
func (hold) ReadOnly() bool { return true }
func (h hold) Run(ctx context.Context, in json.RawMessage) (string, error) {
	var v struct{ Topic string }
	if err := json.Unmarshal(in, &v); err != nil {
		return "", err
	}
	select {
	case <-h.release:
		return "3 notes on " + strings.TrimSuffix(v.Topic, "."), nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// browserContext starts headless chromium with the flags this machine's
// closed network needs (without the background-networking ones the browser
// keeps dialing out and connections are refused) and a fresh profile.
func browserContext(t *testing.T) context.Context {
	t.Helper()
	if _, err := exec.LookPath(chromiumPath); err != nil {
		if os.Getenv("DEPUTY_REQUIRE_BROWSER") != "" {
			t.Fatalf("chromium is not installed at %s (apt-get install chromium): %v", chromiumPath, err)
		}
		t.Skipf("chromium is not installed at %s, so the dashboard cannot be tested: apt-get install chromium", chromiumPath)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first action starts the browser, bound to ctx (no deadline).
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1366, 850)); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// step runs actions with a deadline: a failure to appear is a failure,
// never a pause.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		t.Fatalf("%s: %v\npage: %s", what, err, pageText(ctx))
	}
}

// until waits for a JavaScript condition to hold in the page.
func until(t *testing.T, ctx context.Context, what, js string) {
	t.Helper()
	step(t, ctx, what, func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(50*time.Millisecond),
			chromedp.WithPollingTimeout(0))(ctx, tg)
		return chromedp.Void{}, err
	})
}

func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// pageText is what the page shows, for a failure's message.
func pageText(ctx context.Context) string {
	c, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	s, err := chromedp.Run(c, chromedp.Evaluate[string](`document.body.innerText`))
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	return s
}

// The dashboard in a real browser: sign in with the token, start a fake
// run from the page, watch its tree grow live (two children running, then
// done, then the root asking), answer the question in the page, watch the
// run finish, read a child's transcript and relay, pause and cancel a
// second run with the page's buttons, and sign out. Along the way: the
// session cookie is HttpOnly and SameSite=Strict, the token is in no URL the
// page requested and in no storage, and the page raised no script error and
// no Content-Security-Policy violation. With DEPUTY_SCREENSHOT=path the
// finished run is saved as a PNG (docs/dashboard.png is made so).
func TestDashboardInBrowser(t *testing.T) {
	t.Parallel()
	ctx := browserContext(t)

	release := make(chan struct{})
	var releaseOnce sync.Once
	let := func() { releaseOnce.Do(func() { close(release) }) }
	dir := t.TempDir()
	researcher := &deputy.Definition{Name: "researcher", Description: "Researches one question and reports.",
		SystemPrompt: "You are a field researcher. Gather notes with your tool, then report.", Tools: []string{"hold"}}
	rt, err := deputy.Open(context.Background(), deputy.Options{
		ModelSpec: "fake", Scenario: []byte(browserScenario), FakeLatency: true, DB: filepath.Join(dir, "deputy.db"), Workspace: dir,
		Tools: []deputy.Tool{hold{release}}, Definitions: []*deputy.Definition{researcher},
		Config: &deputy.Config{Prices: cost.Table{"fake": {Input: 3, Output: 15}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.Close(); err != nil {
			t.Error(err)
		}
	})
	t.Cleanup(let) // a failed test must not leave a tool waiting

	var tb [24]byte
	_, _ = rand.Read(tb[:])
	token := hex.EncodeToString(tb[:])
	srv, err := serve.New(serve.Options{Runtime: rt, Token: token, Web: web.Handler()})
	if err != nil {
		t.Fatal(err)
	}
	// The server sees each event stream's Last-Event-ID: a reconnect
	// must carry one.
	var resumes []string
	var resumesMu sync.Mutex
	h := srv.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get("Last-Event-ID"); id != "" && strings.HasSuffix(r.URL.Path, "/events") {
			resumesMu.Lock()
			resumes = append(resumes, r.URL.Path+" "+id)
			resumesMu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Close) // before ts.Close: it ends the open streams ts.Close waits for
	// Before both: the browser goes, and with it any stream it would reopen.
	t.Cleanup(func() { _ = chromedp.Cancel(ctx) })

	// What the page asks for and what goes wrong in it.
	var mu sync.Mutex
	var urls, problems []string
	if err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			urls = append(urls, ev.Request.URL)
		case *cdpruntime.EventExceptionThrown:
			problems = append(problems, "exception: "+ev.ExceptionDetails.Text+" "+exceptionDescription(ev.ExceptionDetails))
		case *log.EventEntryAdded:
			// Failed loads are the 401s the test provokes (the first
			// session check, a wrong token); anything else is a defect.
			if ev.Entry.Level == log.EntryLevelError && ev.Entry.Source != log.EntrySourceNetwork {
				problems = append(problems, "console: "+ev.Entry.Text)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	// Collects violations of the page's Content-Security-Policy (injected
	// by the browser, so the policy does not apply to it).
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `window.__csp = []; document.addEventListener('securitypolicyviolation', e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));` +
			contrastJS,
	}); err != nil {
		t.Fatal(err)
	}

	// Sign in: a wrong token is refused with a message, the right one opens
	// the dashboard and is gone from the field.
	step(t, ctx, "the sign-in form", chromedp.Navigate(ts.URL), chromedp.WaitVisible(chromedp.ID("token")))
	step(t, ctx, "a wrong token", chromedp.SendKeys(chromedp.ID("token"), "not-the-token-at-all"),
		chromedp.Click(chromedp.ID("signin-button")))
	until(t, ctx, "the wrong token's message", `document.getElementById('signin-error').textContent.includes('not the server')`)
	step(t, ctx, "signing in", chromedp.Clear(chromedp.ID("token")), chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.ID("signin-button")), chromedp.WaitVisible(chromedp.ID("runs-empty")))
	if v := eval[string](t, ctx, `document.getElementById('token').value`); v != "" {
		t.Errorf("the token field still holds %d characters after signing in", len(v))
	}
	until(t, ctx, "the live indicator", `document.getElementById('live').dataset.live === 'on'`)

	// A run from the page's form; the tree grows live: two researchers
	// running (they wait in the hold tool), the root waiting for them.
	step(t, ctx, "the new-run form", chromedp.Click(chromedp.ID("new-run-open")), chromedp.WaitVisible(chromedp.ID("nr-task")),
		chromedp.SendKeys(chromedp.ID("nr-task"), "Plan the Friday release"), chromedp.Click(chromedp.ID("nr-submit")),
		chromedp.WaitNotVisible(chromedp.ID("new-run")))
	until(t, ctx, "two children running under a running root", `(() => {
		const root = document.querySelector('#tree > li.node');
		return root && root.dataset.state === 'running' &&
			root.querySelectorAll('li.node[data-depth="1"][data-state="running"]').length === 2 &&
			document.querySelector('#runs li.selected') !== null;
	})()`)
	root := eval[string](t, ctx, `document.getElementById('run-id').textContent`)
	if in, err := rt.Get(context.Background(), root); err != nil || in.Task != "Plan the Friday release" || in.Parent != "" {
		t.Fatalf("the page's run %q: %+v %v", root, in, err)
	}
	kids, err := rt.Children(context.Background(), root)
	if err != nil || len(kids) != 2 {
		t.Fatalf("children %v %v", kids, err)
	}

	// The connections drop (a proxy restarts, say); EventSource reconnects
	// by itself with Last-Event-ID and the page misses nothing. The
	// researchers finish; the root asks, and the page shows the question
	// with an answer box.
	ts.CloseClientConnections()
	let()
	until(t, ctx, "the children completed and the question shown", `(() => {
		const root = document.querySelector('#tree > li.node');
		return root && root.dataset.state === 'asking' &&
			root.querySelectorAll('li.node[data-depth="1"][data-state="completed"]').length === 2 &&
			!document.getElementById('question').hidden &&
			document.getElementById('question-text').textContent === 'Ship on Friday, or wait until Monday?' &&
			document.querySelector('#runs li.selected').dataset.state === 'asking';
	})()`)
	step(t, ctx, "answering", chromedp.SendKeys(chromedp.ID("answer"), "Wait until Monday"),
		chromedp.Click(chromedp.ID("answer-send")))
	until(t, ctx, "the run completed with the answer in its report", `(() => {
		const root = document.querySelector('#tree > li.node');
		return root && root.dataset.state === 'completed' && document.getElementById('question').hidden &&
			document.getElementById('outcome-text').textContent.includes('Decision: Wait until Monday') &&
			document.querySelector('[data-total="instances"] .total-value').textContent === '3' &&
			document.querySelector('#runs li.selected').dataset.state === 'completed';
	})()`)
	resumesMu.Lock()
	resumed := slices.ContainsFunc(resumes, func(s string) bool { return strings.HasPrefix(s, "/api/trees/"+root+"/events ") })
	resumesMu.Unlock()
	if !resumed {
		t.Errorf("the run's stream was not resumed with Last-Event-ID after its connection dropped: %q", resumes)
	}
	in, err := rt.Get(context.Background(), root)
	if err != nil || in.State != deputy.Completed || !strings.Contains(in.Report, "Wait until Monday") {
		t.Fatalf("the run as stored: %+v %v", in, err)
	}
	// The timeline: the root ran, asked, ran again and completed; each
	// child ran and completed.
	until(t, ctx, "the run's timeline", fmt.Sprintf(`(() => {
		const rows = [...document.querySelectorAll('#timeline .tl-row')];
		const root = rows.find((r) => r.dataset.id === %q);
		const kids = rows.filter((r) => r !== root);
		return rows.length === 3 && root && rows[0] === root &&
			root.querySelectorAll('.tl-seg[data-state="running"]').length >= 2 &&
			root.querySelector('.tl-seg[data-state="asking"]') && root.querySelector('.tl-end').dataset.state === 'completed' &&
			kids.every((r) => r.querySelector('.tl-seg[data-state="running"]') && r.querySelector('.tl-end').dataset.state === 'completed');
	})()`, root))
	// The chart drew the run's model calls, and priced them.
	until(t, ctx, "the chart", `document.querySelectorAll('#chart circle.dot-tokens').length >= 5 &&
		document.querySelector('#chart path.line-cost') !== null`)

	// A child's transcript (its hold call and result) and its relay.
	step(t, ctx, "a child's panel", chromedp.Click(chromedp.CSS(`#tree li.node[data-depth="1"] .node-row`)))
	until(t, ctx, "the child's transcript", `(() => {
		const b = document.getElementById('panel-body').textContent;
		return !document.getElementById('panel').hidden && b.includes('hold') && b.includes('3 notes on') &&
			b.includes('Conclusion:');
	})()`)
	step(t, ctx, "the relay tab", chromedp.Click(chromedp.CSS(`.tab[data-tab="relay"]`)))
	until(t, ctx, "the child's relay", `document.querySelector('#panel-body .relay-text') !== null &&
		document.querySelector('#panel-body .relay-text').textContent.includes('Conclusion: 3 notes on')`)

	// A second run, started elsewhere, shows up live; it asks, is paused
	// and then cancelled with the page's buttons (cancel takes two clicks).
	second, err := rt.Start(context.Background(), deputy.Task{Text: "Pick a colour for the logo"})
	if err != nil {
		t.Fatal(err)
	}
	sel := fmt.Sprintf(`#runs li[data-id=%q]`, second)
	until(t, ctx, "the second run in the list", fmt.Sprintf(`(() => { const li = document.querySelector(%q);
		return li && li.dataset.state === 'asking'; })()`, sel))
	step(t, ctx, "selecting the second run", chromedp.Click(chromedp.CSS(sel+" button")))
	until(t, ctx, "its question", `document.getElementById('question-text').textContent === 'Blue or green?' &&
		!document.getElementById('ctl-pause').disabled && document.getElementById('ctl-resume').disabled`)
	step(t, ctx, "pausing", chromedp.Click(chromedp.ID("ctl-pause")))
	until(t, ctx, "paused", `document.getElementById('run-state').dataset.state === 'paused' &&
		!document.getElementById('ctl-resume').disabled && document.getElementById('ctl-pause').disabled`)
	step(t, ctx, "cancelling", chromedp.Click(chromedp.ID("ctl-cancel")))
	if s := eval[string](t, ctx, `document.getElementById('run-state').dataset.state`); s != "paused" {
		t.Errorf("one click on cancel: state %s, want paused until the second click", s)
	}
	// Armed, under the pointer: readable (it was white on pale pink).
	if c := eval[float64](t, ctx, `__contrast(document.getElementById('ctl-cancel'))`); c < 4.5 ||
		!eval[bool](t, ctx, `document.getElementById('ctl-cancel').matches('[data-armed]:hover')`) {
		t.Errorf("the armed cancel under the pointer: contrast %.2f:1, want ≥ 4.5", c)
	}
	step(t, ctx, "confirming the cancel", chromedp.Click(chromedp.ID("ctl-cancel")))
	until(t, ctx, "cancelled", fmt.Sprintf(`document.getElementById('run-state').dataset.state === 'cancelled' &&
		document.getElementById('ctl-cancel').disabled && document.querySelector(%q).dataset.state === 'cancelled'`, sel))
	if in, err := rt.Get(context.Background(), second); err != nil || in.State != deputy.Cancelled {
		t.Fatalf("the second run as stored: %+v %v", in, err)
	}
	until(t, ctx, "the second run's timeline: asked, paused, cancelled", `(() => {
		const r = document.querySelectorAll('#timeline .tl-row');
		return r.length === 1 && r[0].querySelector('.tl-seg[data-state="asking"]') &&
			r[0].querySelector('.tl-seg[data-state="paused"]') && r[0].querySelector('.tl-end').dataset.state === 'cancelled';
	})()`)

	// Back to the finished run, its root's transcript open: the picture.
	step(t, ctx, "the first run again", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#runs li[data-id=%q] button`, root))))
	until(t, ctx, "its tree", `(() => { const r = document.querySelector('#tree > li.node');
		return r && r.dataset.state === 'completed' && r.querySelectorAll('li.node').length === 2 &&
			document.querySelectorAll('#chart circle.dot-tokens').length >= 5; })()`)
	step(t, ctx, "the root's transcript", chromedp.Click(chromedp.CSS(`#tree > li.node > .node-row`)),
		chromedp.Click(chromedp.CSS(`.tab[data-tab="transcript"]`)))
	until(t, ctx, "the root's transcript", `document.getElementById('panel-body').textContent.includes('ask_parent') &&
		document.getElementById('panel-body').textContent.includes('Wait until Monday')`)
	until(t, ctx, "the last notice gone", `document.getElementById('toast').hidden`)
	shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil || img.Bounds().Dx() != 1366 || img.Bounds().Dy() != 850 {
		t.Fatalf("screenshot: %v %v", img.Bounds(), err)
	}
	if p := os.Getenv("DEPUTY_SCREENSHOT"); p != "" {
		if err := os.WriteFile(p, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s (%d bytes)", p, len(shot))
	}

	// The session: an HttpOnly, SameSite=Strict cookie no script can read,
	// and the token nowhere the browser keeps or sends in the clear.
	if c := eval[string](t, ctx, `document.cookie`); strings.Contains(c, serve.CookieName) {
		t.Errorf("document.cookie shows the session: %q", c)
	}
	cookies, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{ts.URL}})
	if err != nil {
		t.Fatal(err)
	}
	var session *network.Cookie
	for _, c := range cookies.Cookies {
		if c.Name == serve.CookieName {
			session = c
		}
		if strings.Contains(c.Value, token) {
			t.Errorf("cookie %s holds the token", c.Name)
		}
	}
	if session == nil || !session.HTTPOnly || session.SameSite != network.CookieSameSiteStrict || session.Path != "/" {
		t.Errorf("the session cookie: %+v", session)
	}
	if s := eval[string](t, ctx, `JSON.stringify(localStorage) + JSON.stringify(sessionStorage) + location.href`); strings.Contains(s, token) {
		t.Error("the token is in the page's storage or address")
	}
	mu.Lock()
	seen := append([]string(nil), urls...)
	mu.Unlock()
	var streams int
	for _, u := range seen {
		if strings.Contains(u, token) {
			t.Errorf("the token is in a URL the page requested: %s", strings.ReplaceAll(u, token, "TOKEN"))
		}
		if strings.Contains(u, "/api/trees/"+root+"/events") {
			streams++
		}
	}
	if streams == 0 {
		t.Errorf("the page never opened the run's event stream; it requested %q", seen)
	}

	// Signing out ends the session on the server: the page's own requests
	// are refused from then on.
	step(t, ctx, "signing out", chromedp.Click(chromedp.ID("signout")), chromedp.WaitVisible(chromedp.ID("token")))
	status, err := chromedp.Run(ctx, chromedp.Evaluate[int](`fetch('/api/instances', {credentials: 'same-origin'}).then(r => r.status)`,
		chromedp.EvalAwaitPromise))
	if err != nil || status != 401 {
		t.Errorf("after signing out the API answers %d (%v), want 401", status, err)
	}

	if v := eval[[]string](t, ctx, `window.__csp`); len(v) > 0 {
		t.Errorf("Content-Security-Policy violations: %q", v)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Errorf("the page had errors:\n%s", strings.Join(problems, "\n"))
	}
}

func exceptionDescription(d *cdpruntime.ExceptionDetails) string {
	if d == nil || d.Exception == nil {
		return ""
	}
	return d.Exception.Description
}
