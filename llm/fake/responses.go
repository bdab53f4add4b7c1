package fake

import "net/http"

// openaiResponses answers POST /v1/responses, OpenAI's Responses API.
func (s *Server) openaiResponses(ex *exchange) {
	ex.fail(apiErr(http.StatusNotFound, "Not found"))
}

// openaiResponseByID answers GET and DELETE /v1/responses/{id}.
func (s *Server) openaiResponseByID(ex *exchange, id string) {
	ex.fail(apiErr(http.StatusNotFound, "Not found"))
}
