package apiserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/secrets"
)

// Secret messages (the contract fixes the 503, 409s and `Conflicting secrets`).
const (
	msgSecretsNotConfigured = "Secrets not configured"
	msgDuplicateSecret      = "Duplicate secret name"
	msgConflictingSecrets   = "Conflicting secrets"
	msgSecretNameRequired   = "Secret name is required"
	msgSecretValueRequired  = "Secret value is required"
	msgSecretNameTooLong    = "Secret name must be at most 128 characters"
	msgSecretNotFound       = "Secret not found"
	msgSecretAttached       = "Secret is attached to an agent"
	msgInvalidProvider      = "Invalid provider"
	msgInvalidEnvName       = "Invalid envName"
	msgReservedEnvName      = "envName is reserved: " + secrets.ReservedEnvReason
	msgSecretIDsRequired    = "secretIds is required"
	maxSecretValueBytes     = 32 << 10
)

var (
	providerRe = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
	envNameRe  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
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

// SecretObjectName derives an AgentSecret's object name from its secret name, so the API
// server itself keeps names unique in a workspace (a second create is AlreadyExists).
func SecretObjectName(name string) string {
	sum := sha256.Sum256([]byte(name))
	var slug strings.Builder
	for _, r := range strings.ToLower(name) {
		if slug.Len() >= 40 {
			break
		}
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			slug.WriteRune(r)
		} else if slug.Len() > 0 && !strings.HasSuffix(slug.String(), "-") {
			slug.WriteByte('-')
		}
	}
	s := strings.Trim(slug.String(), "-")
	if s == "" {
		s = "x"
	}
	return "sec-" + s + "-" + hex.EncodeToString(sum[:5])
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
	switch {
	case strings.TrimSpace(req.Name) == "":
		return nil, errorf(http.StatusBadRequest, msgSecretNameRequired)
	case req.Value == "":
		return nil, errorf(http.StatusBadRequest, msgSecretValueRequired)
	case utf8.RuneCountInString(req.Name) > 128 || !utf8.ValidString(req.Name):
		return nil, errorf(http.StatusBadRequest, msgSecretNameTooLong)
	case len(req.Value) > maxSecretValueBytes:
		return nil, errorf(http.StatusBadRequest, "Secret value must be at most 32 KiB")
	case req.Provider != "" && !providerRe.MatchString(req.Provider):
		return nil, errorf(http.StatusBadRequest, msgInvalidProvider)
	case req.EnvName != "" && !envNameRe.MatchString(req.EnvName):
		return nil, errorf(http.StatusBadRequest, msgInvalidEnvName)
	case secrets.IsReservedEnvName(secrets.EnvNameOf(&agentsv1.AgentSecret{Spec: agentsv1.AgentSecretSpec{Name: req.Name, EnvName: req.EnvName}})):
		// Also a name whose derived envName is reserved (`ld_preload`): the CRD refuses both.
		return nil, errorf(http.StatusBadRequest, msgReservedEnvName)
	}
	if s.opts.Sealer == nil {
		return nil, errorf(http.StatusServiceUnavailable, msgSecretsNotConfigured)
	}
	name := SecretObjectName(req.Name)
	sealed, err := s.opts.Sealer.Seal(r.Context(), c.Namespace, name, []byte(req.Value))
	if err != nil {
		if errors.Is(err, secrets.ErrNotConfigured) {
			return nil, withCause(http.StatusServiceUnavailable, msgSecretsNotConfigured, err)
		}
		return nil, err
	}
	sec := &agentsv1.AgentSecret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace},
		Spec: agentsv1.AgentSecretSpec{
			Name: req.Name, Provider: req.Provider, EnvName: req.EnvName, EncryptedValue: sealed,
		},
	}
	if err := s.opts.Client.Create(r.Context(), sec); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, errorf(http.StatusConflict, msgDuplicateSecret)
		}
		return nil, err
	}
	return created(map[string]any{"secret": viewSecret(sec)})
}

func (s *Server) listSecrets(r *http.Request, c *Caller) (*Response, error) {
	var list agentsv1.AgentSecretList
	if err := s.opts.APIReader.List(r.Context(), &list, client.InNamespace(c.Namespace)); err != nil {
		return nil, err
	}
	out := make([]secretView, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, viewSecret(&list.Items[i]))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return ok(map[string]any{"secrets": out})
}

// getSecretLive reads a secret of the caller's workspace from the API server.
func (s *Server) getSecretLive(ctx context.Context, c *Caller, id string) (*agentsv1.AgentSecret, error) {
	sec := &agentsv1.AgentSecret{}
	if err := s.opts.APIReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: id}, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, errorf(http.StatusNotFound, msgSecretNotFound)
		}
		return nil, err
	}
	return sec, nil
}

// deleteSecret refuses to delete a secret an agent attaches, judged from the agents' specs
// (read live). The delete is conditional on the secret's resourceVersion read before that
// check: an attach that lands in between stamps the secret (AnnotationSecretAttachedAt), the
// delete fails on the version and checks again, so it never orphans an agent.
func (s *Server) deleteSecret(r *http.Request, c *Caller) (*Response, error) {
	ctx := r.Context()
	var sec *agentsv1.AgentSecret
	err := retry.OnError(secretRetry, apierrors.IsConflict, func() error {
		var err error
		if sec, err = s.getSecretLive(ctx, c, r.PathValue("secretId")); err != nil {
			return err
		}
		attached, err := s.agentsAttaching(ctx, c.Namespace, sec.Name)
		if err != nil {
			return err
		}
		if len(attached) > 0 {
			return errorf(http.StatusConflict, msgSecretAttached)
		}
		rv := sec.ResourceVersion
		return s.opts.Client.Delete(ctx, sec, client.Preconditions{ResourceVersion: &rv})
	})
	switch {
	case apierrors.IsConflict(err):
		return nil, errorf(http.StatusConflict, msgSecretAttached)
	case apierrors.IsNotFound(err):
		return nil, errorf(http.StatusNotFound, msgSecretNotFound)
	case err != nil:
		return nil, err
	}
	return ok(map[string]any{"id": sec.Name, "deleted": true})
}
