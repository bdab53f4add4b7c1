package serve_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/permission"
	"github.com/deputy-run/deputy/serve"
	"github.com/deputy-run/deputy/serve/web"
)

// The dashboard shows a call that waits for approval (the tool and its
// arguments) with Approve and Deny; clicking Approve runs it once and the
// run completes.
func TestDashboardApproveInBrowser(t *testing.T) {
	t.Parallel()
	ctx := browserContext(t)
	dir := t.TempDir()
	var ran atomic.Int64
	rt, err := deputy.Open(context.Background(), deputy.Options{ModelSpec: "fake", Scenario: []byte(approveScenario),
		DB: filepath.Join(dir, "deputy.db"), Workspace: dir, Tools: []deputy.Tool{count{&ran}},
		Permissions: &deputy.Permissions{Policy: permission.Policy{Mode: permission.ModeDefault}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.Close(); err != nil {
			t.Error(err)
		}
	})
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
	t.Cleanup(func() { _ = chromedp.Cancel(ctx) })

	wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := rt.Start(wctx, deputy.Task{Text: "count once"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Wait(wctx, id); err != nil {
		t.Fatal(err)
	}

	step(t, ctx, "the sign-in form", chromedp.Navigate(ts.URL+"/#run="+id), chromedp.WaitVisible(chromedp.ID("token")))
	step(t, ctx, "signing in", chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Click(chromedp.ID("signin-button")))
	until(t, ctx, "the held call shown with Approve and Deny", `(() => {
		const box = document.getElementById('approvals');
		const li = box && box.querySelector('li.approval');
		return !box.hidden && li && li.dataset.id === `+"`"+id+"`"+` &&
			li.textContent.includes('wants to run count') && li.querySelector('.approval-input').textContent.includes('"n": 1') &&
			li.querySelector('button.approval-approve') && li.querySelector('button.approval-deny');
	})()`)
	if ran.Load() != 0 {
		t.Fatalf("the held call ran %d times before the approval", ran.Load())
	}
	step(t, ctx, "approving", chromedp.Click(chromedp.CSS(`#approval-list button.approval-approve`)))
	until(t, ctx, "the run completed and the box gone", `(() => {
		const root = document.querySelector('#tree > li.node');
		return root && root.dataset.state === 'completed' && document.getElementById('approvals').hidden;
	})()`)
	in, err := rt.Get(context.Background(), id)
	if err != nil || in.Report != "done: count 1" || ran.Load() != 1 {
		t.Fatalf("after Approve: %+v %v, ran %d", in, err, ran.Load())
	}
}
