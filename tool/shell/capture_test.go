package shell

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCaptureKeepsAllWhenSmall(t *testing.T) {
	t.Parallel()
	c := newCapture(10)
	c.Write([]byte("héllo"))
	c.Write([]byte("!"))
	if got := c.String(); got != "héllo!" {
		t.Errorf("%q", got)
	}
}

// However the stream is chunked, the result is the same, valid UTF-8, and
// the marker counts exactly the bytes not shown.
func TestCaptureHeadTailUTF8(t *testing.T) {
	t.Parallel()
	src := "A" + strings.Repeat("é€😀", 500) + "Z"
	var want string
	for _, chunk := range []int{1, 3, 7, 64, len(src)} {
		c := newCapture(101)
		for s := src; len(s) > 0; {
			k := min(chunk, len(s))
			c.Write([]byte(s[:k]))
			s = s[k:]
		}
		got := c.String()
		if !utf8.ValidString(got) || strings.ContainsRune(got, utf8.RuneError) {
			t.Fatalf("chunk %d: invalid or replaced UTF-8: %q", chunk, got)
		}
		if !strings.HasPrefix(got, "Aé€😀") || !strings.HasSuffix(got, "😀Z") {
			t.Errorf("chunk %d: head or tail lost: %q", chunk, got)
		}
		head, rest, _ := strings.Cut(got, "\n[... ")
		var dropped, total int
		if _, err := fmtSscanf(rest, &dropped, &total); err != nil {
			t.Fatalf("marker: %v in %q", err, got)
		}
		tail := rest[strings.Index(rest, "...]\n")+5:]
		if total != len(src) || dropped != len(src)-len(head)-len(tail) {
			t.Errorf("chunk %d: dropped %d total %d, head %d tail %d", chunk, dropped, total, len(head), len(tail))
		}
		if len(head) > 50 || len(tail) > 51 || len(head) < 47 || len(tail) < 48 {
			t.Errorf("chunk %d: head %d tail %d bytes for a cap of 101", chunk, len(head), len(tail))
		}
		if want == "" {
			want = got
		} else if got != want {
			t.Errorf("chunk %d: differs from single write:\n%q\n%q", chunk, got, want)
		}
	}
}

func fmtSscanf(s string, dropped, total *int) (int, error) {
	return fmt.Sscanf(s, "%d bytes of output cut by deputy (%d in all)", dropped, total)
}
