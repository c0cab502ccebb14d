package ops

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/rules/secrets"
)

// Secret messages (the contract fixes the 503, the 409s and `Conflicting secrets`).
const (
	MsgSecretsNotConfigured = "Secrets not configured"
	MsgDuplicateSecret      = "Duplicate secret name"
	MsgConflictingSecrets   = "Conflicting secrets"
	MsgSecretNameRequired   = "Secret name is required"
	MsgSecretValueRequired  = "Secret value is required"
	MsgSecretNameTooLong    = "Secret name must be at most 128 characters"
	MsgSecretValueTooLong   = "Secret value must be at most 32 KiB"
	MsgSecretNotFound       = "Secret not found"
	MsgSecretAttached       = "Secret is attached to an agent"
	MsgInvalidProvider      = "Invalid provider"
	MsgInvalidEnvName       = "Invalid envName"
	MsgReservedEnvName      = "envName is reserved: " + secrets.ReservedEnvReason
	MsgSecretIDsRequired    = "secretIds is required"
	maxSecretValueBytes     = 32 << 10
)

var (
	providerRe = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
	envNameRe  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

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

// NewSecret is a secret to create: its value is sealed before anything is stored.
type NewSecret struct {
	Name     string
	Value    string
	Provider string
	EnvName  string
}

// validate applies the contract's rules to a new secret.
func (n NewSecret) validate() error {
	switch {
	case strings.TrimSpace(n.Name) == "":
		return Fail(Invalid, MsgSecretNameRequired)
	case n.Value == "":
		return Fail(Invalid, MsgSecretValueRequired)
	case utf8.RuneCountInString(n.Name) > 128 || !utf8.ValidString(n.Name):
		return Fail(Invalid, MsgSecretNameTooLong)
	case len(n.Value) > maxSecretValueBytes:
		return Fail(Invalid, MsgSecretValueTooLong)
	case n.Provider != "" && !providerRe.MatchString(n.Provider):
		return Fail(Invalid, MsgInvalidProvider)
	case n.EnvName != "" && !envNameRe.MatchString(n.EnvName):
		return Fail(Invalid, MsgInvalidEnvName)
	case secrets.IsReservedEnvName(secrets.EnvNameOf(&agentsv1.AgentSecret{Spec: agentsv1.AgentSecretSpec{Name: n.Name, EnvName: n.EnvName}})):
		// Also a name whose derived envName is reserved (`ld_preload`): the CRD refuses both.
		return Fail(Invalid, MsgReservedEnvName)
	}
	return nil
}

// CreateSecret seals the value and creates the workspace's AgentSecret; a second secret of the
// same name is a Conflict (`Duplicate secret name`).
func (o *Ops) CreateSecret(ctx context.Context, t Scope, n NewSecret) (*agentsv1.AgentSecret, error) {
	if err := n.validate(); err != nil {
		return nil, err
	}
	if o.d.Sealer == nil {
		return nil, Fail(Unavailable, MsgSecretsNotConfigured)
	}
	name := SecretObjectName(n.Name)
	sealed, err := o.d.Sealer.Seal(ctx, t.Namespace, name, []byte(n.Value))
	if err != nil {
		if errors.Is(err, secrets.ErrNotConfigured) {
			return nil, Because(Unavailable, MsgSecretsNotConfigured, err)
		}
		return nil, err
	}
	sec := &agentsv1.AgentSecret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: t.Namespace},
		Spec: agentsv1.AgentSecretSpec{
			Name: n.Name, Provider: n.Provider, EnvName: n.EnvName, EncryptedValue: sealed,
		},
	}
	if err := o.d.Client.Create(ctx, sec); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, Fail(Conflict, MsgDuplicateSecret)
		}
		return nil, err
	}
	return sec, nil
}

// Secrets lists the workspace's secrets (live), by name.
func (o *Ops) Secrets(ctx context.Context, t Scope) ([]agentsv1.AgentSecret, error) {
	var list agentsv1.AgentSecretList
	if err := o.d.APIReader.List(ctx, &list, client.InNamespace(t.Namespace)); err != nil {
		return nil, err
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Spec.Name < list.Items[j].Spec.Name })
	return list.Items, nil
}

// Secret reads a secret of the workspace from the API server.
func (o *Ops) Secret(ctx context.Context, t Scope, id string) (*agentsv1.AgentSecret, error) {
	sec := &agentsv1.AgentSecret{}
	if err := o.d.APIReader.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: id}, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, Fail(NotFound, MsgSecretNotFound)
		}
		return nil, err
	}
	return sec, nil
}

// DeleteSecret refuses to delete a secret an agent attaches, judged from the agents' specs
// (read live). The delete is conditional on the secret's resourceVersion read before that
// check: an attach that lands in between stamps the secret (AnnotationSecretAttachedAt), the
// delete fails on the version and checks again, so it never orphans an agent.
func (o *Ops) DeleteSecret(ctx context.Context, t Scope, id string) (*agentsv1.AgentSecret, error) {
	var sec *agentsv1.AgentSecret
	err := retry.OnError(specRetry, apierrors.IsConflict, func() error {
		var err error
		if sec, err = o.Secret(ctx, t, id); err != nil {
			return err
		}
		attached, err := o.agentsAttaching(ctx, t.Namespace, sec.Name)
		if err != nil {
			return err
		}
		if len(attached) > 0 {
			return Fail(Conflict, MsgSecretAttached)
		}
		rv := sec.ResourceVersion
		return o.d.Client.Delete(ctx, sec, client.Preconditions{ResourceVersion: &rv})
	})
	switch {
	case apierrors.IsConflict(err):
		return nil, Fail(Conflict, MsgSecretAttached)
	case apierrors.IsNotFound(err):
		return nil, Fail(NotFound, MsgSecretNotFound)
	case err != nil:
		return nil, err
	}
	return sec, nil
}
