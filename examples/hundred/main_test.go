package main

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/llm/fake"
)

// The parent's requests offer exactly spawn_subagent, each child's exactly
// lookup; every request went through the program's client, with its key
// (the fake API refuses any other), and the totals add up.
func TestParentAndChildrenOfferWhatTheyShould(t *testing.T) {
	res, err := run(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for i := 1; i <= Shards; i++ {
		want += i * i
	}
	if res.Children != Shards || !strings.Contains(res.Report, "The 100 shards total "+strconv.Itoa(want)+".") {
		t.Fatalf("%d children; report %q", res.Children, res.Report)
	}
	var parent, children int
	for _, r := range res.Requests {
		if r.Status != 200 || r.Request == nil {
			t.Fatalf("request %d: status %d", r.N, r.Status)
		}
		offered := names(r)
		switch {
		case strings.Contains(r.Request.System, readerSystem):
			children++
			if !slices.Equal(offered, []string{"lookup"}) {
				t.Errorf("a child's request %d offers %v", r.N, offered)
			}
		case strings.Contains(r.Request.System, parentSystem):
			parent++
			if !slices.Equal(offered, []string{"spawn_subagent"}) {
				t.Errorf("the parent's request %d offers %v", r.N, offered)
			}
		default:
			t.Errorf("request %d from neither: %.80q", r.N, r.Request.System)
		}
	}
	if parent != 2 || children != 2*Shards {
		t.Errorf("%d parent requests, %d children's; want 2 and %d", parent, children, 2*Shards)
	}
	if n := int64(len(res.Requests)); res.ClientRequests != n {
		t.Errorf("the program's client sent %d requests; the API received %d", res.ClientRequests, n)
	}
}

func names(r fake.LoggedRequest) []string {
	var out []string
	for _, t := range r.Request.Tools {
		out = append(out, t.Name)
	}
	return out
}
