// Package scheme builds the runtime.Scheme every agentplane client uses: the core Kubernetes
// kinds plus agentplane.io/v1alpha1.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// New returns a scheme with the core kinds and agentplane's kinds.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := agentsv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}
