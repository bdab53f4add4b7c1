package store_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/deputy-run/deputy/store"
	"github.com/deputy-run/deputy/store/storetest"
)

// sqliteHarness keeps each test's database in a file of its own, in a
// directory that does not exist yet (Open creates it).
var sqliteHarness = storetest.Harness{
	NewURL: func(t testing.TB) string { return filepath.Join(t.TempDir(), "state", "deputy.db") },
	Raw:    rawSQLite,
	Lock: func(t testing.TB, url string) func() {
		// What another deputy process in the middle of a write holds.
		db := rawSQLite(t, url)
		conn, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(context.Background(), "BEGIN EXCLUSIVE"); err != nil {
			t.Fatalf("lock %s: %v", url, err)
		}
		return func() {
			conn.ExecContext(context.Background(), "ROLLBACK")
			conn.Close()
			db.Close()
		}
	},
}

func rawSQLite(t testing.TB, path string) *sql.DB {
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func TestSQLite(t *testing.T) {
	t.Parallel()
	storetest.Run(t, sqliteHarness)
}

func TestSQLiteURLs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	for _, url := range []string{
		filepath.Join(dir, "plain.db"),
		"sqlite:" + filepath.Join(dir, "a", "prefixed.db"),
		"sqlite://" + filepath.Join(dir, "b", "c", "slashes.db"),
	} {
		s, err := store.Open(ctx, url, store.Options{})
		if err != nil {
			t.Fatalf("open %s: %v", url, err)
		}
		if s.Dialect() != store.SQLite {
			t.Fatalf("%s: dialect %s", url, s.Dialect())
		}
		// The settings hold on every connection of the pool, not only the
		// first: hold several at once and ask each.
		var conns []*sql.Conn
		for i := 0; i < 3; i++ {
			c, err := s.DB().Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		for i, c := range conns {
			var mode string
			var fk, busy int
			if err := c.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
				t.Fatal(err)
			}
			if err := c.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fk); err != nil {
				t.Fatal(err)
			}
			if err := c.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy); err != nil {
				t.Fatal(err)
			}
			if mode != "wal" || fk != 1 || busy != 5000 {
				t.Fatalf("%s conn %d: journal_mode %s, foreign_keys %d, busy_timeout %d", url, i, mode, fk, busy)
			}
			c.Close()
		}
		s.Close()
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "sqlite:", ":memory:", "sqlite::memory:", "file:x.db", filepath.Join(dir, "x.db?mode=ro"), dir, filepath.Join(file, "under-a-file.db")} {
		if s, err := store.Open(ctx, bad, store.Options{}); err == nil {
			s.Close()
			t.Fatalf("open %q: no error", bad)
		}
	}
}

// dirFiles lists the names in dir.
func dirFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestSQLiteCorrupt(t *testing.T) {
	t.Parallel()
	header := []byte("SQLite format 3\x00")
	for name, content := range map[string][]byte{
		"text":            []byte("these are my notes, not a database\n"),
		"binary":          bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 2048),
		"damaged-sqlite":  append(append([]byte{}, header...), bytes.Repeat([]byte{0xff}, 8192-len(header))...),
		"truncated-valid": nil, // filled below: a real database cut short
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "deputy.db")
			if content == nil {
				s, err := store.Open(context.Background(), path, store.Options{})
				if err != nil {
					t.Fatal(err)
				}
				s.Close()
				whole, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				content = whole[:len(whole)/2+100]
				os.RemoveAll(dir)
				os.MkdirAll(dir, 0o700)
			}
			if err := os.WriteFile(path, content, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := store.Open(context.Background(), path, store.Options{})
			if err == nil {
				s.Close()
				t.Fatal("open: no error")
			}
			if !errors.Is(err, store.ErrCorrupt) || !strings.Contains(err.Error(), path) {
				t.Fatalf("open: %v; want ErrCorrupt naming the file", err)
			}
			if got, _ := os.ReadFile(path); !bytes.Equal(got, content) {
				t.Fatal("the file was changed")
			}
			if names := dirFiles(t, dir); len(names) != 1 {
				t.Fatalf("files beside the database: %v", names)
			}
		})
	}
}

// TestSQLiteNewerSchemaUntouched checks byte for byte what the suite
// checks row by row: a refused open of a newer database writes nothing.
func TestSQLiteNewerSchemaUntouched(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "deputy.db")
	s, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().ExecContext(ctx, `INSERT INTO deputy_schema (version, applied_at) VALUES (999, 0)`); err != nil {
		t.Fatal(err)
	}
	s.Close() // checkpoints the WAL into the file and removes it
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Open(ctx, path, store.Options{}); !errors.Is(err, store.ErrNewerSchema) {
		t.Fatalf("open: %v, want ErrNewerSchema", err)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Fatal("a refused open changed the database file")
	}
	if fi, err := os.Stat(path + "-wal"); err == nil && fi.Size() > 0 {
		t.Fatalf("a refused open left %d bytes of WAL", fi.Size())
	}
}
