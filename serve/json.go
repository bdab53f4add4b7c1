package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strconv"

	"github.com/deputy-run/deputy"
	"github.com/deputy-run/deputy/store"
)

// apiError is every error's body: a code a program can switch on and a
// message a person can read.
type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // the client went away: nothing to tell it
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	var e apiError
	e.Error.Code, e.Error.Message = code, msg
	writeJSON(w, status, e)
}

// fail answers err with the status its kind deserves: an unknown id is
// 404, a move the state machine refuses 409, a bad request 400; anything
// else is the server's fault (500), said as it is.
func fail(w http.ResponseWriter, err error) {
	var de *deputy.DefinitionError
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, store.ErrIllegalTransition), errors.Is(err, store.ErrTerminal),
		errors.Is(err, store.ErrConflict), errors.Is(err, deputy.ErrNotRoot):
		writeError(w, http.StatusConflict, "conflict", err.Error())
	case errors.As(err, &de), errors.Is(err, errBadRequest), errors.Is(err, deputy.ErrRefused):
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
	default:
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
	}
}

var errBadRequest = errors.New("bad request")

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errBadRequest, fmt.Sprintf(format, args...))
}

// decode reads a JSON body into v: the right content type, at most maxBody
// bytes, no unknown fields, one value. On failure it has answered.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	return decodeMax(w, r, v, maxBody)
}

// decodeMax is decode with another cap on the body.
func decodeMax(w http.ResponseWriter, r *http.Request, v any, limit int64) bool {
	if !contentType(w, r, "application/json") {
		return false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		bodyError(w, err, "the body is not the JSON expected: ")
		return false
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, "bad_request", "the body holds more than one JSON value")
		return false
	}
	return true
}

// bodyError answers a body that could not be read: too large (413), too
// slow (408: its read deadline passed, see Limits.BodyTimeout), or not
// what was expected (400).
func bodyError(w http.ResponseWriter, err error, prefix string) {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the body is over %d bytes", mbe.Limit))
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The connection cannot be reused: the rest of the body is on it.
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusRequestTimeout, "timeout", "the body did not arrive in time")
	default:
		writeError(w, http.StatusBadRequest, "bad_request", prefix+err.Error())
	}
}

// readBody reads a body of the given content type, at most limit bytes.
func readBody(w http.ResponseWriter, r *http.Request, mediaType string, limit int64) ([]byte, bool) {
	if !contentType(w, r, mediaType) {
		return nil, false
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		bodyError(w, err, "reading the body: ")
		return nil, false
	}
	return data, true
}

// contentType checks the request's media type, so a body is never read
// as something it does not say it is. (Cross-site requests riding the
// session cookie are CrossOriginProtection's, and SameSite's, to stop.)
func contentType(w http.ResponseWriter, r *http.Request, want string) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != want {
		writeError(w, http.StatusUnsupportedMediaType, "unsupported_media_type", "send Content-Type: "+want)
		return false
	}
	return true
}

// intParam reads a non-negative integer query parameter, def when absent;
// max bounds it.
func intParam(r *http.Request, name string, def, max int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, badRequest("%s=%q is not a non-negative integer", name, v)
	}
	return min(n, max), nil
}
