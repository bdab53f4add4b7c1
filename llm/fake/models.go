package fake

import "net/http"

// modelsWire tells which provider a GET /v1/models is asking, by its headers:
// Anthropic's clients send anthropic-version, OpenAI's do not.
func modelsWire(h http.Header) Provider {
	if h.Get("anthropic-version") != "" || h.Get("x-api-key") != "" {
		return Anthropic
	}
	return OpenAI
}

// models answers GET /v1/models (id empty) and GET /v1/models/{id}.
func (s *Server) models(ex *exchange, id string) {
	ex.fail(apiErr(http.StatusNotFound, "Not found"))
}
