package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SigningKeySecret is the core Secret (in the system namespace) that holds the JWT key.
const SigningKeySecret = "agentplane-jwt-signing-key"

const signingKeyField = "key"

// EnsureSigningKey returns the JWT signing key kept in the system namespace, creating it (32
// random bytes) when absent. Concurrent callers agree: the API server lets one create win and
// the others read what it wrote.
func EnsureSigningKey(ctx context.Context, c client.Client, systemNamespace string) ([]byte, error) {
	key := client.ObjectKey{Namespace: systemNamespace, Name: SigningKeySecret}
	for range 3 {
		s := &corev1.Secret{}
		err := c.Get(ctx, key, s)
		if err == nil {
			k := s.Data[signingKeyField]
			if len(k) < 32 {
				return nil, fmt.Errorf("secret %s holds a signing key shorter than 32 bytes", key)
			}
			return k, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("read signing key: %w", err)
		}
		if err := ensureNamespace(ctx, c, systemNamespace); err != nil {
			return nil, err
		}
		k := make([]byte, 32)
		if _, err := rand.Read(k); err != nil {
			return nil, err
		}
		s = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name: SigningKeySecret, Namespace: systemNamespace,
				Labels: map[string]string{"app.kubernetes.io/part-of": "agentplane"},
			},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{signingKeyField: k},
		}
		if err := c.Create(ctx, s); err == nil {
			return k, nil
		} else if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create signing key: %w", err)
		}
	}
	return nil, fmt.Errorf("signing key %s: gave up after concurrent creates", key)
}

func ensureNamespace(ctx context.Context, c client.Client, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}

// KeyID is a short public fingerprint of a signing key (the JWT `kid` header).
func KeyID(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:4])
}
