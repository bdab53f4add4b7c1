package serve_test

import (
	"strings"
	"testing"
)

// POST /api/instances/{id}/approval refuses what does not say one thing:
// approve missing, a reason with an approval, always with a denial,
// unknown fields, broken JSON. An instance asking a question (not an
// approval) shows no approval.
func TestApprovalBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var in instance
	e.want(201, "POST", "/api/instances", `{"task":"merge the work"}`, &in)
	e.settle(in.ID)
	path := "/api/instances/" + in.ID + "/approval"
	for body, want := range map[string]string{
		`{}`:                                 `"approve": true or false`,
		`{"always": true}`:                   `"approve": true or false`,
		`{"approve": true, "reason": "x"}`:   "a reason goes with a denial",
		`{"approve": false, "always": true}`: "always goes with an approval",
		`{"approve": true, "alwyas": true}`:  "alwyas",
		`{"approve": tru`:                    "",
		`{"approve": "yes"}`:                 "",
	} {
		msg := e.wantError(400, "bad_request", "POST", path, body)
		if !strings.Contains(msg, want) {
			t.Errorf("%s: %q, want it to say %q", body, msg, want)
		}
	}
	_, b, _ := e.do("GET", "/api/instances/"+in.ID, "")
	if strings.Contains(string(b), `"approval"`) {
		t.Errorf("an instance asking a question shows an approval: %s", b)
	}
}
