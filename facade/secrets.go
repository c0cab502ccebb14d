package facade

import (
	"net/http"
	"time"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/ops"
	"github.com/agentplane/agentplane/internal/rules/secrets"
)

// secretView is a secret as the REST API shows it: never its value.
type secretView struct {
	ID         string    `json:"id"`
	Name       string    `json:"name"`
	Provider   string    `json:"provider,omitempty"`
	EnvName    string    `json:"envName"`
	AttachedTo []string  `json:"attachedTo"`
	CreatedAt  time.Time `json:"createdAt"`
}

func viewSecret(s *agentsv1.AgentSecret) secretView {
	return secretView{
		ID: s.Name, Name: s.Spec.Name, Provider: s.Spec.Provider, EnvName: secrets.EnvNameOf(s),
		AttachedTo: append([]string{}, s.Status.AttachedTo...), CreatedAt: s.CreationTimestamp.UTC(),
	}
}

type createSecretRequest struct {
	Name     string `json:"name"`
	Value    string `json:"value"`
	Provider string `json:"provider"`
	EnvName  string `json:"envName"`
}

func (s *Server) createSecret(r *http.Request, c *Caller) (*Response, error) {
	var req createSecretRequest
	if err := decodeJSON(r, &req, msgInvalidBody); err != nil {
		return nil, err
	}
	sec, err := s.ops.CreateSecret(r.Context(), c.scope(), ops.NewSecret(req))
	if err != nil {
		return nil, err
	}
	return created(map[string]any{"secret": viewSecret(sec)})
}

func (s *Server) listSecrets(r *http.Request, c *Caller) (*Response, error) {
	list, err := s.ops.Secrets(r.Context(), c.scope())
	if err != nil {
		return nil, err
	}
	out := make([]secretView, 0, len(list))
	for i := range list {
		out = append(out, viewSecret(&list[i]))
	}
	return ok(map[string]any{"secrets": out})
}

func (s *Server) deleteSecret(r *http.Request, c *Caller) (*Response, error) {
	sec, err := s.ops.DeleteSecret(r.Context(), c.scope(), r.PathValue("secretId"))
	if err != nil {
		return nil, err
	}
	return ok(map[string]any{"id": sec.Name, "deleted": true})
}
