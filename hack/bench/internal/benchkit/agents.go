package benchkit

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Model is the model the benchmarks' agents answer with: the fake provider's, behind the model
// proxy's anthropic upstream.
const Model = "anthropic/claude-sonnet-4-6"

// Expect sends a request and wants status want; it returns the answer's body.
func (c Client) Expect(method, path string, body any, want int) ([]byte, error) {
	status, out, err := c.Call(method, path, body)
	if err == nil && status != want {
		err = fmt.Errorf("%s %s: %d, want %d: %s", method, path, status, want, out)
	}
	return out, err
}

// ProviderKey stores a workspace secret holding an anthropic key (kept in the model proxy once
// attached) and returns its id.
func (c Client) ProviderKey() (string, error) {
	out, err := c.Expect("POST", "/v0/secrets", map[string]string{"name": "ANTHROPIC_API_KEY", "value": "sk-ant-bench", "provider": "anthropic"}, 201)
	if err != nil {
		return "", err
	}
	var sec struct{ Secret struct{ ID string } }
	err = json.Unmarshal(out, &sec)
	return sec.Secret.ID, err
}

// AgentOf decodes an answer's agent: its id and status.
func AgentOf(body []byte) (id, status string, err error) {
	var out struct{ Agent struct{ ID, Status string } }
	err = json.Unmarshal(body, &out)
	return out.Agent.ID, out.Agent.Status, err
}

// WaitStatus waits until agent id's status is want, for at most bound.
func (c Client) WaitStatus(ctx context.Context, id, want string, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for {
		_, out, err := c.Call("GET", "/v0/agents/"+id, nil)
		if err == nil {
			if _, status, err := AgentOf(out); err == nil && status == want {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("agent %s not %s after %s: %s", id, want, bound, out)
		}
		if err := Sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// ModelAgent creates an agent named name through POST /v0/agents, waits until it runs (for at
// most bound), attaches the provider key secretID and sets its model (Model) by PUT /config:
// an agent that answers its channels' messages. It returns the agent's id.
func (c Client) ModelAgent(ctx context.Context, name, secretID string, bound time.Duration) (string, error) {
	out, err := c.Expect("POST", "/v0/agents", map[string]string{"name": name}, 201)
	if err != nil {
		return "", err
	}
	id, _, err := AgentOf(out)
	if err != nil {
		return "", err
	}
	base := "/v0/agents/" + id
	if err := c.WaitStatus(ctx, id, "running", bound); err != nil {
		return "", err
	}
	if _, err := c.Expect("POST", base+"/secrets", map[string]any{"secretIds": []string{secretID}}, 200); err != nil {
		return "", err
	}
	out, err = c.Expect("GET", base+"/config", nil, 200)
	if err != nil {
		return "", err
	}
	var cfg struct{ Config map[string]any }
	if err := json.Unmarshal(out, &cfg); err != nil {
		return "", err
	}
	agents, _ := cfg.Config["agents"].(map[string]any)
	if agents == nil {
		agents = map[string]any{}
		cfg.Config["agents"] = agents
	}
	defaults, _ := agents["defaults"].(map[string]any)
	if defaults == nil {
		defaults = map[string]any{}
		agents["defaults"] = defaults
	}
	defaults["model"] = map[string]any{"primary": Model}
	_, err = c.Expect("PUT", base+"/config", map[string]any{"config": cfg.Config}, 200)
	return id, err
}
