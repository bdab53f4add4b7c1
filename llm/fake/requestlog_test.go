package fake

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// getLog fetches /_deputy/requests with query q as a client in another
// language would.
func getLog(t *testing.T, url, method, q string, kv ...string) (int, RequestLog, string) {
	t.Helper()
	req, err := http.NewRequest(method, url+"/_deputy/requests"+q, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Set(kv[i], kv[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	var l RequestLog
	if res.StatusCode == 200 {
		if err := json.Unmarshal(b, &l); err != nil {
			t.Fatalf("log is not JSON: %v\n%s", err, b)
		}
	}
	return res.StatusCode, l, string(b)
}

func TestRequestLogEndpointPollsAndClears(t *testing.T) {
	t.Parallel()
	s, url := srvStart(t, Options{})
	srvPost(t, url, "/v1/messages", helloAnthropic)
	srvPost(t, url, "/v1/chat/completions", helloOpenAI)
	status, all, body := getLog(t, url, http.MethodGet, "")
	if status != 200 || len(all.Requests) != 2 || all.LastSeq != 2 {
		t.Fatalf("GET: %d %s", status, body)
	}
	if all.Requests[1].Wire != OpenAI || srvDig(srvJSON(t, all.Requests[1].Response), "choices", 0, "message", "content") == nil {
		t.Fatalf("second entry: %+v", all.Requests[1])
	}
	srvPost(t, url, "/v1/messages", helloAnthropic)
	_, next, _ := getLog(t, url, http.MethodGet, "?since=2")
	if len(next.Requests) != 1 || next.Requests[0].Seq != 3 || next.LastSeq != 3 {
		t.Fatalf("since=2: %+v", next)
	}
	_, none, _ := getLog(t, url, http.MethodGet, "?since=3")
	if len(none.Requests) != 0 || none.LastSeq != 3 {
		t.Fatalf("since=3: %+v", none)
	}
	if status, _, _ := getLog(t, url, http.MethodDelete, ""); status != http.StatusNoContent {
		t.Fatalf("DELETE: %d", status)
	}
	if len(s.Requests()) != 0 {
		t.Fatal("DELETE left entries")
	}
	srvPost(t, url, "/v1/messages", helloAnthropic)
	_, after, _ := getLog(t, url, http.MethodGet, "?since=3")
	if len(after.Requests) != 1 || after.Requests[0].Seq != 4 {
		t.Fatalf("after DELETE the numbers go on: %+v", after)
	}
}

func TestRequestLogEndpointRefusesBadInput(t *testing.T) {
	t.Parallel()
	_, url := srvStart(t, Options{APIKey: "k-1"})
	if status, _, body := getLog(t, url, http.MethodGet, ""); status != 401 || strings.Contains(body, "k-1") {
		t.Fatalf("no key: %d %s", status, body)
	}
	if status, _, body := getLog(t, url, http.MethodGet, "?since=x", "x-api-key", "k-1"); status != 400 || !strings.Contains(body, `since: \"x\" is not a sequence number`) {
		t.Fatalf("bad since: %d %s", status, body)
	}
	if status, _, _ := getLog(t, url, http.MethodPost, "", "x-api-key", "k-1"); status != 405 {
		t.Fatalf("POST: %d", status)
	}
	if status, l, _ := getLog(t, url, http.MethodGet, "", "Authorization", "Bearer k-1"); status != 200 || l.Requests == nil {
		t.Fatalf("with the key: %d %+v (requests must be [] not null)", status, l)
	}
}
