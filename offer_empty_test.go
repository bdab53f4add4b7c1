package deputy_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/llm"
)

// offered is a program's model that answers at once and keeps what each
// request offered.
type offered struct {
	mu    sync.Mutex
	names [][]string
}

func (o *offered) Generate(_ context.Context, req *llm.Request, _ func(llm.Delta)) (*llm.Response, error) {
	names := []string{}
	for _, t := range req.Tools {
		names = append(names, t.Name)
	}
	o.mu.Lock()
	o.names = append(o.names, names)
	o.mu.Unlock()
	return &llm.Response{Content: []llm.Block{llm.Text("done")}, StopReason: llm.StopEndTurn}, nil
}

// An empty Offer offers nothing, through the durable engine too: the spec
// it records must keep [] apart from nil (nil offers everything held and
// deputy's own tools), or a root narrowed to nothing would come back from
// its record offered every tool.
func TestEmptyOfferOffersNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	m := &offered{}
	rt, err := deputy.Open(ctx, deputy.Options{Model: m, Workspace: dir, DB: filepath.Join(dir, "d.db"),
		Tools: []deputy.Tool{wordCount{}}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	for _, tc := range []struct {
		offer []string
		want  int // how many tools the one request offers
	}{{[]string{}, 0}, {[]string{"wordcount"}, 1}} {
		in, err := rt.Run(ctx, deputy.Task{Text: "go", Offer: tc.offer})
		if err != nil || in.State != deputy.Completed {
			t.Fatalf("offer %v: %v %+v", tc.offer, err, in)
		}
		m.mu.Lock()
		last := m.names[len(m.names)-1]
		m.mu.Unlock()
		if len(last) != tc.want {
			t.Errorf("Offer %v: the root was offered %v", tc.offer, last)
		}
	}
}
