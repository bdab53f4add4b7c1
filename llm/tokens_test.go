package llm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEstimateOutput(t *testing.T) {
	t.Parallel()
	content := []Block{
		Text("abcde"), // 2
		ToolUse("toolu_1", "glob", json.RawMessage(`{"pattern":"*"}`)),            // name 1 + input 4; the ID is not output
		Opaque("thinking", json.RawMessage(`{"type":"thinking","thinking":"x"}`)), // 9
	}
	if got, want := EstimateOutput(content), 2+1+4+9; got != want {
		t.Errorf("EstimateOutput = %d, want %d", got, want)
	}
	if EstimateOutput(nil) != 0 {
		t.Error("no content costs tokens")
	}
	// Output carries no framing, so it is EstimateBlock minus its overhead,
	// block by block.
	for i := range content {
		if got, want := EstimateOutput(content[i:i+1]), EstimateBlock(&content[i])-perMessageTokens; got != want {
			t.Errorf("block %d: EstimateOutput %d, EstimateBlock without framing %d", i, got, want)
		}
	}
}

// The estimate of each script sample stays within the range the published
// tokenizers measured on it (testdata/scripts/README.md), widened by 10%,
// where bytes/4 fell 1.5–2.4× short of it (Cyrillic aside).
func TestEstimateTokensByScript(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		file     string
		min, max int // the lower and higher of cl100k_base and Claude's tokenizer
	}{
		{"zh", 492, 531}, {"ja", 450, 450}, {"ko", 530, 588}, {"ru", 521, 567},
		{"ar", 542, 706}, {"hi", 775, 823}, {"el", 555, 714},
	} {
		text, err := os.ReadFile(filepath.Join("testdata", "scripts", c.file+".txt"))
		if err != nil {
			t.Fatal(err)
		}
		got := EstimateTokens(string(text))
		if lo, hi := c.min*9/10, c.max*11/10; got < lo || got > hi {
			t.Errorf("%s: EstimateTokens = %d, want %d..%d (measured %d..%d)", c.file, got, lo, hi, c.min, c.max)
		}
	}
}

// ASCII keeps the old rule exactly, ceil(bytes/4), whatever its length
// (the eight-byte path and the byte path must agree).
func TestEstimateTokensASCIIIsBytesOverFour(t *testing.T) {
	t.Parallel()
	s := strings.Repeat("func main() { fmt.Println(\"hi\") }\n", 40)
	for n := 0; n <= len(s); n++ {
		if got, want := EstimateTokens(s[:n]), (n+3)/4; got != want {
			t.Fatalf("EstimateTokens(%d ASCII bytes) = %d, want %d", n, got, want)
		}
	}
}

func TestEstimateTokensRates(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		s    string
		want int
	}{
		{"", 0},
		{"中文字", 4},                    // 3 × 1.15 = 3.45
		{"한국어", 5},                    // 3 × 1.4
		{"Привет", 4},                 // 6 × 0.55 = 3.3
		{"Αθήνα", 6},                  // 5 × 1.2
		{"مرحبا", 5},                  // 5 × 0.95 = 4.75
		{"नमस्ते", 8},                 // 6 × 1.2 = 7.2
		{"héllo", 2},                  // 4 × 0.25 + 0.5
		{"🙂🙂", 4},                     // two each above the BMP
		{"\xff\xfe", 2},               // invalid bytes: one each
		{"\xe4\xb8", 2},               // a cut rune: its bytes, one each
		{"ab\u2014cd", 2},             // an em dash: one token, with 4 ASCII bytes
		{strings.Repeat("文", 20), 23}, // 20 × 1.15
	} {
		if got := EstimateTokens(c.s); got != c.want {
			t.Errorf("EstimateTokens(%q) = %d, want %d", c.s, got, c.want)
		}
	}
}

// Adding text never lowers the estimate. (Completing a rune cut in two
// may: its bytes cost more apart than the character does.)
func FuzzEstimateTokensMonotone(f *testing.F) {
	f.Add("hello, 世界", "Привет")
	f.Add("🙂", "x\u2014")
	f.Fuzz(func(t *testing.T, a, b string) {
		if !utf8.ValidString(a) || !utf8.ValidString(b) {
			t.Skip()
		}
		if EstimateTokens(a+b) < EstimateTokens(a) {
			t.Fatalf("EstimateTokens(%q) < EstimateTokens(%q)", a+b, a)
		}
	})
}
