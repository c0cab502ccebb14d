package auth

import (
	"context"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// KeyRequest describes a token to mint.
type KeyRequest struct {
	Workspace   string
	UserID      string
	Scopes      []string
	Role        agentsv1.Role
	TTL         time.Duration // 0: no expiry
	Description string
	// Owner, when set, is applied to the ApiKey before it is created (owner references).
	Owner func(*agentsv1.ApiKey) error
}

// CreateKey creates the ApiKey object for a new token in the workspace's namespace and returns
// the signed token. The token is shown once; only its `jti` is stored.
func CreateKey(ctx context.Context, c client.Client, s *Signer, req KeyRequest) (string, *agentsv1.ApiKey, error) {
	if err := ValidateScopes(req.Scopes); err != nil {
		return "", nil, err
	}
	jti := NewKeyID()
	key := &agentsv1.ApiKey{
		ObjectMeta: metav1.ObjectMeta{
			Name: jti, Namespace: req.Workspace,
			Labels: map[string]string{agentsv1.LabelUser: labelValue(req.UserID)},
		},
		Spec: agentsv1.ApiKeySpec{
			UserID: req.UserID, Scopes: req.Scopes, Role: req.Role, Description: req.Description,
		},
	}
	claims := Claims{Workspace: req.Workspace, Scopes: req.Scopes}
	claims.ID = jti
	claims.Subject = req.UserID
	if req.TTL > 0 {
		exp := s.now().Add(req.TTL).Truncate(time.Second)
		key.Spec.ExpiresAt = &metav1.Time{Time: exp}
		claims.ExpiresAt = jwt.NewNumericDate(exp)
	}
	if req.Owner != nil {
		if err := req.Owner(key); err != nil {
			return "", nil, err
		}
	}
	if err := c.Create(ctx, key); err != nil {
		return "", nil, fmt.Errorf("create ApiKey: %w", err)
	}
	tok, err := s.Mint(claims)
	if err != nil {
		return "", nil, err
	}
	return tok, key, nil
}

// labelValue keeps a user id usable as a label value (selectors only; the spec holds the id).
func labelValue(v string) string {
	out := make([]byte, 0, len(v))
	for i := 0; i < len(v) && len(out) < 63; i++ {
		c := v[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' {
			out = append(out, c)
		} else {
			out = append(out, '_')
		}
	}
	for len(out) > 0 && !isAlnum(out[0]) {
		out = out[1:]
	}
	for len(out) > 0 && !isAlnum(out[len(out)-1]) {
		out = out[:len(out)-1]
	}
	return string(out)
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
