package agentplanetest

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/agentplane/agentplane/config/crd"
)

// installCRDs creates the agentplane CRDs the API server lacks and waits until they serve.
// CRDs already there are left as they are (a real cluster's may be newer).
func installCRDs(ctx context.Context, cfg *rest.Config) error {
	all, err := crd.CRDs()
	if err != nil {
		return err
	}
	s := k8sruntime.NewScheme()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return err
	}
	var missing []*apiextensionsv1.CustomResourceDefinition
	for _, d := range all {
		err := c.Get(ctx, client.ObjectKeyFromObject(d), &apiextensionsv1.CustomResourceDefinition{})
		switch {
		case apierrors.IsNotFound(err):
			missing = append(missing, d.DeepCopy())
		case err != nil:
			return fmt.Errorf("agentplanetest: read CRD %s: %w", d.Name, err)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{CRDs: missing}); err != nil {
		return fmt.Errorf("agentplanetest: install the CRDs: %w", err)
	}
	return nil
}
