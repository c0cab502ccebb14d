// Package scheme builds the runtime.Scheme every agentplane client uses: the core Kubernetes
// kinds, agentplane.io/v1alpha1, the Gateway API's v1 kinds and CustomResourceDefinitions.
package scheme

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

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
	// Gateway API routes (Domains with --domain-gateway).
	if err := gatewayv1.Install(s); err != nil {
		panic(err)
	}
	// CustomResourceDefinitions: the storage migration reads and updates agentplane's
	// (controllers/storageversion).
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}
