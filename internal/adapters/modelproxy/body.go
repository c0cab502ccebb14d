package modelproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
)

const (
	// MaxRequestBody bounds a model request's body (prompts with images and documents
	// included); a larger one answers 413 and is not forwarded.
	MaxRequestBody = 32 << 20
	// DefaultMaxBufferedBodies bounds the request bodies a proxy holds at once: agents
	// sending large bodies together wait for room instead of exhausting the manager's memory.
	DefaultMaxBufferedBodies = 512 << 20
	// bodyStep is how much room a body of unknown length takes at a time.
	bodyStep = 1 << 20
)

// readBody reads a POST's body and what it says about cost; it asks an OpenAI-style chat
// stream for its usage.
func (p *Proxy) readBody(w http.ResponseWriter, r *http.Request, ex *exchange) bool {
	if r.Method != http.MethodPost {
		return true
	}
	body, err := p.readAll(w, r, ex)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		ex.code = http.StatusRequestEntityTooLarge
		ex.route.writeError(w, ex.code, errTooLarge, fmt.Sprintf("agentplane: request body over %d bytes", p.maxBody))
		return false
	case err != nil:
		ex.code = 499 // the client left while waiting or sending
		return false
	}
	ex.req = readRequest(ex.endpoint, ex.rest, body)
	if !ex.req.capped && !ex.endpoint.noOutput {
		// Without a limit of the client's, the default the request reserves is written into
		// it: what it may cost stays within its reservation.
		ex.req.body, _ = capOutput(ex.req.body, ex.endpoint.capField)
	}
	if ex.route.askUsage && ex.endpoint.chat && ex.req.stream {
		ex.req.body, _ = askUsage(ex.req.body)
	}
	return true
}

// readAll reads r's body, at most p.maxBody bytes, once the body budget has room for it
// (ex.held records what it took; ServeHTTP gives it back). A body of known length is read
// to its length and no further: Go's HTTP/1 server may close a request body once its last
// byte is read, and a read past it fails instead of answering EOF.
func (p *Proxy) readAll(w http.ResponseWriter, r *http.Request, ex *exchange) ([]byte, error) {
	ctx := r.Context()
	if n := r.ContentLength; n >= 0 {
		if n > p.maxBody {
			return nil, &http.MaxBytesError{Limit: p.maxBody}
		}
		if err := p.acquireBody(ctx, n); err != nil {
			return nil, err
		}
		ex.held = n
		b := make([]byte, n)
		_, err := io.ReadFull(r.Body, b)
		return b, err
	}
	body := http.MaxBytesReader(w, r.Body, p.maxBody)
	var buf bytes.Buffer
	for {
		step := min(bodyStep, p.maxBody+1-ex.held)
		if err := p.acquireBody(ctx, step); err != nil {
			return nil, err
		}
		ex.held += step
		_, err := io.CopyN(&buf, body, step)
		switch {
		case errors.Is(err, io.EOF):
			return buf.Bytes(), nil
		case err != nil:
			return nil, err
		}
	}
}

// acquireBody takes n bytes of the body budget, waiting for room if it has none; a request
// waiting counts in the bodies-waiting gauge meanwhile.
func (p *Proxy) acquireBody(ctx context.Context, n int64) error {
	if p.bodies.TryAcquire(n) {
		return nil
	}
	p.m.bodiesWaiting.Inc()
	defer p.m.bodiesWaiting.Dec()
	return p.bodies.Acquire(ctx, n)
}
