package ops

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validate/content"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Names from outside (a REST route's path values, a CLI's arguments) become object names. A
// name no object can have ("..", "a/b", "%zz" — client-go refuses to put them in a URL) must
// read as a missing object, so each operation answers its own not-found (a route its 404),
// rather than client-go's request-building error (a 500).

// namedReader is a client.Reader whose Get answers NotFound for impossible names.
type namedReader struct{ client.Reader }

func (r namedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := impossibleName(key, obj); err != nil {
		return err
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

// namedClient is a client.Client whose Get answers NotFound for impossible names.
type namedClient struct{ client.Client }

func (c namedClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return namedReader{c.Client}.Get(ctx, key, obj, opts...)
}

// impossibleName is a NotFound error when key cannot name an object, else nil.
func impossibleName(key client.ObjectKey, obj client.Object) error {
	if len(content.IsPathSegmentName(key.Name)) == 0 && len(content.IsPathSegmentName(key.Namespace)) == 0 {
		return nil
	}
	return apierrors.NewNotFound(k8sschema.GroupResource{Resource: fmt.Sprintf("%T", obj)}, key.Name)
}

// guardNames wraps d's clients with the impossible-name check.
func guardNames(d *Deps) {
	if d.Client != nil {
		d.Client = namedClient{d.Client}
	}
	if d.APIReader != nil {
		d.APIReader = namedReader{d.APIReader}
	}
}
