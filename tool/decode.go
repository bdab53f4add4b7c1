package tool

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
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

// SentLimit is how many bytes of a call's unusable arguments BadArguments
// quotes back to the model: enough to see where the JSON went wrong in an
// ordinary call, not a second copy of a huge one (a file's content cut
// short by max_tokens, say), which the transcript holds already.
const SentLimit = 500

// BadArguments is the error result of a call to tool name whose arguments
// could not be used at all (llm.Block.InputError says why): not JSON, or
// JSON that is not an object. The call is not run. The result quotes what
// the model sent, cut at SentLimit bytes, because the model cannot see it
// otherwise: the provider sends the call back with {} where the wire
// needs an object (see llm.ToolCall).
func BadArguments(name string, why error, sent string) string {
	quoted := sent
	if len(quoted) > SentLimit {
		k := SentLimit
		for k > 0 && !utf8.RuneStart(quoted[k]) {
			k--
		}
		quoted = fmt.Sprintf("%s… (%d bytes in all)", quoted[:k], len(sent))
	}
	return fmt.Sprintf("invalid arguments for %s: %v; you sent: %s\nThe call was not run. "+
		"Call %s again with its arguments as one JSON object.", name, why, quoted, name)
}
