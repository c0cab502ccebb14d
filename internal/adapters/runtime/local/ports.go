package local

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"syscall"

	"k8s.io/apimachinery/pkg/types"
)

// allocatePort returns a port for key's gateway: preferred when it is in the range, not held
// by another agent of this runtime and bindable on loopback; otherwise the first such port
// from a random place in the range. The port is reserved for key (its previous one released).
func (r *Runtime) allocatePort(key types.NamespacedName, preferred int) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pr := r.opts.PortRange
	free := func(p int) bool {
		if owner, taken := r.ports[p]; taken && owner != key {
			return false
		}
		return bindable(p)
	}
	pick := 0
	if preferred >= pr.First && preferred <= pr.Last && free(preferred) {
		pick = preferred
	} else {
		n := pr.Last - pr.First + 1
		off := rand.IntN(n)
		for i := 0; i < n; i++ {
			if p := pr.First + (off+i)%n; free(p) {
				pick = p
				break
			}
		}
	}
	if pick == 0 {
		return 0, fmt.Errorf("no free port in %d-%d", pr.First, pr.Last)
	}
	r.releasePortsLocked(key)
	r.ports[pick] = key
	return pick, nil
}

// releasePorts forgets key's port reservations.
func (r *Runtime) releasePorts(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.releasePortsLocked(key)
}

// releasePortsLocked is releasePorts with r.mu held.
func (r *Runtime) releasePortsLocked(key types.NamespacedName) {
	for p, owner := range r.ports {
		if owner == key {
			delete(r.ports, p)
		}
	}
}

// bindable reports whether a gateway could listen on port on loopback (IPv4, and IPv6 where
// the host has it: OpenClaw's loopback bind takes both).
func bindable(port int) bool {
	l, err := net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	l.Close()
	l6, err := net.Listen("tcp6", "[::1]:"+strconv.Itoa(port))
	if err != nil {
		return !errors.Is(err, syscall.EADDRINUSE)
	}
	l6.Close()
	return true
}
