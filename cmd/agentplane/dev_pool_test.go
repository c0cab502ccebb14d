//go:build !nodevtools

package main

import (
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/devtools/devenv"
	"github.com/agentplane/agentplane/internal/devtools/fakeclaw"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/scheme"
)

// agentplane dev --warm-pool 2 makes the GatewayPool "default" of two gateways, which boot.
func TestDevWarmPool(t *testing.T) {
	state := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := devFlags{stateDir: state, controlPlaneDir: kubeenv.AssetsDir(), workspace: "dev", user: "developer",
		runtime: platform.RuntimeLocal, engineDirs: []string{fakeclaw.MustEngineDir(t)}, warmPool: 2, warmPoolSet: true}
	o := platform.Options{APIAddr: "127.0.0.1:0", MetricsAddr: "0", ProvisionTimeout: 30 * time.Second, SkipNameValidation: true}
	done := make(chan error, 1)
	go func() { done <- runDev(ctx, io.Discard, f, o) }()
	envFile := filepath.Join(state, devenv.EnvFileName)
	deadline := time.Now().Add(2 * time.Minute)
	for devenv.ReadEnvFile(envFile)["KUBECONFIG"] == "" {
		select {
		case err := <-done:
			t.Fatalf("dev stopped: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("dev.env was not written")
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", devenv.ReadEnvFile(envFile)["KUBECONFIG"])
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	gp := &agentsv1.GatewayPool{}
	for {
		if err := c.Get(ctx, client.ObjectKey{Name: devPoolName}, gp); err == nil && gp.Spec.Replicas == 2 && gp.Status.Ready == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the warm pool did not fill: %+v", gp.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("dev returned %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(state, "runtime", "pool", "*")); len(left) > 0 {
		t.Errorf("warm gateways left after dev stopped: %v", left)
	}
}
