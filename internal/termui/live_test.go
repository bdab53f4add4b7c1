package termui

import (
	"bytes"
	"testing"
	"time"

	"github.com/deputy-run/deputy/clock"
)

// The status line's bytes, on a fake clock: drawn at once, redrawn every
// liveEvery with the next spinner face and the time, lines printed above
// it, and cleared for good by Stop (no redraw after).
func TestLiveLineBytes(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := startLive(&b, clk, func() string { return "working" })
	want := "\r\x1b[K\x1b[36m⠋\x1b[0m working \x1b[2m0.0s\x1b[0m"
	if b.String() != want {
		t.Fatalf("first frame %q, want %q", b.String(), want)
	}
	b.Reset()
	clk.Advance(liveEvery)
	if want := "\r\x1b[K\x1b[36m⠙\x1b[0m working \x1b[2m0.1s\x1b[0m"; b.String() != want {
		t.Fatalf("second frame %q, want %q", b.String(), want)
	}
	b.Reset()
	l.Println("· read_file {}")
	if want := "\r\x1b[K· read_file {}\n\r\x1b[K\x1b[36m⠙\x1b[0m working \x1b[2m0.1s\x1b[0m"; b.String() != want {
		t.Fatalf("a line above %q, want %q", b.String(), want)
	}
	b.Reset()
	l.Stop()
	clk.Advance(time.Minute)
	l.Println("after")
	if want := "\r\x1b[Kafter\n"; b.String() != want {
		t.Fatalf("after Stop %q, want %q", b.String(), want)
	}
	if clk.Pending() != 0 {
		t.Errorf("a timer is still armed after Stop")
	}
}

func TestElapsedAndUSDForPeople(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{0: "0.0s", 4200 * time.Millisecond: "4.2s", 65 * time.Second: "1m05s"} {
		if got := fmtElapsed(d); got != want {
			t.Errorf("fmtElapsed(%v) = %q, want %q", d, got, want)
		}
	}
	for c, want := range map[float64]string{0: "$0", 0.00004: "<$0.0001", 0.0123: "$0.0123", 0.01234: "$0.0123",
		1.234: "$1.23", 12.5: "$12.50"} {
		if got := USD(c); got != want {
			t.Errorf("USD(%v) = %q, want %q", c, got, want)
		}
	}
}
