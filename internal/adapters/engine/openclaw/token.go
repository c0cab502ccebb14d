package openclaw

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/agentplane/agentplane/internal/adapters/engine"
)

var _ engine.TokenChecker = (*Engine)(nil)

// probeTool is a tool no gateway has: invoking it has no effect.
const probeTool = "agentplane_token_probe"

// TokenAccepted implements engine.TokenChecker: POST /tools/invoke of a tool that does not
// exist answers 404 to an authorized caller and 401 to any other. (OpenClaw answers a refused
// token after a delay of up to a second; an accepted one at once.)
func (e *Engine) TokenAccepted(ctx context.Context, baseURL, token string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(baseURL, "/")+"/tools/invoke",
		strings.NewReader(`{"tool":"`+probeTool+`","args":{}}`))
	if err != nil {
		return false, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.httpClient().Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	switch resp.StatusCode {
	case http.StatusNotFound:
		return true, nil
	case http.StatusUnauthorized, http.StatusForbidden:
		return false, nil
	}
	return false, fmt.Errorf("gateway token check: HTTP %d: %q", resp.StatusCode, snippet(body))
}
