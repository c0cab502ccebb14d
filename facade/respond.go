package facade

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
)

// Response is a successful answer; its body is written as JSON.
type Response struct {
	Status int
	Body   any
	Header http.Header
	// Stream, when set, writes the answer itself after Header is applied (Status and Body are
	// unused): a stream such as server-sent events, started only once authentication, access
	// checks and everything that can fail with an error answer have run.
	Stream func(w http.ResponseWriter)
}

func ok(body any) (*Response, error) { return &Response{Status: http.StatusOK, Body: body}, nil }
func created(body any) (*Response, error) {
	return &Response{Status: http.StatusCreated, Body: body}, nil
}

// data wraps a body in the v3 `{"data": ...}` envelope.
func data(v any) map[string]any { return map[string]any{"data": v} }

// writeJSON writes v with an exact Content-Length. Encoding failures become a 500 body that
// is itself valid JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		buf.Reset()
		buf.WriteString(`{"error":"` + msgInternal + `"}` + "\n")
		status = http.StatusInternalServerError
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// errorBody is the error envelope of the API family a path belongs to: /v3 answers
// {"error":{"code":N,"message":"..."}}, everything else {"error":"..."}.
func errorBody(path string, e *Error) any {
	if isV3(path) {
		return map[string]any{"error": map[string]any{"code": e.Status, "message": e.Message}}
	}
	body := make(map[string]any, len(e.Fields)+1)
	for k, v := range e.Fields {
		body[k] = v
	}
	body["error"] = e.Message
	return body
}

func isV3(path string) bool { return path == "/v3" || len(path) >= 4 && path[:4] == "/v3/" }
