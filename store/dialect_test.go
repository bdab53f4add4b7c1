package store

import (
	"strings"
	"testing"
)

func TestRebind(t *testing.T) {
	t.Parallel()
	q := `INSERT INTO t (a, b) SELECT ?, COALESCE(MAX(n), 0) + 1 FROM t WHERE x = ? AND y IN (?, ?)`
	if got := (querier{d: SQLite}).rebind(q); got != q {
		t.Fatalf("SQLite rebind changed the query: %s", got)
	}
	want := `INSERT INTO t (a, b) SELECT $1, COALESCE(MAX(n), 0) + 1 FROM t WHERE x = $2 AND y IN ($3, $4)`
	if got := (querier{d: Postgres}).rebind(q); got != want {
		t.Fatalf("Postgres rebind:\n%s\nwant\n%s", got, want)
	}
}

func TestParseURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, dialect, target string }{
		{".deputy/deputy.db", "sqlite", ".deputy/deputy.db"},
		{"/var/lib/deputy.db", "sqlite", "/var/lib/deputy.db"},
		{"sqlite:x.db", "sqlite", "x.db"},
		{"sqlite:///abs/x.db", "sqlite", "/abs/x.db"},
		{"postgres://u:p@h/db", "postgres", "postgres://u:p@h/db"},
		{"postgresql://h/db?sslmode=disable", "postgres", "postgresql://h/db?sslmode=disable"},
		{"", "", ""},
		{"sqlite:", "", ""},
		{":memory:", "", ""},
		{"file:x.db?mode=memory", "", ""},
		{"x.db?_pragma=foreign_keys(0)", "", ""},
	} {
		d, target, err := parseURL(tc.in)
		if tc.dialect == "" {
			if err == nil {
				t.Errorf("parseURL(%q): no error", tc.in)
			}
			continue
		}
		if err != nil || string(d) != tc.dialect || target != tc.target {
			t.Errorf("parseURL(%q) = %s, %q, %v; want %s, %q", tc.in, d, target, err, tc.dialect, tc.target)
		}
	}
	for in, want := range map[string]string{"sqlite://rel/x.db": "rel/x.db", "sqlite:x.db": "x.db", "x.db": "x.db", "postgres://h/db": ""} {
		if got, ok := SQLitePath(in); ok != (want != "") || (ok && got != want) {
			t.Errorf("SQLitePath(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	if got := describe(Postgres, "postgres://deputy:hunter2@db:5432/x"); strings.Contains(got, "hunter2") {
		t.Fatalf("describe leaks the password: %s", got)
	}
}

// TestMigrationsExpand: every token of the migrations has a word in each
// dialect, so no {{...}} reaches a database.
func TestMigrationsExpand(t *testing.T) {
	t.Parallel()
	for d, words := range dialectWords {
		for v, stmts := range migrations {
			for i, s := range stmts {
				if out := words.Replace(s); strings.Contains(out, "{{") {
					t.Errorf("%s: migration %d statement %d keeps a token: %s", d, v+1, i+1, out)
				}
			}
		}
	}
}
