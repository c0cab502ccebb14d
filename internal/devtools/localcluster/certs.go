package localcluster

import (
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"

	certutil "k8s.io/client-go/util/cert"
)

// KubernetesServiceIP is the `kubernetes` Service's ClusterIP (the first of ServiceCIDR),
// where pods' in-cluster clients dial the API server.
const KubernetesServiceIP = "10.96.0.1"

// writeServingCerts fills the API server's certificate directory before envtest would: a
// serving certificate that, unlike envtest's own (localhost and the bind address), also names
// the `kubernetes` Service (its ClusterIP and DNS names), so a pod's in-cluster client
// verifies it as on any cluster; and the service-account signing pair envtest would write
// beside it. It returns the PEM of the CA that signed the serving certificate.
func writeServingCerts(dir, nodeIP string) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	chain, key, err := certutil.GenerateSelfSignedCertKey("localhost",
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(nodeIP), net.ParseIP(KubernetesServiceIP)},
		[]string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"})
	if err != nil {
		return nil, err
	}
	// chain is the serving certificate, then the CA that signed it.
	leaf, rest := pem.Decode(chain)
	if leaf == nil || len(rest) == 0 {
		return nil, errors.New("serving certificate: no CA in the generated chain")
	}
	saCert, saKey, err := certutil.GenerateSelfSignedCertKey("service-accounts", nil, nil)
	if err != nil {
		return nil, err
	}
	// The names envtest's API server reads (controlplane.APIServer's CertDir).
	for name, data := range map[string][]byte{
		"apiserver.crt": chain, "apiserver.key": key,
		"sa-signer.crt": saCert, "sa-signer.key": saKey,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	return rest, nil
}
