package fake

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"

	"github.com/deputy-run/deputy/llm"
)

// TestScenarioModelsNamedByItsRules: what each match.model pattern names,
// and that every name listed is one its rule answers.
func TestScenarioModelsNamedByItsRules(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		pattern string
		want    []string
	}{
		{"claude-sonnet-4-6", []string{"claude-sonnet-4-6"}},
		{"^claude-sonnet-4-6$", []string{"claude-sonnet-4-6"}},
		{`\Aclaude-haiku-4-5\z`, []string{"claude-haiku-4-5"}},
		{`gpt-5\.6-terra`, []string{"gpt-5.6-terra"}},
		{"gpt-5.6-terra", []string{"gpt-5.6-terra"}},
		{"^gpt-6-(sol|luna)$", []string{"gpt-6-sol", "gpt-6-luna"}},
		{"^(claude-opus-5|gpt-6-astra)$", []string{"claude-opus-5", "gpt-6-astra"}},
		{"(?i)Claude-Opus-5", []string{"claude-opus-5"}},
		{"^claude-opus-5$|^gpt-6-sol$", []string{"claude-opus-5", "gpt-6-sol"}},
		{"-5$", nil},
		{"^model-[ab]$", []string{"model-a", "model-b"}},
		{"^claude", nil},
		{"gpt-.*", nil},
		{"^claude-.+-5$", nil},
		{"claude-opus-5-?", nil},
		{"^[^x]$", nil},
		{".", nil},
		{"", nil},
	} {
		t.Run(c.pattern, func(t *testing.T) {
			t.Parallel()
			s, err := ParseScenario([]byte(fmt.Sprintf("rules:\n  - match: {model: %q}\n    text: named\n", c.pattern)), "models.yaml")
			if err != nil {
				t.Fatal(err)
			}
			got := s.Models()
			if !slices.Equal(got, c.want) {
				t.Fatalf("Models() = %q, want %q", got, c.want)
			}
			re := regexp.MustCompile(c.pattern)
			for _, id := range got {
				rep := s.Respond(&llm.Request{Model: id, Messages: []llm.Message{llm.UserText("hi")}}, RequestInfo{N: 1})
				if !re.MatchString(id) || len(rep.Content) != 1 || rep.Content[0].Text != "named" {
					t.Errorf("%q listed, but its rule does not answer it: %+v", id, rep)
				}
			}
		})
	}
}

// namingScenario names models in three rules, one twice, among rules that
// name none.
const namingScenario = `
rules:
  - match: {model: "^claude-sonnet-4-6$", turn: 1}
    text: sonnet
  - match: {turn: 2}
    text: any
  - match: {model: "^gpt-5\\.6-(terra|luna)$"}
    text: gpt
  - match: {model: "^claude"}
    text: some claude
  - match: {model: "claude-sonnet-4-6"}
    text: sonnet again
default:
  text: none
`

// TestScenarioModelsOverHTTP: a server answering from a scenario lists the
// models its rules name on both wires, in their order, and knows no other;
// one whose rules name none lists each wire's defaults.
func TestScenarioModelsOverHTTP(t *testing.T) {
	t.Parallel()
	named := []string{"claude-sonnet-4-6", "gpt-5.6-terra", "gpt-5.6-luna"}
	for _, c := range []struct {
		name, yaml string
		anth, oai  []string
	}{
		{"named", namingScenario, named, named},
		{"none named", "rules:\n  - match: {model: \"^claude\"}\n    text: hi\n", defaultModels[Anthropic], defaultModels[OpenAI]},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, err := ParseScenario([]byte(c.yaml), "models.yaml")
			if err != nil {
				t.Fatal(err)
			}
			_, url := srvStart(t, Options{Responder: s})
			ctx := context.Background()
			if got := anthropicModelIDs(t, url); !slices.Equal(got, c.anth) {
				t.Errorf("Anthropic's list: %v, want %v", got, c.anth)
			}
			oc := oaiClient(url)
			page, err := oc.Models.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range page.Data {
				got = append(got, m.ID)
			}
			if !slices.Equal(got, c.oai) {
				t.Errorf("OpenAI's list: %v, want %v", got, c.oai)
			}
			for _, id := range c.oai {
				if m, err := oc.Models.Get(ctx, id); err != nil || m.ID != id {
					t.Errorf("get %s: %v %v", id, m, err)
				}
			}
			unlisted := "gpt-6-astra" // a default: unknown to a scenario naming its own
			if !slices.Equal(c.oai, named) {
				unlisted = "gpt-nonesuch"
			}
			_, err = oc.Models.Get(ctx, unlisted)
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "model_not_found" {
				t.Errorf("get %s: %v, want 404 model_not_found", unlisted, err)
			}
		})
	}
}

// anthropicModelIDs lists the server's models with the Anthropic SDK's
// auto-pager, two at a time, and gets each.
func anthropicModelIDs(t *testing.T, url string) []string {
	t.Helper()
	c, ctx := anthClient(url), context.Background()
	var ids []string
	iter := c.Models.ListAutoPaging(ctx, anthropic.ModelListParams{Limit: anthropic.Int(2)})
	for iter.Next() {
		ids = append(ids, iter.Current().ID)
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if m, err := c.Models.Get(ctx, id, anthropic.ModelGetParams{}); err != nil || m.ID != id || m.Type != "model" {
			t.Errorf("get %s: %v %v", id, m.RawJSON(), err)
		}
	}
	return ids
}
