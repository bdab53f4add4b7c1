package deputy

import (
	"context"

	"github.com/deputy-run/deputy/store"
)

// Attempt is one recorded try of a model call: its number within the
// turn, the HTTP status, the error, the latency and the wait before the
// retry that followed it.
type Attempt = store.Attempt

// Attempts lists instance id's model-call attempts by turn, then attempt
// number (an unknown id is store.ErrNotFound). The providers report every
// HTTP attempt; the in-process scripted model (ModelSpec "fake") makes
// none, so its instances have no attempts.
func (rt *Runtime) Attempts(ctx context.Context, id string) ([]Attempt, error) {
	return rt.st.Attempts(ctx, id)
}
