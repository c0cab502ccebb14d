package platform

import (
	"net"
	"slices"
	"testing"
)

// TestHostServices: local agents reach, from their network namespaces, the model proxy when
// it is on this host's loopback and the REST facade (their platform tokens), each once, and
// nothing the platform does not serve on loopback.
func TestHostServices(t *testing.T) {
	for _, tc := range []struct {
		name, base, facade string
		want               []string
	}{
		{"the facade serves the proxy", "http://127.0.0.1:8080", "127.0.0.1:8080", []string{"127.0.0.1:8080"}},
		{"a proxy listener of its own", "http://127.0.0.1:9090", "127.0.0.1:8080", []string{"127.0.0.1:9090", "127.0.0.1:8080"}},
		{"a proxy elsewhere", "http://proxy.example:80", "127.0.0.1:8080", []string{"127.0.0.1:8080"}},
		{"a proxy on another address", "http://10.0.0.5:8080", "", nil},
		{"https", "https://127.0.0.1:8443", "", nil},
		{"no proxy", "", "127.0.0.1:8080", []string{"127.0.0.1:8080"}},
	} {
		if got := hostServices(tc.base, tc.facade); !slices.Equal(got, tc.want) {
			t.Errorf("%s: hostServices(%q, %q) = %q, want %q", tc.name, tc.base, tc.facade, got, tc.want)
		}
	}
	for addr, want := range map[string]string{
		"127.0.0.1:8080": "127.0.0.1:8080", "0.0.0.0:8081": "127.0.0.1:8081", "[::]:8082": "127.0.0.1:8082",
		"10.0.0.5:8083": "",
	} {
		a, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := loopbackAddr(a); got != want {
			t.Errorf("loopbackAddr(%s) = %q, want %q", addr, got, want)
		}
	}
}
