// Package client is a Go client of agentplane's REST facade (/v0 and /v3), generated from the
// facade's OpenAPI document (docs/openapi.json, `make client`) with oapi-codegen. This file
// adds what the generator does not make: New (base URL and bearer token), Error (the contract's
// error message of an answer that is not 2xx), Logs (an agent's gateway log, tail or follow)
// and, in chat.go, Chat (a turn of a conversation with an agent, streamed).
//
//	c, err := client.New("http://127.0.0.1:8080", os.Getenv("AGENTPLANE_TOKEN"))
//	res, err := client.Checked(c.ListAgentsWithResponse(ctx, nil))
//	if err != nil {
//		return err // an answer that is not 2xx is a *client.Error: "401 Invalid token"
//	}
//	for _, a := range res.JSON200.Agents { fmt.Println(a.Id, a.Name, a.Status) }
package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
)

// Agentplane is a client of one facade with one token: every generated operation
// (ListAgentsWithResponse, CreateSecretWithResponse, ...), Logs and Chat.
type Agentplane struct {
	*ClientWithResponses
	raw *Client
}

// New returns a client of the facade at baseURL (such as http://127.0.0.1:8080, the
// AGENTPLANE_URL of `agentplane dev`) that sends token as its bearer token. opts may set the
// HTTP client (WithHTTPClient) or add request editors.
func New(baseURL, token string, opts ...ClientOption) (*Agentplane, error) {
	opts = append([]ClientOption{WithRequestEditorFn(BearerToken(token))}, opts...)
	raw, err := NewClient(baseURL, opts...)
	if err != nil {
		return nil, err
	}
	return &Agentplane{ClientWithResponses: &ClientWithResponses{ClientInterface: raw}, raw: raw}, nil
}

// BearerToken is a request editor that authenticates with token (a workspace token, or an
// agent's gateway token on that agent's routes).
func BearerToken(token string) RequestEditorFn {
	return func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+token)
		return nil
	}
}

// Error is an answer that is not 2xx: its status and the contract's error string (the /v0
// envelope's `error`, the /v3 envelope's `error.message`).
type Error struct {
	StatusCode int
	Message    string
}

func (e *Error) Error() string {
	if e.StatusCode == 0 { // an error event of a log stream
		return e.Message
	}
	return fmt.Sprintf("%d %s", e.StatusCode, e.Message)
}

// Check returns nil for a 2xx status and an *Error carrying the contract's message otherwise.
// Pass a generated response's StatusCode() and Body.
func Check(status int, body []byte) error {
	if status >= 200 && status < 300 {
		return nil
	}
	return &Error{StatusCode: status, Message: errorMessage(status, body)}
}

// Checked passes on the result of a generated ...WithResponse call, with an *Error in place of
// an answer that is not 2xx:
//
//	res, err := client.Checked(c.GetAgentWithResponse(ctx, id, nil))
func Checked[R any](res *R, err error) (*R, error) {
	if _, err := checkedBody(res, err); err != nil {
		return nil, err
	}
	return res, nil
}

// Decoded is Checked that decodes the 2xx body into T, for a caller that wants the answer as
// a type of its own (the generated responses' bodies are anonymous structs):
//
//	agent, err := client.Decoded[struct{ Agent client.Agent }](c.GetAgentWithResponse(ctx, id, nil))
func Decoded[T, R any](res *R, err error) (T, error) {
	var v T
	body, err := checkedBody(res, err)
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return v, fmt.Errorf("decode the answer: %w", err)
	}
	return v, nil
}

// checkedBody is the body of a 2xx generated response, or the error Checked returns.
func checkedBody[R any](res *R, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	if res == nil {
		return nil, errors.New("no response")
	}
	// Every generated response has Body []byte and HTTPResponse *http.Response.
	v := reflect.ValueOf(res).Elem()
	hr, _ := v.FieldByName("HTTPResponse").Interface().(*http.Response)
	body, _ := v.FieldByName("Body").Interface().([]byte)
	if hr == nil {
		return nil, errors.New("no HTTP response")
	}
	if err := Check(hr.StatusCode, body); err != nil {
		return nil, err
	}
	return body, nil
}

// errorMessage reads the error string of a /v0 ({"error": "..."}) or /v3 ({"error": {"code",
// "message"}}) envelope, or falls back to the status text.
func errorMessage(status int, body []byte) string {
	var env struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(body, &env) == nil {
		var s string
		if json.Unmarshal(env.Error, &s) == nil && s != "" {
			return s
		}
		var v3 struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(env.Error, &v3) == nil && v3.Message != "" {
			return v3.Message
		}
		if env.Message != "" {
			return env.Message
		}
	}
	if t := http.StatusText(status); t != "" {
		return t
	}
	return "HTTP " + strconv.Itoa(status)
}

// LogsOptions selects what Logs reads.
type LogsOptions struct {
	// Tail is how many of the last lines to return (0: the facade's default).
	Tail int
	// Follow streams new lines (Server-Sent Events) until ctx ends or the stream does.
	Follow bool
}

// Logs reads the gateway log of an agent (GET /v0/agents/{agentId}/logs). Without Follow it
// calls line once per line of the tail; with Follow it calls line for each `data:` payload of
// the event stream until the stream ends (nil) or ctx is done (ctx's error). An `event: error`
// of the stream is returned as an *Error with status 0 and its payload as the message.
func (c *Agentplane) Logs(ctx context.Context, agentID string, o LogsOptions, line func(string)) error {
	q := url.Values{}
	if o.Tail > 0 {
		q.Set("tail", strconv.Itoa(o.Tail))
	}
	if o.Follow {
		q.Set("follow", "true")
	}
	u := strings.TrimSuffix(c.raw.Server, "/") + "/v0/agents/" + url.PathEscape(agentID) + "/logs"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	if o.Follow {
		req.Header.Set("Accept", "text/event-stream")
	}
	for _, edit := range c.raw.RequestEditors {
		if err := edit(ctx, req); err != nil {
			return err
		}
	}
	res, err := c.raw.Client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode < 200 || res.StatusCode >= 300 {
		body, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		return Check(res.StatusCode, body)
	}
	if !o.Follow {
		var tail struct {
			Lines []string `json:"lines"`
		}
		if err := json.NewDecoder(res.Body).Decode(&tail); err != nil {
			return fmt.Errorf("decode logs: %w", err)
		}
		for _, l := range tail.Lines {
			line(l)
		}
		return nil
	}
	err = readEvents(res.Body, line)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// readEvents reads a Server-Sent Events stream: each event's data lines go to line, an
// `event: error` ends the read with its data as an *Error.
func readEvents(r io.Reader, line func(string)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	event := ""
	var data []string
	for sc.Scan() {
		l := sc.Text()
		switch {
		case l == "":
			if event == "error" {
				return &Error{Message: strings.Join(data, "\n")}
			}
			event, data = "", nil
		case strings.HasPrefix(l, ":"): // a comment (keep-alive)
		case strings.HasPrefix(l, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(l, "event:"))
		case strings.HasPrefix(l, "data:"):
			d := strings.TrimPrefix(strings.TrimPrefix(l, "data:"), " ")
			if event == "error" {
				data = append(data, d)
			} else {
				line(d)
			}
		}
	}
	if event == "error" {
		return &Error{Message: strings.Join(data, "\n")}
	}
	return sc.Err()
}
