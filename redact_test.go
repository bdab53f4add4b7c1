package deputy_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/deputy-run/deputy"
)

// Options printed or logged, as a program debugging its setup would, show
// no key and no database password.
func TestOptionsPrintNoKey(t *testing.T) {
	t.Parallel()
	const key, ep, pw = "sk-ant-top-1", "sk-openai-top-2", "pg-pass-3"
	p := deputy.ProviderOptions{APIKey: key, BaseURL: "https://api.example",
		Endpoints: map[string]deputy.Endpoint{"openai": {APIKey: ep}}}
	o := deputy.Options{ModelSpec: "anthropic:x", Provider: p, DB: "postgres://me:" + pw + "@db/deputy"}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("setup", "opts", o, "provider", p, "endpoint", p.Endpoints["openai"], "ptr", &o)
	outs := map[string]string{"slog": logged.String()}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		outs[verb] = fmt.Sprintf(verb, o) + fmt.Sprintf(verb, &o) + fmt.Sprintf(verb, p) + fmt.Sprintf(verb, p.Endpoints["openai"])
	}
	for name, out := range outs {
		for _, secret := range []string{key, ep, pw} {
			if strings.Contains(out, secret) {
				t.Errorf("%s shows %s: %s", name, secret, out)
			}
		}
		if !strings.Contains(out, "api.example") || !strings.Contains(out, "anthropic:x") {
			t.Errorf("%s lost what is not secret: %s", name, out)
		}
	}
}
