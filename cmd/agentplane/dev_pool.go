//go:build !nodevtools

package main

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/scheme"
)

// devPoolName is the GatewayPool that `agentplane dev --warm-pool N` sizes.
const devPoolName = "default"

// applyWarmPool makes the GatewayPool "default" keep n gateways of the default version (on the
// kube runtime in the dev workspace, when the pool names no workspace yet).
func applyWarmPool(ctx context.Context, cfg *rest.Config, n int, workspace string) error {
	if n < 0 {
		return fmt.Errorf("--warm-pool %d: the pool size cannot be negative", n)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	gp := &agentsv1.GatewayPool{ObjectMeta: metav1.ObjectMeta{Name: devPoolName}}
	_, err = controllerutil.CreateOrPatch(ctx, c, gp, func() error {
		gp.Spec.Replicas = int32(n)
		if len(gp.Spec.Workspaces) == 0 && workspace != "" {
			gp.Spec.Workspaces = []string{workspace}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("warm pool: %w", err)
	}
	return nil
}
