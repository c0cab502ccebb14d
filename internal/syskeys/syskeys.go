// Package syskeys keeps the platform's own random keys (the JWT signing key, the domain
// verification key, ...) in core Secrets of the system namespace, creating each on first use.
package syskeys

import (
	"context"
	"crypto/rand"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// KeyField is the data key of the Secret that holds the key bytes.
const KeyField = "key"

// EnsureRandomKey returns the key kept in Secret namespace/secretName, creating the namespace
// and the Secret (size random bytes) when absent. Concurrent callers on any number of replicas
// agree: the API server lets one create win and the others read what it wrote. A stored key
// shorter than size is an error (it was not written by this function).
func EnsureRandomKey(ctx context.Context, c client.Client, namespace, secretName string, size int) ([]byte, error) {
	key := client.ObjectKey{Namespace: namespace, Name: secretName}
	for range 3 {
		s := &corev1.Secret{}
		err := c.Get(ctx, key, s)
		if err == nil {
			k := s.Data[KeyField]
			if len(k) < size {
				return nil, fmt.Errorf("secret %s holds a key shorter than %d bytes", key, size)
			}
			return k, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("read key %s: %w", key, err)
		}
		if err := EnsureNamespace(ctx, c, namespace); err != nil {
			return nil, err
		}
		k := make([]byte, size)
		if _, err := rand.Read(k); err != nil {
			return nil, err
		}
		s = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name: secretName, Namespace: namespace,
				Labels: map[string]string{"app.kubernetes.io/part-of": "agentplane"},
			},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{KeyField: k},
		}
		if err := c.Create(ctx, s); err == nil {
			return k, nil
		} else if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create key %s: %w", key, err)
		}
	}
	return nil, fmt.Errorf("key %s: gave up after concurrent creates", key)
}

// EnsureNamespace creates namespace name when it does not exist.
func EnsureNamespace(ctx context.Context, c client.Client, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}
