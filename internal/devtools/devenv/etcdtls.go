package devenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// etcdPKI is where the certificates of etcd's client port live (under the state dir, which no
// agent's sandbox shows).
const etcdPKI = "etcd-pki"

// secureEtcd makes etcd serve its clients over TLS on 127.0.0.1 and accept only clients with a
// certificate of a CA made for this run (kube-apiserver's): the local agents share this
// host's network, and an etcd that answers anyone on loopback would hand them every object,
// gateway tokens included. Its health check (envtest's readiness poll) is served on a port of
// its own that has no data. The CA's key is not kept.
func secureEtcd(env *envtest.Environment, stateDir string) error {
	dir := filepath.Join(stateDir, etcdPKI)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ca, caKey, err := newCert(nil, nil, "agentplane-etcd-ca", true)
	if err != nil {
		return err
	}
	server, serverKey, err := newCert(ca, caKey, "etcd", false)
	if err != nil {
		return err
	}
	client, clientKey, err := newCert(ca, caKey, "kube-apiserver", false)
	if err != nil {
		return err
	}
	files := map[string][]byte{"ca.crt": pemCert(ca), "server.crt": pemCert(server), "client.crt": pemCert(client)}
	for name, key := range map[string]*ecdsa.PrivateKey{"server.key": serverKey, "client.key": clientKey} {
		der, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return err
		}
		files[name] = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	}
	for name, data := range files {
		if err := writeFileAtomic(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	clientPort, err := freePort()
	if err != nil {
		return err
	}
	healthPort, err := freePort()
	if err != nil {
		return err
	}
	clientURL := "https://127.0.0.1:" + strconv.Itoa(clientPort)
	health := &url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(healthPort)}
	p := func(name string) string { return filepath.Join(dir, name) }

	env.ControlPlane.Etcd.URL = health // envtest polls <URL>/health
	e := env.ControlPlane.Etcd.Configure()
	e.Set("listen-client-urls", clientURL)
	e.Set("advertise-client-urls", clientURL)
	e.Set("listen-metrics-urls", health.String())
	e.Set("cert-file", p("server.crt"))
	e.Set("key-file", p("server.key"))
	e.Set("trusted-ca-file", p("ca.crt"))
	e.Set("client-cert-auth", "true")

	if env.ControlPlane.APIServer == nil {
		env.ControlPlane.APIServer = &envtest.APIServer{}
	}
	a := env.ControlPlane.APIServer.Configure()
	a.Set("etcd-servers", clientURL)
	a.Set("etcd-cafile", p("ca.crt"))
	a.Set("etcd-certfile", p("client.crt"))
	a.Set("etcd-keyfile", p("client.key"))
	return nil
}

// newCert makes a certificate for 127.0.0.1 signed by parent (self-signed when parent is nil)
// and returns it with its key.
func newCert(parent *x509.Certificate, parentKey *ecdsa.PrivateKey, cn string, isCA bool) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	if isCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
		tmpl.ExtKeyUsage = nil
	}
	signer, signKey := tmpl, key
	if parent != nil {
		signer, signKey = parent, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signKey)
	if err != nil {
		return nil, nil, fmt.Errorf("certificate %s: %w", cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

func pemCert(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

// freePort is a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
