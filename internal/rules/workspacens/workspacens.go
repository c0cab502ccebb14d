// Package workspacens maps workspaces to namespaces: a Workspace named W owns the namespace W,
// labelled agentplane.io/workspace=W.
package workspacens

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// Pod Security Admission labels of workspace namespaces: the API server enforces the
// `restricted` profile on every pod there (the gateway pods comply: non-root, no privilege
// escalation, every capability dropped, seccomp RuntimeDefault), and warns and audits on it.
const (
	PodSecurityEnforce = "pod-security.kubernetes.io/enforce"
	PodSecurityWarn    = "pod-security.kubernetes.io/warn"
	PodSecurityAudit   = "pod-security.kubernetes.io/audit"
	PodSecurityLevel   = "restricted"
)

// namespaceLabels are the labels of workspace ws's namespace.
func namespaceLabels(ws *agentsv1.Workspace) map[string]string {
	return map[string]string{
		agentsv1.LabelWorkspace: ws.Name,
		PodSecurityEnforce:      PodSecurityLevel,
		PodSecurityWarn:         PodSecurityLevel,
		PodSecurityAudit:        PodSecurityLevel,
	}
}

// EnsureNamespace creates the workspace's namespace (owned by the Workspace, so deleting the
// Workspace deletes it on a cluster with a garbage collector), or labels a namespace that
// already exists, for example one applied together with the Workspace or one made before the
// Pod Security labels.
func EnsureNamespace(ctx context.Context, c client.Client, ws *agentsv1.Workspace) error {
	ns := &corev1.Namespace{}
	err := c.Get(ctx, types.NamespacedName{Name: ws.Name}, ns)
	want := namespaceLabels(ws)
	if apierrors.IsNotFound(err) {
		ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ws.Name, Labels: want}}
		if err := controllerutil.SetControllerReference(ws, ns, c.Scheme()); err != nil {
			return err
		}
		err := c.Create(ctx, ns)
		if apierrors.IsAlreadyExists(err) {
			// Made by someone else a moment ago, and not yet in a cached client's view: label
			// it without reading it (an unlabelled namespace may bring no event to come back on).
			return labelNamespace(ctx, c, ws.Name, want)
		}
		if err != nil {
			return fmt.Errorf("create namespace: %w", err)
		}
		return nil
	}
	if err != nil {
		return err
	}
	for k, v := range want {
		if ns.Labels[k] != v {
			return labelNamespace(ctx, c, ws.Name, want)
		}
	}
	return nil
}

// labelNamespace sets labels on the namespace name by a merge patch (other labels stay).
func labelNamespace(ctx context.Context, c client.Client, name string, labels map[string]string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Patch(ctx, ns, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("label namespace: %w", err)
	}
	return nil
}

// EnsureWorkspace creates ws when no Workspace of that name exists, and its namespace. An
// existing Workspace is left as it is and returned in ws.
func EnsureWorkspace(ctx context.Context, c client.Client, ws *agentsv1.Workspace) error {
	want := ws.DeepCopy()
	err := c.Get(ctx, client.ObjectKey{Name: ws.Name}, ws)
	if apierrors.IsNotFound(err) {
		*ws = *want
		if err = c.Create(ctx, ws); apierrors.IsAlreadyExists(err) {
			err = c.Get(ctx, client.ObjectKey{Name: ws.Name}, ws)
		}
	}
	if err != nil {
		return err
	}
	return EnsureNamespace(ctx, c, ws)
}
