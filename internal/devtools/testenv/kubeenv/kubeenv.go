// Package kubeenv starts the envtest control plane (a real kube-apiserver and etcd built by
// `make envtest-assets`) with agentplane's CRDs installed, through the code the public test
// kit's control-plane half hands out (internal/devtools/controlplane/kit: the CRDs as Go values,
// the binaries of KUBEBUILDER_ASSETS or of `agentplane envtest-assets`), so every suite of the
// project starts the way a consumer's does. What is left here is internal: the checkout's bin/k8s as a last resort, a Service range
// for thousands of agents, a client with agentplane's scheme. Every package's integration
// suite uses it, so they all test against the API server's own validation, conflicts and
// subresources rather than a fake client.
package kubeenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/agentplane/agentplane/config/policy"
	"github.com/agentplane/agentplane/internal/devtools/controlplane/kit"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
	"github.com/agentplane/agentplane/internal/scheme"
)

// Env is a running control plane.
type Env struct {
	*envtest.Environment
	Config *rest.Config
	Scheme *k8sruntime.Scheme
	Client client.Client
}

// AssetsDir is where kube-apiserver and etcd are: kit.AssetsDir ($KUBEBUILDER_ASSETS
// or the cache of `agentplane envtest-assets`), else the checkout's bin/k8s.
func AssetsDir() string {
	if d := kit.AssetsDir(); d != "" {
		return d
	}
	return filepath.Join(testenv.RepoRoot(), "bin", "k8s")
}

// Start starts a control plane with agentplane's CRDs and admission policies (config/policy). It fails with a hint when the binaries
// were not built.
func Start() (*Env, error) {
	assets := AssetsDir()
	if _, err := os.Stat(filepath.Join(assets, "kube-apiserver")); err != nil {
		return nil, fmt.Errorf("no kube-apiserver in %s: run `make envtest-assets` (or `make test`)", assets)
	}
	s := scheme.New()
	e := kit.NewEnvironment()
	e.BinaryAssetsDirectory = assets
	e.Scheme = s
	// Room for thousands of agent Services (envtest's default range has 254 addresses).
	e.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", "10.96.0.0/16")
	cfg, err := e.Start()
	if err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	// The admission policies shipped with the CRDs (config/default installs both).
	if err := policy.Install(context.Background(), cfg); err != nil {
		_ = e.Stop()
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		_ = e.Stop()
		return nil, err
	}
	return &Env{Environment: e, Config: cfg, Scheme: s, Client: c}, nil
}

// Namespace returns a namespace object with the given name.
func Namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}
