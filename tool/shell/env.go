package shell

import "strings"

// FilterEnv drops variables whose names look like secrets: *_API_KEY,
// *APIKEY*, *TOKEN*, *SECRET*, *PASSWORD*, *PASSWD*, *CREDENTIAL*,
// *PRIVATE_KEY* (case-insensitive).
//
// Why: the command is written by a model, and everything it prints goes
// back to the model provider and into deputy's persisted transcripts. If
// the shell inherited deputy's environment, `env` or `echo
// $ANTHROPIC_API_KEY` (or a prompt-injected script) would copy deputy's own
// credentials out. A tool that genuinely needs a credential should get it
// some other way than the agent's ambient environment. This is a name
// filter, not a sandbox: secrets in files the command can read are the
// isolation layer's concern.
func FilterEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !SecretName(name) {
			out = append(out, kv)
		}
	}
	return out
}

// SecretName reports whether an environment variable name looks like it
// holds a secret.
func SecretName(name string) bool {
	u := strings.ToUpper(name)
	if strings.HasSuffix(u, "_API_KEY") || u == "API_KEY" {
		return true
	}
	for _, s := range []string{"APIKEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "PRIVATE_KEY"} {
		if strings.Contains(u, s) {
			return true
		}
	}
	return false
}
