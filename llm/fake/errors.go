package fake

import (
	"fmt"
	"net/http"
	"time"
)

// errKind is a class of API error, named once and spelled per wire.
type errKind int

const (
	errInvalid errKind = iota
	errAuth
	errNotFound
	errTooLarge
	errRateLimit
	errAPI
	errOverloaded
)

// wireError is an error answer before (or instead of) a response body.
type wireError struct {
	status int
	kind   errKind
	// msg is the Anthropic message, and the OpenAI one unless oaiMsg is set.
	msg string
	// OpenAI's error object has param and code besides message and type.
	oaiMsg   string
	oaiParam string
	oaiCode  string
	// retryAfter, when set, is sent as retry-after (seconds, rounded up)
	// and retry-after-ms.
	retryAfter *time.Duration
	// details is the Messages API's machine-readable error.details
	// ({"error_code": ...}), which clients such as the SDKs' message threads
	// switch on; nil for errors that carry none.
	details *anthErrorDetails
}

// anthErrorDetails is error.details of a Messages API error (the SDKs'
// ErrorDetailsUnion, keyed by error_code).
type anthErrorDetails struct {
	ErrorCode   string   `json:"error_code"`
	Unsupported []string `json:"unsupported,omitempty"`
}

// invalid is a 400 invalid_request_error with an Anthropic-style message.
func invalid(format string, args ...any) *wireError {
	return &wireError{status: http.StatusBadRequest, kind: errInvalid, msg: fmt.Sprintf(format, args...)}
}

// oaiInvalid is a 400 invalid_request_error worded as OpenAI words it.
func oaiInvalid(param, code, format string, args ...any) *wireError {
	m := fmt.Sprintf(format, args...)
	return &wireError{status: http.StatusBadRequest, kind: errInvalid, msg: m, oaiMsg: m, oaiParam: param, oaiCode: code}
}

// apiErr classifies a status as the error kind the APIs use for it.
func apiErr(status int, msg string) *wireError {
	k := errInvalid
	switch status {
	case http.StatusUnauthorized:
		k = errAuth
	case http.StatusNotFound:
		k = errNotFound
	case http.StatusRequestEntityTooLarge:
		k = errTooLarge
	case http.StatusTooManyRequests:
		k = errRateLimit
	case 529, http.StatusServiceUnavailable:
		k = errOverloaded
	default:
		if status >= 500 {
			k = errAPI
		}
	}
	return &wireError{status: status, kind: k, msg: msg}
}

// internalErr is a 500 for a failure inside the fake itself (a Responder
// that panicked or produced an invalid reply); both wires carry its text.
func internalErr(err error) *wireError {
	return &wireError{status: http.StatusInternalServerError, kind: errAPI, msg: err.Error(), oaiMsg: err.Error()}
}

// statusOn is the HTTP status on wire p: OpenAI has no 529 and answers an
// overloaded engine with 503.
func (e *wireError) statusOn(p Provider) int {
	if p == OpenAI && e.status == 529 {
		return http.StatusServiceUnavailable
	}
	return e.status
}

// anthropicType is the error.type of the Messages API.
func (e *wireError) anthropicType() string {
	switch e.kind {
	case errAuth:
		return "authentication_error"
	case errNotFound:
		return "not_found_error"
	case errTooLarge:
		return "request_too_large"
	case errRateLimit:
		return "rate_limit_error"
	case errAPI:
		return "api_error"
	case errOverloaded:
		return "overloaded_error"
	}
	return "invalid_request_error"
}

// openaiType is the error.type of the OpenAI API, and the code it pairs
// with when the error itself carries none.
func (e *wireError) openaiType() (typ, code string) {
	switch e.kind {
	case errRateLimit:
		return "requests", "rate_limit_exceeded"
	case errAPI, errOverloaded:
		return "server_error", ""
	}
	return "invalid_request_error", ""
}

type anthropicErrorBody struct {
	Type      string              `json:"type"`
	Error     anthropicErrorInner `json:"error"`
	RequestID string              `json:"request_id,omitempty"`
}

type anthropicErrorInner struct {
	Type    string            `json:"type"`
	Message string            `json:"message"`
	Details *anthErrorDetails `json:"details,omitempty"`
}

type openaiErrorBody struct {
	Error openaiErrorInner `json:"error"`
}

type openaiErrorInner struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// body renders the error in wire p's shape.
func (e *wireError) body(p Provider, requestID string) []byte {
	if p == OpenAI {
		return mustJSON(e.openaiBody())
	}
	return mustJSON(anthropicErrorBody{Type: "error", Error: anthropicErrorInner{Type: e.anthropicType(), Message: e.msg, Details: e.details}, RequestID: requestID})
}

func (e *wireError) openaiBody() openaiErrorBody {
	typ, code := e.openaiType()
	msg := e.oaiMsg
	if msg == "" {
		msg = e.openaiDefaultMessage()
	}
	if e.oaiCode != "" {
		code = e.oaiCode
	}
	var pp, cp *string
	if e.oaiParam != "" {
		pp = &e.oaiParam
	}
	if code != "" {
		cp = &code
	}
	return openaiErrorBody{Error: openaiErrorInner{Message: msg, Type: typ, Param: pp, Code: cp}}
}

// openaiDefaultMessage words the faults as OpenAI does; other errors keep
// their message.
func (e *wireError) openaiDefaultMessage() string {
	switch e.kind {
	case errRateLimit:
		return "Rate limit reached for requests. Please try again later. Visit https://platform.openai.com/account/rate-limits to learn more."
	case errOverloaded:
		return "The engine is currently overloaded, please try again later."
	case errAPI:
		return "The server had an error while processing your request. Sorry about that!"
	}
	return e.msg
}
