package local

import (
	"net/netip"
	"testing"
)

// TestEgressPolicy: the egress proxy lets agents reach the public internet and nothing of the
// host or of private networks, unless a rule opens it.
func TestEgressPolicy(t *testing.T) {
	own := []netip.Addr{netip.MustParseAddr("203.0.113.7")} // this host's public address
	e := newEgressProxy([]EgressRule{
		{Prefix: netip.MustParsePrefix("10.20.0.0/16"), Port: 443},
		{Prefix: netip.MustParsePrefix("192.168.5.5/32")},
	})
	for _, c := range []struct {
		addr string
		port int
		want bool
	}{
		{"93.184.215.14", 443, true},        // a public address
		{"2606:4700::6810:84e5", 443, true}, // a public IPv6 address
		{"127.0.0.1", 8080, false},          // the host's loopback
		{"::1", 8080, false},
		{"10.1.2.3", 443, false},       // private
		{"172.16.0.1", 80, false},      // private
		{"192.168.1.1", 80, false},     // private
		{"169.254.169.254", 80, false}, // link-local: a cloud's metadata service
		{"100.64.0.1", 80, false},      // shared (CGNAT)
		{"fd00::1", 80, false},         // unique local
		{"fe80::1", 80, false},         // link-local
		{"0.0.0.0", 80, false},
		{"224.0.0.1", 80, false},        // multicast
		{"203.0.113.7", 22, false},      // this host's own address
		{"10.20.9.9", 443, true},        // opened by a rule, on its port
		{"10.20.9.9", 80, false},        // not on another
		{"192.168.5.5", 5432, true},     // opened on every port
		{"::ffff:127.0.0.1", 80, false}, // loopback mapped into IPv6
	} {
		a := netip.MustParseAddr(c.addr).Unmap()
		if got := e.allowed(a, c.port, own); got != c.want {
			t.Errorf("allowed(%s, %d) = %v, want %v", c.addr, c.port, got, c.want)
		}
	}
}
