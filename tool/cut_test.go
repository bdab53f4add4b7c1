package tool_test

import (
	"bytes"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"

	"github.com/deputy-run/deputy/tool"
)

func TestCutUTF8(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"hello", 10, "hello"},
		{"hello", 5, "hello"},
		{"hello", 3, "hel"},
		{"hello", 0, ""},
		{"hello", -1, ""},
		{"", 3, ""},
		{"aé", 2, "a"},        // é is 2 bytes; the cut falls inside it
		{"aé", 3, "aé"},       // exactly at its end
		{"a€b", 3, "a"},       // inside a 3-byte character
		{"a€b", 4, "a€"},      //
		{"a😀", 4, "a"},        // inside a 4-byte character
		{"a😀", 5, "a😀"},       //
		{"a\xe2\x82", 9, "a"}, // a broken sequence at the end goes too
		{"\x80\x80\x80\x80\x80", 5, "\x80\x80\x80\x80\x80"}, // no character start in reach: kept as is
	}
	for _, tc := range tests {
		if got := string(tool.CutUTF8([]byte(tc.in), tc.n)); got != tc.want {
			t.Errorf("CutUTF8(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

// On valid UTF-8 the result is the longest prefix of at most n bytes that
// ends on a character boundary.
func TestCutUTF8Property(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		s := []byte(rapid.String().Draw(t, "s"))
		n := rapid.IntRange(0, len(s)+2).Draw(t, "n")
		got := tool.CutUTF8(s, n)
		want := 0
		for i := range string(s) {
			if i <= n {
				want = i
			}
		}
		if len(s) <= n {
			want = len(s)
		}
		if !bytes.Equal(got, s[:want]) || !utf8.Valid(got) {
			t.Fatalf("CutUTF8(%q, %d) = %q, want %q", s, n, got, s[:want])
		}
	})
}
