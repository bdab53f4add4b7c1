package fake

import "net/http"

// serveRequestLog answers GET /_deputy/requests with the request log.
func (s *Server) serveRequestLog(w http.ResponseWriter, r *http.Request) {
	http.NotFound(w, r)
}
