package hostile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// answer is what came back for one request.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// checkAnswer says what is wrong with an answer of op, or nil. The properties:
//   - a 5xx only where the document lists its message as a 500 of the route (engine failures;
//     never the generic `Internal server error`, which is what a panic or an unmapped error
//     becomes), and no other 5xx status at all;
//   - every error (4xx, 5xx) is JSON in the envelope of the route's family: /v0
//     {"error": "<string>"}, /v3 {"error": {"code": <the HTTP status>, "message": "<string>"}};
//   - success bodies are JSON (a stream's events' data are); the only redirect is the mux's to the clean form of the path.
func checkAnswer(op operation, ans answer) error {
	switch {
	case ans.status >= 300 && ans.status < 400:
		// The mux redirects a path that is not clean ("/a/../b", "//") to its clean form.
		loc := ans.header.Get("Location")
		if (ans.status != http.StatusTemporaryRedirect && ans.status != http.StatusMovedPermanently) ||
			!strings.HasPrefix(loc, "/") || strings.Contains(loc, "/../") || strings.Contains(loc, "//") {
			return fmt.Errorf("redirect %d to %q", ans.status, loc)
		}
		return nil
	case ans.status < 300 && strings.HasPrefix(ans.header.Get("Content-Type"), "text/event-stream"):
		// A stream (read up to its first event): each event's data is JSON.
		for _, line := range strings.Split(string(ans.body), "\n") {
			if data, ok := strings.CutPrefix(line, "data:"); ok && !json.Valid([]byte(data)) {
				return fmt.Errorf("status %d: an event's data is not JSON: %.200q", ans.status, data)
			}
		}
		return nil
	case ans.status < 300:
		if !json.Valid(ans.body) {
			return fmt.Errorf("status %d with a body that is not JSON: %.200q", ans.status, ans.body)
		}
		return nil
	}
	if ct := ans.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return fmt.Errorf("error %d with Content-Type %q: %.200q", ans.status, ct, ans.body)
	}
	msg, err := envelope(op.v3(), ans.status, ans.body)
	if err != nil {
		return fmt.Errorf("error %d: %w: %.300q", ans.status, err, ans.body)
	}
	if ans.status >= 500 && (ans.status != http.StatusInternalServerError || !op.Engine500[msg]) {
		return fmt.Errorf("undocumented %d %q", ans.status, msg)
	}
	return nil
}

// envelope checks an error body's envelope and returns its message.
func envelope(v3 bool, status int, raw []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var body map[string]json.RawMessage
	if err := dec.Decode(&body); err != nil {
		return "", fmt.Errorf("body is not a JSON object: %v", err)
	}
	if dec.More() {
		return "", fmt.Errorf("trailing data after the JSON object")
	}
	if !v3 {
		var msg string
		if err := json.Unmarshal(body["error"], &msg); err != nil || msg == "" {
			return "", fmt.Errorf(`/v0 envelope wants {"error": "<string>"}`)
		}
		return msg, nil
	}
	var e struct {
		Code    *int    `json:"code"`
		Message *string `json:"message"`
	}
	if len(body) != 1 || json.Unmarshal(body["error"], &e) != nil || e.Code == nil || e.Message == nil || *e.Message == "" {
		return "", fmt.Errorf(`/v3 envelope wants {"error": {"code": <status>, "message": "<string>"}}`)
	}
	if *e.Code != status {
		return "", fmt.Errorf("/v3 error code %d differs from the HTTP status", *e.Code)
	}
	return *e.Message, nil
}
