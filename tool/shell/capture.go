package shell

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/deputy-run/deputy/tool"
)

// capture keeps the first head and the last tail bytes of a stream and
// counts the rest, so a command printing gigabytes costs bounded memory
// while the model still sees how it started and how it ended (usually the
// error). It is written by one goroutine and read after that one is done.
type capture struct {
	head, tail []byte
	headMax    int
	tailMax    int
	total      int64
}

func newCapture(max int) *capture {
	h := max / 2
	return &capture{headMax: h, tailMax: max - h}
}

func (c *capture) Write(p []byte) (int, error) {
	n := len(p)
	c.total += int64(n)
	if room := c.headMax - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 || c.tailMax <= 0 {
		return n, nil
	}
	c.tail = append(c.tail, p...)
	// Compact only when tail is twice its cap: amortized O(1) per byte.
	if len(c.tail) > 2*c.tailMax {
		c.tail = append(c.tail[:0], c.tail[len(c.tail)-c.tailMax:]...)
	}
	return n, nil
}

// String renders what was kept, as valid UTF-8, with a marker where bytes
// were dropped.
func (c *capture) String() string {
	tail := c.tail
	if len(tail) > c.tailMax {
		tail = tail[len(tail)-c.tailMax:]
	}
	dropped := c.total - int64(len(c.head)) - int64(len(tail))
	if dropped == 0 {
		return strings.ToValidUTF8(string(c.head)+string(tail), "\uFFFD")
	}
	// Do not split a character at either cut.
	head := tool.CutUTF8(c.head, len(c.head))
	for i := 0; i < utf8.UTFMax && len(tail) > 0 && !utf8.RuneStart(tail[0]); i++ {
		tail = tail[1:]
	}
	dropped = c.total - int64(len(head)) - int64(len(tail))
	return strings.ToValidUTF8(string(head), "\uFFFD") +
		fmt.Sprintf("\n[... %d bytes of output cut by deputy (%d in all); redirect to a file and read parts of it to see them ...]\n", dropped, c.total) +
		strings.ToValidUTF8(string(tail), "\uFFFD")
}
