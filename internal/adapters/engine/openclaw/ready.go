package openclaw

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentplane/agentplane/internal/adapters/engine"
)

var _ engine.ReadyChecker = (*Engine)(nil)

// Ready implements engine.ReadyChecker: GET /readyz answers 200 {"ready":true,...} once the
// gateway's start-up sidecars are done (503 {"ready":false,"failing":["startup-sidecars"]}
// before, for about 4 s after /healthz first answers), and its event loop must not report
// itself degraded (it does while the start-up work keeps it busy).
func (e *Engine) Ready(ctx context.Context, baseURL string) error {
	status, body, err := e.probe(ctx, baseURL, "/readyz")
	if err != nil {
		return err
	}
	var r struct {
		Ready     *bool    `json:"ready"`
		Failing   []string `json:"failing"`
		EventLoop *struct {
			Degraded bool     `json:"degraded"`
			Reasons  []string `json:"reasons"`
		} `json:"eventLoop"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.Ready == nil {
		return fmt.Errorf("gateway readiness: HTTP %d, not a readiness answer: %q", status, snippet(body))
	}
	switch {
	case !*r.Ready:
		return fmt.Errorf("gateway not ready: failing %v", r.Failing)
	case r.EventLoop != nil && r.EventLoop.Degraded:
		return fmt.Errorf("gateway busy: event loop degraded (%s)", strings.Join(r.EventLoop.Reasons, ", "))
	}
	return nil
}
