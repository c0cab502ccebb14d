package workspacens

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/scheme"
)

// TestEnsureNamespaceLabels: a namespace that exists gets the workspace's labels and keeps its
// own, whether the client sees it or (a cache that has not caught up) does not.
func TestEnsureNamespaceLabels(t *testing.T) {
	for _, tc := range []struct {
		name   string
		unseen bool // the client's Get does not see the namespace yet
	}{
		{name: "seen"},
		{name: "made a moment ago, not yet in the cache", unseen: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			existing := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team", Labels: map[string]string{"owner": "ops"}}}
			b := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(existing)
			if tc.unseen {
				b = b.WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if _, ok := obj.(*corev1.Namespace); ok {
						return apierrors.NewNotFound(corev1.Resource("namespaces"), key.Name)
					}
					return c.Get(ctx, key, obj, opts...)
				}})
			}
			c := b.Build()
			ws := &agentsv1.Workspace{ObjectMeta: metav1.ObjectMeta{Name: "team", UID: "ws-uid"}}
			if err := EnsureNamespace(ctx, c, ws); err != nil {
				t.Fatal(err)
			}
			list := &corev1.NamespaceList{} // List: past the Get the interceptor hides
			if err := c.List(ctx, list); err != nil || len(list.Items) != 1 {
				t.Fatalf("namespaces: %v %v", list.Items, err)
			}
			got := list.Items[0]
			want := namespaceLabels(ws)
			want["owner"] = "ops"
			for k, v := range want {
				if got.Labels[k] != v {
					t.Errorf("label %s = %q, want %q (labels %v)", k, got.Labels[k], v, got.Labels)
				}
			}
		})
	}
}
