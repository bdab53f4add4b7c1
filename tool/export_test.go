package tool

import "encoding/json"

// OnFastPath reports whether a tool input schema is checked by the fast
// path (tests outside the package use it on the built-in tools).
func OnFastPath(schema json.RawMessage) bool { return fastTopLevel(schema) != nil }
