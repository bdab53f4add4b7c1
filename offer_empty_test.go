package deputy_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/deputy-run/deputy"
)

// An empty Offer offers nothing, through the durable engine too: the spec
// it records must keep [] apart from nil (nil offers everything held and
// deputy's own tools), or a root narrowed to nothing would come back from
// its record offered every tool.
func TestEmptyOfferOffersNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	m := &recorder{}
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
		last := m.offers[len(m.offers)-1]
		m.mu.Unlock()
		if len(last) != tc.want {
			t.Errorf("Offer %v: the root was offered %v", tc.offer, last)
		}
	}
}
