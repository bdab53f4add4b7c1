package shell

import (
	"regexp"
	"slices"
	"strings"
)

// The environment a command gets is an allowlist, not deputy's
// environment minus what looks secret. Why: the command is written by a
// model, and everything it prints goes back to the model provider, into
// the transcript, the database and, with telemetry on, exported spans. A
// name filter misses credentials whose names do not say so
// (OTEL_EXPORTER_OTLP_HEADERS holds "authorization=Bearer ...", an
// endpoint URL may carry user:password), so only names known to be
// harmless and useful pass, and anything else only when the operator
// grants it by name (Config.PassEnv). This is about the ambient
// environment, not a sandbox: secrets in files the command can read are
// the isolation layer's concern.

// allowedEnv are the names every command gets when deputy has them: what
// a shell and its programs expect (identity, locale, terminal, temporary
// and cache directories), what builds need to find their toolchains and
// caches (Go, C, Rust, Node, Python, Java), git's author identity, and
// proxies, without which nothing downloads behind one. Not in it, so
// granted only by name: SSH_AUTH_SOCK (it would let the command use the
// user's SSH keys: push, log in elsewhere), cloud and registry settings,
// and any variable of deputy's own.
var allowedEnv = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR",
	"COLUMNS", "LINES", "NO_COLOR",
	"XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR",
	// Go
	"GOPATH", "GOROOT", "GOBIN", "GOCACHE", "GOMODCACHE", "GOENV", "GOFLAGS", "GOTOOLCHAIN",
	"GOPROXY", "GOSUMDB", "GOPRIVATE", "GONOPROXY", "GONOSUMDB", "GOINSECURE", "CGO_ENABLED",
	// C and C++
	"CC", "CXX", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "PKG_CONFIG_PATH",
	"LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH",
	// Rust, Node, Python, Java
	"CARGO_HOME", "RUSTUP_HOME", "RUSTUP_TOOLCHAIN", "CARGO_TARGET_DIR",
	"NODE_PATH", "NVM_DIR",
	"VIRTUAL_ENV", "PYTHONPATH", "PYENV_ROOT", "CONDA_PREFIX",
	"JAVA_HOME",
	// git's identity for commits
	"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL",
	// proxies (a value with user:password@ is dropped, see urlCredentials)
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy",
}

// urlCredentials matches a URL with userinfo (scheme://user:pass@ or
// scheme://token@): an allowlisted name can still hold a credential that
// way (a proxy, GOPROXY), and such a value is dropped unless granted.
var urlCredentials = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^/\s@]+@`)

// OwnEnv reports whether name is one of deputy's own variables, which no
// program gets even when granted: deputy's provider keys and settings
// (ANTHROPIC_*, OPENAI_*, DEPUTY_*) and its telemetry exporter's (OTEL_*,
// whose headers and endpoint carry collector credentials).
func OwnEnv(name string) bool {
	u := strings.ToUpper(name)
	for _, p := range []string{"ANTHROPIC_", "OPENAI_", "DEPUTY_", "OTEL_"} {
		if strings.HasPrefix(u, p) {
			return true
		}
	}
	return false
}

// AllowEnv returns the variables of env a program may get: the
// allowlisted names (and LC_*) unless their value holds URL credentials,
// and the names in grant as they are; never deputy's own (OwnEnv).
func AllowEnv(env, grant []string) []string {
	out := make([]string, 0, min(len(env), len(allowedEnv)+len(grant)))
	for _, kv := range env {
		name, val, _ := strings.Cut(kv, "=")
		switch {
		case name == "" || OwnEnv(name):
		case slices.Contains(grant, name):
			out = append(out, kv)
		case slices.Contains(allowedEnv, name) || strings.HasPrefix(name, "LC_"):
			if !urlCredentials.MatchString(val) {
				out = append(out, kv)
			}
		}
	}
	return out
}
