package fake

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	"github.com/deputy-run/deputy/llm"
)

// listing is a Responder that names its models.
type listing struct {
	Responder
	ids []string
}

func (l listing) Models() []string { return l.ids }

// TestAnthropicSDKModels lists and gets models with the Go SDK, paging by
// limit and after_id as its auto-pager does.
func TestAnthropicSDKModels(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{})
	c := anthClient(url)
	ctx := context.Background()
	page, err := c.Models.List(ctx, anthropic.ModelListParams{Limit: anthropic.Int(3)})
	if err != nil {
		t.Fatal(err)
	}
	want := defaultModels[Anthropic]
	if len(page.Data) != 3 || !page.HasMore || page.FirstID != want[0] || page.LastID != want[2] || page.Data[0].Type != "model" {
		t.Fatalf("first page: %s", page.RawJSON())
	}
	var all []string
	iter := c.Models.ListAutoPaging(ctx, anthropic.ModelListParams{Limit: anthropic.Int(5)})
	for iter.Next() {
		all = append(all, iter.Current().ID)
	}
	if err := iter.Err(); err != nil || !slices.Equal(all, want) {
		t.Fatalf("auto-paged %v (%v), want %v", all, err, want)
	}
	m, err := c.Models.Get(ctx, "claude-opus-5-5", anthropic.ModelGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != "claude-opus-5-5" || m.DisplayName != "Claude Opus 5.5" || m.CreatedAt.IsZero() {
		t.Errorf("model: %s", m.RawJSON())
	}
	_, err = c.Models.Get(ctx, "claude-nonesuch", anthropic.ModelGetParams{})
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Type() != "not_found_error" {
		t.Errorf("unknown model: %v", err)
	}
}

// TestAnthropicModelsPaging pages before an id, refuses bad paging and
// lists a Responder's own models.
func TestAnthropicModelsPaging(t *testing.T) {
	t.Parallel()
	ids := []string{"claude-a", "claude-b", "claude-c", "claude-d"}
	_, url := srvStart(t, Options{Responder: listing{Responder: replyWith(llm.Text("x")), ids: ids}})
	get := func(query string) srvResp {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url+"/v1/models"+query, nil)
		req.Header.Set("anthropic-version", "2023-06-01")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return srvResp{status: res.StatusCode, header: res.Header, body: b}
	}
	m := srvJSON(t, get("?limit=2&before_id=claude-d").body)
	if m["first_id"] != "claude-b" || m["last_id"] != "claude-c" || m["has_more"] != true {
		t.Errorf("before_id page: %v", m)
	}
	m = srvJSON(t, get("?after_id=claude-c").body)
	if m["first_id"] != "claude-d" || m["has_more"] != false {
		t.Errorf("after_id page: %v", m)
	}
	for q, want := range map[string]string{
		"?limit=0":                              "limit: Input should be greater than or equal to 1",
		"?limit=1001":                           "limit: Input should be less than or equal to 1000",
		"?after_id=claude-z":                    "after_id: no model with id claude-z",
		"?after_id=claude-a&before_id=claude-d": "after_id: cannot be combined with before_id",
	} {
		r := get(q)
		if msg := srvDig(srvJSON(t, r.body), "error", "message"); r.status != 400 || msg != want {
			t.Errorf("%s: %d %s", q, r.status, r.body)
		}
	}
}

// TestOpenAISDKModels lists and gets models with openai-go, in OpenAI's
// shape and error.
func TestOpenAISDKModels(t *testing.T) {
	t.Parallel()
	ids := []string{"gpt-scenario", "fake"}
	for _, c := range []struct {
		name string
		opts Options
		want []string
	}{{"defaults", Options{}, defaultModels[OpenAI]}, {"a scenario's", Options{Responder: listing{Responder: replyWith(llm.Text("x")), ids: ids}}, ids}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, url := srvStart(t, c.opts)
			cl := oaiClient(url)
			page, err := cl.Models.List(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range page.Data {
				if m.Object != "model" || m.OwnedBy == "" || m.Created == 0 {
					t.Errorf("model: %s", m.RawJSON())
				}
				got = append(got, m.ID)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("listed %v, want %v", got, c.want)
			}
			m, err := cl.Models.Get(context.Background(), c.want[1])
			if err != nil || m.ID != c.want[1] {
				t.Errorf("get %s: %v %v", c.want[1], m, err)
			}
			_, err = cl.Models.Get(context.Background(), "gpt-nonesuch")
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "model_not_found" || apiErr.Type != "invalid_request_error" {
				t.Errorf("unknown model: %v", err)
			}
		})
	}
}
