package cost

import (
	"fmt"
	"sync"
)

// Hint is the line to add to deputy.yaml's `prices:` section (indented
// under it) that prices model, for a model no table knows: the model's
// entry with its four prices zero, for the user to replace with the
// provider's published ones. The CLI prints it under its cost table, once
// per model (see Unpriced), so an unknown cost says how to make it known.
//
// The key is written plain, as deputy.yaml's own examples write
// provider:model: a block mapping takes openai:gpt-9 as one scalar. (A
// quoted key would be read as the same text; the plain one is the
// easier to read.)
func Hint(model string) string {
	return fmt.Sprintf("%s: {input: 0, output: 0, cache_write: 0, cache_read: 0}  # USD per million tokens", model)
}

// Unpriced remembers the models a runtime has already said have no known
// price, so it says so once per model, not once per instance or turn. The
// zero value is ready; it is safe for concurrent use.
type Unpriced struct {
	mu   sync.Mutex
	seen map[string]bool
}

// First reports whether model is being noted for the first time.
func (u *Unpriced) First(model string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.seen[model] {
		return false
	}
	if u.seen == nil {
		u.seen = map[string]bool{}
	}
	u.seen[model] = true
	return true
}
