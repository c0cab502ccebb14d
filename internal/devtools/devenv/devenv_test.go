package devenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
	"github.com/agentplane/agentplane/internal/scheme"
)

// TestEtcdRefusesClientsWithoutACertificate: local agents share this host's network, so the
// dev control plane's etcd must not answer on loopback to whoever asks. kube-apiserver (with
// the run's client certificate) works; a client without one gets nothing.
func TestEtcdRefusesClientsWithoutACertificate(t *testing.T) {
	assets := kubeenv.AssetsDir() // the envtest tier's control plane (hack/testtiers reads the import)
	state := t.TempDir()
	cp, err := Start(state, assets)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })

	c, err := client.New(cp.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.List(context.Background(), &corev1.NamespaceList{}); err != nil {
		t.Fatalf("the API server cannot reach etcd: %v", err)
	}
	if !strings.HasPrefix(cp.EtcdURL, "https://127.0.0.1:") {
		t.Fatalf("etcd client URL %q is not TLS on loopback", cp.EtcdURL)
	}
	rangeAll := func(hc *http.Client, base string) (int, error) {
		// etcd's JSON gateway: a range over every key.
		resp, err := hc.Post(base+"/v3/kv/range", "application/json", strings.NewReader(`{"key":"AA==","range_end":"AA=="}`))
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	insecure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	if code, err := rangeAll(insecure, cp.EtcdURL); err == nil {
		t.Fatalf("etcd answered a client without a certificate: %d", code)
	}
	if code, err := rangeAll(insecure, strings.Replace(cp.EtcdURL, "https://", "http://", 1)); err == nil && code == http.StatusOK {
		t.Fatal("etcd answered plain HTTP")
	}
	// The same request with the run's client certificate is answered: the refusal above is
	// the certificate's doing.
	pki := filepath.Join(state, etcdPKI)
	cert, err := tls.LoadX509KeyPair(filepath.Join(pki, "client.crt"), filepath.Join(pki, "client.key"))
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(filepath.Join(pki, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	withCert := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}}
	if code, err := rangeAll(withCert, cp.EtcdURL); err != nil || code != http.StatusOK {
		t.Fatalf("etcd with the client certificate: %d %v", code, err)
	}
}
