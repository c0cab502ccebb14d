package secrets

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// Value returns a workspace secret's plaintext: opened with the platform key, or read with
// reader from the referenced core Secret.
func Value(ctx context.Context, reader client.Reader, sealer *Sealer, sec *agentsv1.AgentSecret) ([]byte, error) {
	if ref := sec.Spec.SecretRef; ref != nil {
		core := &corev1.Secret{}
		if err := reader.Get(ctx, types.NamespacedName{Namespace: sec.Namespace, Name: ref.Name}, core); err != nil {
			return nil, err
		}
		v, ok := core.Data[ref.Key]
		if !ok {
			return nil, apierrors.NewNotFound(corev1.Resource("secrets"), ref.Name+"["+ref.Key+"]")
		}
		return v, nil
	}
	if sec.Spec.EncryptedValue == nil {
		return nil, ErrDecrypt
	}
	if sealer == nil {
		return nil, ErrNotConfigured
	}
	return sealer.Open(ctx, sec.Namespace, sec.Name, sec.Spec.EncryptedValue)
}
