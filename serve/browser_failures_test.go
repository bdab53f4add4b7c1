package serve_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/serve"
	"github.com/deputy-run/deputy/serve/web"
)

// contrastJS is the WCAG contrast ratio of an element's text colour on
// its background as the browser computed them (a translucent background
// composited over its ancestors', down to the page's).
const contrastJS = `window.__contrast = (el) => {
	const rgba = (c) => { const v = (c.match(/[\d.]+/g) || []).map(Number); return [v[0], v[1], v[2], v.length > 3 ? v[3] : 1]; };
	const over = (top, under) => [0, 1, 2].map((i) => top[i] * top[3] + under[i] * (1 - top[3])).concat(1);
	const bgOf = (e) => {
		if (!e) return [255, 255, 255, 1];
		const c = rgba(getComputedStyle(e).backgroundColor);
		return c[3] >= 1 ? c : over(c, bgOf(e.parentElement));
	};
	const lum = (c) => {
		const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
		return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]);
	};
	const bg = bgOf(el);
	const fg = over(rgba(getComputedStyle(el).color), bg);
	const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
	return (a + 0.05) / (b + 0.05);
};`

// failedRig is a server with three runs made on the fake's Anthropic wire
// (a survey whose child beta failed, a tally run as a researcher, a
// summary that asks) and a browser signed in to it, the system's theme
// dark.
type failedRig struct {
	t             *testing.T
	ctx           context.Context
	survey, tally *deputy.Instance
	week          string
	kids          []*deputy.Instance // the survey's, in spawn order
	beta          *deputy.Instance
	problems      func() []string // the page's script errors so far
}

// A run whose child failed, as a new user meets it in the browser against
// a real server whose model is the fake on Anthropic's wire: the run is
// flagged in the list (and runs without a failure are not), the child on
// the tree with its error, which ends its transcript; children are in
// spawn order; the timeline has a row per instance with how each ended;
// the Model calls tab shows each attempt (the root's 529 and its retry
// wait, the child's two 500s); the list is searched and filtered, the
// filters kept in the address across a reload; the dark theme follows the
// system until the toggle picks one, which a reload keeps; and the armed
// cancel button is readable under the pointer in both themes.
func TestDashboardFailuresInBrowser(t *testing.T) {
	t.Parallel()
	r := newFailedRig(t)
	r.failureShown()
	r.attemptsShown()
	r.screenshot()
	r.searchAndFilters()
	r.themesAndArmedCancel()
	if p := r.problems(); len(p) > 0 {
		t.Errorf("the page had errors:\n%s", strings.Join(p, "\n"))
	}
}

func newFailedRig(t *testing.T) *failedRig {
	r := &failedRig{t: t, ctx: browserContext(t)}
	rt := wireRuntime(t, failingScenario)
	r.makeRuns(rt)
	var tb [24]byte
	_, _ = rand.Read(tb[:])
	token := hex.EncodeToString(tb[:])
	srv, err := serve.New(serve.Options{Runtime: rt, Token: token, Web: web.Handler()})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { _ = chromedp.Cancel(r.ctx) })
	var mu sync.Mutex
	var problems []string
	if err := chromedp.Listen(r.ctx, func(ev any) {
		if ev, ok := ev.(*cdpruntime.EventExceptionThrown); ok {
			mu.Lock()
			problems = append(problems, ev.ExceptionDetails.Text+" "+exceptionDescription(ev.ExceptionDetails))
			mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	r.problems = func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(problems)
	}
	// The contrast measure is on every page the test loads (a reload
	// included), injected by the browser.
	if _, err := chromedp.Call(r.ctx, page.AddScriptToEvaluateOnNewDocument,
		page.AddScriptToEvaluateOnNewDocumentParams{Source: contrastJS}); err != nil {
		t.Fatal(err)
	}
	// The system says dark: the page is dark before anything is picked.
	if _, err := chromedp.Call(r.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}}); err != nil {
		t.Fatal(err)
	}
	step(t, r.ctx, "signing in", chromedp.Navigate(ts.URL), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Click(chromedp.ID("signin-button")),
		chromedp.WaitVisible(chromedp.ID("runs-search")))
	if !eval[bool](t, r.ctx, bodyDark) {
		t.Errorf("prefers-color-scheme: dark, but the page is not: %s", eval[string](t, r.ctx, `getComputedStyle(document.body).backgroundColor`))
	}
	return r
}

// bodyDark says whether the page's background is dark.
const bodyDark = `(() => { const c = getComputedStyle(document.body).backgroundColor.match(/\d+/g).map(Number);
	return c[0] + c[1] + c[2] < 150; })()`

func (r *failedRig) makeRuns(rt *deputy.Runtime) {
	t := r.t
	bg, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var err error
	if r.survey, err = rt.Run(bg, deputy.Task{Text: "Survey the release"}); err != nil || r.survey.State != deputy.Completed {
		t.Fatalf("the survey: %+v %v", r.survey, err)
	}
	if r.tally, err = rt.Run(bg, deputy.Task{Text: "Tally the votes", Type: "researcher"}); err != nil || r.tally.State != deputy.Completed {
		t.Fatalf("the tally: %+v %v", r.tally, err)
	}
	if r.week, err = rt.Start(bg, deputy.Task{Text: "Summarize the week"}); err != nil {
		t.Fatal(err)
	}
	if week, err := rt.Wait(bg, r.week); err != nil || week.State != deputy.Asking {
		t.Fatalf("the summary: %+v %v", week, err)
	}
	if r.kids, err = rt.Children(bg, r.survey.ID); err != nil || len(r.kids) != 2 {
		t.Fatalf("children %v %v", r.kids, err)
	}
	// Children come in creation order (the store's created_seq), the order
	// the page must show them in.
	r.beta = r.kids[slices.IndexFunc(r.kids, func(k *deputy.Instance) bool { return strings.Contains(k.Task, "Break") })]
	if r.beta.State != deputy.Failed || r.beta.Error == "" {
		t.Fatalf("the failing child: %+v", r.beta)
	}
}

// otherKid is the survey's child that did not fail: either may be spawned
// first, so neither is kids[0] by rule.
func (r *failedRig) otherKid() *deputy.Instance {
	if r.kids[0].ID == r.beta.ID {
		return r.kids[1]
	}
	return r.kids[0]
}

func runSel(id string) string { return fmt.Sprintf(`#runs li[data-id=%q]`, id) }

func nodeRow(id string) chromedp.Action[chromedp.Void] {
	return chromedp.Click(chromedp.CSS(fmt.Sprintf(`#tree li.node[data-id=%q] > .node-row`, id)))
}

// failureShown: the list flags the survey, the tree its failed child (and
// the totals count it), children in spawn order, the timeline's rows end
// as each instance did, and the child's transcript ends with its error.
func (r *failedRig) failureShown() {
	t, ctx, beta, kids := r.t, r.ctx, r.beta, r.kids
	until(t, ctx, "the failed run flagged in the list", fmt.Sprintf(`(() => {
		const s = document.querySelector(%q), a = document.querySelector(%q), b = document.querySelector(%q);
		return s && a && b && s.dataset.state === 'completed' && s.dataset.failed === '1' &&
			s.querySelector('.run-flag').textContent.includes('1 failed') && !a.dataset.failed && !b.dataset.failed;
	})()`, runSel(r.survey.ID), runSel(r.tally.ID), runSel(r.week)))
	step(t, ctx, "the survey", chromedp.Click(chromedp.CSS(runSel(r.survey.ID)+" button")))
	until(t, ctx, "the failed child on the tree", fmt.Sprintf(`(() => {
		const li = document.querySelector('#tree li.node[data-id=%q]');
		const f = document.querySelector('[data-total="failed"] .total-value');
		return li && li.dataset.state === 'failed' && li.classList.contains('node-failed') &&
			li.querySelector('.node-error').title === %q && f && f.textContent === '1' &&
			document.querySelectorAll('#tree li.node.node-failed').length === 1;
	})()`, beta.ID, beta.Error))
	order := eval[[]string](t, ctx, `[...document.querySelectorAll('#tree li.node[data-depth="1"]')].map((li) => li.dataset.id)`)
	if !slices.Equal(order, []string{kids[0].ID, kids[1].ID}) {
		t.Errorf("children on the page %q, want spawn order %s, %s", order, kids[0].ID, kids[1].ID)
	}
	until(t, ctx, "the timeline", fmt.Sprintf(`(() => {
		const rows = [...document.querySelectorAll('#timeline .tl-row')];
		const ids = rows.map((r) => r.dataset.id);
		const ran = rows.every((r) => r.querySelector('.tl-seg[data-state="running"]'));
		const end = (id) => { const r = rows.find((x) => x.dataset.id === id); const e = r && r.querySelector('.tl-end'); return e && e.dataset.state; };
		return JSON.stringify(ids) === %q && ran && end(%q) === 'completed' && end(%q) === 'completed' && end(%q) === 'failed';
	})()`, fmt.Sprintf(`[%q,%q,%q]`, r.survey.ID, kids[0].ID, kids[1].ID), r.survey.ID, r.otherKid().ID, beta.ID))
	step(t, ctx, "the failed child", nodeRow(beta.ID))
	until(t, ctx, "its error in its transcript", fmt.Sprintf(`(() => {
		const e = document.querySelector('#panel-body .transcript-error');
		return e && e.textContent.includes(%q) && e.textContent.includes('Failed');
	})()`, beta.Error))
}

// attemptsShown: the failed child's calls show both 500s, the first
// retried after the backoff; the root's its 529 and the retry's 200.
func (r *failedRig) attemptsShown() {
	t, ctx := r.t, r.ctx
	const attemptsJS = `[...document.querySelectorAll('#panel-body .call[data-turn="1"] tr.attempt')].map((tr) =>
		[...tr.children].map((td) => td.textContent).join('|'))`
	step(t, ctx, "the model calls tab", chromedp.Click(chromedp.CSS(`.tab[data-tab="calls"]`)))
	until(t, ctx, "the failed child's attempts", `document.querySelectorAll('#panel-body .call[data-turn="1"] tr.attempt').length === 2`)
	rows := eval[[]string](t, ctx, attemptsJS)
	wait := fmt.Sprintf("%d ms", retryWait.Milliseconds())
	if len(rows) != 2 || !strings.HasPrefix(rows[0], "1|500|") || !strings.HasSuffix(rows[0], "|"+wait) ||
		!strings.HasPrefix(rows[1], "2|500|") || !strings.HasSuffix(rows[1], "|—") || strings.Contains(rows[0], "|—|") {
		t.Errorf("the failed child's attempts on the page: %q", rows)
	}
	step(t, ctx, "the root's calls", nodeRow(r.survey.ID))
	until(t, ctx, "the root's attempts", `document.querySelectorAll('#panel-body .call').length === 2 &&
		document.querySelectorAll('#panel-body .call[data-turn="1"] tr.attempt').length === 2`)
	rows = eval[[]string](t, ctx, attemptsJS)
	if len(rows) != 2 || !strings.HasPrefix(rows[0], "1|529|") || !strings.Contains(rows[0], "overloaded") ||
		!strings.HasSuffix(rows[0], "|"+wait) || !strings.HasPrefix(rows[1], "2|200|—|") {
		t.Errorf("the root's attempts on the page: %q", rows)
	}
}

// screenshot: DEPUTY_SCREENSHOT_FAILED=path saves the view (dark, the
// failed run scrolled to its tree and timeline, the root's model calls)
// as a PNG.
func (r *failedRig) screenshot() {
	p := os.Getenv("DEPUTY_SCREENSHOT_FAILED")
	if p == "" {
		return
	}
	_ = eval[bool](r.t, r.ctx, `(document.getElementById('timeline').scrollIntoView(false), true)`)
	shot, err := chromedp.Run(r.ctx, chromedp.CaptureScreenshot())
	if err == nil {
		err = os.WriteFile(p, shot, 0o644)
	}
	if err != nil {
		r.t.Fatal(err)
	}
}

// searchAndFilters: search, kept in the address and across a reload; by
// id, type and state from the address; the state filter writes it.
func (r *failedRig) searchAndFilters() {
	t, ctx := r.t, r.ctx
	visible := `[...document.querySelectorAll('#runs li')].map((li) => li.dataset.id).sort().join(',')`
	only := func(ids ...string) string {
		slices.Sort(ids)
		return fmt.Sprintf(`(%s) === %q`, visible, strings.Join(ids, ","))
	}
	step(t, ctx, "searching", chromedp.SendKeys(chromedp.ID("runs-search"), "tally"))
	until(t, ctx, "the search's one run", only(r.tally.ID)+` && location.hash.includes('q=tally')`)
	step(t, ctx, "reloading", chromedp.Reload())
	until(t, ctx, "the search after a reload", only(r.tally.ID)+` && document.getElementById('runs-search').value === 'tally'`)
	address := func(hash string) { _ = eval[bool](t, ctx, fmt.Sprintf(`(location.hash = %q, true)`, hash)) }
	address("q=" + r.week[len(r.week)-6:])
	until(t, ctx, "the run with that id", only(r.week))
	address("type=researcher")
	until(t, ctx, "the researcher run", only(r.tally.ID)+` && document.getElementById('runs-type').value === 'researcher'`)
	address("state=asking")
	until(t, ctx, "the asking run", only(r.week)+` && document.getElementById('runs-filter').value === 'asking' &&
		document.getElementById('runs-type').value === ''`)
	_ = eval[bool](t, ctx, `(() => { const s = document.getElementById('runs-filter');
		s.value = 'completed'; s.dispatchEvent(new Event('change')); return true; })()`)
	until(t, ctx, "the completed runs", only(r.survey.ID, r.tally.ID)+` && location.hash.includes('state=completed')`)
	address("")
	until(t, ctx, "every run", only(r.survey.ID, r.tally.ID, r.week))
}

// themesAndArmedCancel: the armed cancel under the pointer, in the dark
// theme (the system's) and the light one (picked with the toggle, then
// kept by a reload); one click cancels nothing.
func (r *failedRig) themesAndArmedCancel() {
	t, ctx := r.t, r.ctx
	step(t, ctx, "the asking run", chromedp.Click(chromedp.CSS(runSel(r.week)+" button")))
	until(t, ctx, "its cancel button", `!document.getElementById('ctl-cancel').disabled &&
		document.getElementById('run-state').dataset.state === 'asking'`)
	armed := func(theme string) {
		t.Helper()
		step(t, ctx, "arming cancel", chromedp.Click(chromedp.ID("ctl-cancel")))
		until(t, ctx, "armed", `document.getElementById('ctl-cancel').dataset.armed === '1' &&
			document.getElementById('ctl-cancel').matches(':hover')`)
		if c := eval[float64](t, ctx, `__contrast(document.getElementById('ctl-cancel'))`); c < 4.5 {
			t.Errorf("%s theme: the armed cancel under the pointer has contrast %.2f:1, want ≥ 4.5 (%s on %s)", theme, c,
				eval[string](t, ctx, `getComputedStyle(document.getElementById('ctl-cancel')).color`),
				eval[string](t, ctx, `getComputedStyle(document.getElementById('ctl-cancel')).backgroundColor`))
		}
	}
	armed("dark")
	step(t, ctx, "the theme toggle", chromedp.Click(chromedp.ID("theme-toggle")))
	if eval[bool](t, ctx, bodyDark) || eval[string](t, ctx, `localStorage.getItem('deputy.theme')`) != "light" {
		t.Error("the toggle did not switch to the light theme and remember it")
	}
	step(t, ctx, "reloading", chromedp.Reload())
	until(t, ctx, "the run again", `document.getElementById('run-state').dataset.state === 'asking'`)
	if eval[bool](t, ctx, bodyDark) || eval[string](t, ctx, `document.documentElement.dataset.theme`) != "light" {
		t.Error("after a reload the picked light theme is gone (the system's dark is back)")
	}
	armed("light")
	if s := eval[string](t, ctx, `document.getElementById('run-state').dataset.state`); s != "asking" {
		t.Errorf("one click on cancel made the run %s", s)
	}
}
