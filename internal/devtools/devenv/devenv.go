// Package devenv runs agentplane's embedded local control plane: a kube-apiserver and etcd
// built from source (see hack/build-controlplane.sh), with state kept under a directory so a
// restart finds its objects again, and the CRDs installed.
package devenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/agentplane/agentplane/config/crd"
	"github.com/agentplane/agentplane/config/policy"
	"github.com/agentplane/agentplane/internal/scheme"
)

// ControlPlane is a running local API server and etcd.
type ControlPlane struct {
	env *envtest.Environment
	// Config reaches the API server as an administrator.
	Config *rest.Config
	// Kubeconfig is the path of the kubeconfig written for kubectl.
	Kubeconfig string
	// EtcdURL is etcd's client address (TLS; clients need a certificate of <state>/etcd-pki).
	EtcdURL string
}

// Start starts etcd (data under stateDir/etcd) and kube-apiserver from assetsDir, installs the
// CRDs and the admission policies shipped with them (config/policy) and writes
// stateDir/kubeconfig.
func Start(stateDir, assetsDir string) (*ControlPlane, error) {
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assetsDir, b)); err != nil {
			return nil, fmt.Errorf("%s not found in %s: run `make envtest-assets` (make run does it for you)", b, assetsDir)
		}
	}
	dataDir := filepath.Join(stateDir, "etcd")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	crds, err := crd.CRDs()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    assetsDir,
		CRDs:                     crds,
		Scheme:                   scheme.New(),
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	env.ControlPlane.Etcd = &envtest.Etcd{DataDir: dataDir}
	// envtest trades durability for speed; the dev platform keeps its objects across crashes.
	env.ControlPlane.Etcd.Configure().Set("unsafe-no-fsync", "false")
	if err := secureEtcd(env, stateDir); err != nil {
		return nil, fmt.Errorf("etcd certificates: %w", err)
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	// The admission policies shipped with the CRDs (config/default installs both).
	if err := policy.Install(context.Background(), cfg); err != nil {
		_ = env.Stop()
		return nil, err
	}
	cp := &ControlPlane{env: env, Config: cfg, Kubeconfig: filepath.Join(stateDir, "kubeconfig"),
		EtcdURL: env.ControlPlane.APIServer.Configure().Get("etcd-servers").Get(nil)[0]}
	if err := writeFileAtomic(cp.Kubeconfig, env.KubeConfig, 0o600); err != nil {
		_ = env.Stop()
		return nil, err
	}
	return cp, nil
}

// Stop stops kube-apiserver and etcd; etcd's data stays.
func (c *ControlPlane) Stop() error { return c.env.Stop() }

// URL is the API server's address.
func (c *ControlPlane) URL() string { return c.Config.Host }

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
