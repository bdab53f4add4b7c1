package tool

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Decode reads a tool call's input into a T; every built-in tool decodes
// its input this way. Set.Call has already checked the input against the
// tool's schema, so an error here means a value the schema allows but T
// cannot hold (an integer beyond int64, say).
//
// Empty input decodes as {}, the way Set.Call validates it: a model may
// send nothing for a tool whose arguments are all optional, and the tool
// must then see the same empty object the schema accepted.
func Decode[T any](input json.RawMessage) (T, error) {
	var v T
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage("{}")
	}
	if err := json.Unmarshal(input, &v); err != nil {
		return v, fmt.Errorf("invalid arguments: %v", err)
	}
	return v, nil
}
