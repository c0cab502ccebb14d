// Package secrets seals workspace secret values with AES-256-GCM under the platform's secrets
// key, so AgentSecret objects only ever hold ciphertext. The key lives in a core Secret in
// the system namespace (or a file); when it is not provisioned, sealing and opening fail with
// ErrNotConfigured and the REST facade answers 503 `Secrets not configured`.
package secrets

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// KeySecretName is the core Secret (in the system namespace) holding the 32-byte key under
// the data key "key".
const KeySecretName = "agentplane-secrets-key"

// ErrNotConfigured: no secrets key is provisioned.
var ErrNotConfigured = errors.New("secrets key not configured")

// ErrDecrypt: the ciphertext does not open under the key (tampered, or sealed for another
// secret or under another key).
var ErrDecrypt = errors.New("secret value does not decrypt")

// KeySource provides the secrets key.
type KeySource interface {
	Key(ctx context.Context) ([]byte, error)
}

// SecretKeySource reads the key from a core Secret. It keeps the key once found, and looks
// again on each call until then (provisioning the key later needs no restart).
type SecretKeySource struct {
	Reader    client.Reader
	Namespace string
	mu        sync.Mutex
	key       []byte
}

// Key returns the key or ErrNotConfigured.
func (s *SecretKeySource) Key(ctx context.Context) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.key != nil {
		return s.key, nil
	}
	sec := &corev1.Secret{}
	if err := s.Reader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: KeySecretName}, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, ErrNotConfigured
		}
		return nil, err
	}
	k := sec.Data["key"]
	if len(k) != 32 {
		return nil, fmt.Errorf("%w: %s/%s must hold a 32-byte key", ErrNotConfigured, s.Namespace, KeySecretName)
	}
	s.key = k
	return k, nil
}

// FileKeySource reads a 32-byte key (raw, hex or base64) from a file.
type FileKeySource struct{ Path string }

// Key returns the file's key.
func (f FileKeySource) Key(context.Context) ([]byte, error) {
	raw, err := os.ReadFile(f.Path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotConfigured, err)
	}
	for _, decode := range []func([]byte) ([]byte, bool){
		func(b []byte) ([]byte, bool) { return b, len(b) == 32 },
		func(b []byte) ([]byte, bool) {
			out, err := hex.DecodeString(string(trim(b)))
			return out, err == nil && len(out) == 32
		},
		func(b []byte) ([]byte, bool) {
			out, err := base64.StdEncoding.DecodeString(string(trim(b)))
			return out, err == nil && len(out) == 32
		},
	} {
		if k, ok := decode(raw); ok {
			return k, nil
		}
	}
	return nil, fmt.Errorf("%w: %s must hold 32 bytes (raw, hex or base64)", ErrNotConfigured, f.Path)
}

func trim(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	return b
}

// Sealer seals and opens secret values.
type Sealer struct{ Keys KeySource }

// keyID is a public fingerprint of the key, stored next to the ciphertext.
func keyID(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:6])
}

// aad binds a ciphertext to the secret it belongs to, so a value copied into another secret
// does not open.
func aad(namespace, name string) []byte { return []byte("agentplane/secret/" + namespace + "/" + name) }

func gcm(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// Seal encrypts value for the secret namespace/name.
func (s *Sealer) Seal(ctx context.Context, namespace, name string, value []byte) (*agentsv1.EncryptedValue, error) {
	key, err := s.Keys.Key(ctx)
	if err != nil {
		return nil, err
	}
	a, err := gcm(key)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, a.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	out := a.Seal(nonce, nonce, value, aad(namespace, name))
	return &agentsv1.EncryptedValue{KeyID: keyID(key), Ciphertext: base64.StdEncoding.EncodeToString(out)}, nil
}

// Open decrypts the value of the secret namespace/name.
func (s *Sealer) Open(ctx context.Context, namespace, name string, v *agentsv1.EncryptedValue) ([]byte, error) {
	key, err := s.Keys.Key(ctx)
	if err != nil {
		return nil, err
	}
	if v.KeyID != keyID(key) {
		return nil, fmt.Errorf("%w: sealed under key %s, the platform has %s", ErrDecrypt, v.KeyID, keyID(key))
	}
	raw, err := base64.StdEncoding.DecodeString(v.Ciphertext)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrDecrypt, err)
	}
	a, err := gcm(key)
	if err != nil {
		return nil, err
	}
	if len(raw) < a.NonceSize() {
		return nil, ErrDecrypt
	}
	plain, err := a.Open(nil, raw[:a.NonceSize()], raw[a.NonceSize():], aad(namespace, name))
	if err != nil {
		return nil, ErrDecrypt
	}
	return plain, nil
}
