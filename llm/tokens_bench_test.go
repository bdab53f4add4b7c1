package llm

import (
	"os"
	"strings"
	"testing"
)

// BenchmarkEstimateTokens measures the counting rule on ASCII prose, Go
// source, and the non-Latin samples of testdata/scripts, each about 4 KB.
func BenchmarkEstimateTokens(b *testing.B) {
	for _, name := range []string{"en", "go", "zh", "ru", "ar"} {
		var text string
		if name == "go" {
			src, err := os.ReadFile("tokens.go")
			if err != nil {
				b.Fatal(err)
			}
			text = string(src)
		} else {
			src, err := os.ReadFile("testdata/scripts/" + name + ".txt")
			if err != nil {
				b.Fatal(err)
			}
			text = string(src)
		}
		text = strings.Repeat(text, 4096/len(text)+1)[:4096]
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				n += EstimateTokens(text)
			}
			if n == 0 {
				b.Fatal("no tokens")
			}
		})
	}
}
