package tool

import "unicode/utf8"

// CutUTF8 returns the first n bytes of b (all of b when it is shorter)
// without a final incomplete character: when a byte limit falls inside a
// character, the partial character is dropped rather than shown as U+FFFD.
// Call it on the part of a longer byte stream that is kept; a b that itself
// ends with a broken sequence loses that too.
func CutUTF8(b []byte, n int) []byte {
	b = b[:max(0, min(n, len(b)))]
	// A character is at most utf8.UTFMax bytes: look no further back for
	// the start of the last one.
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			return b
		}
	}
	return b
}
