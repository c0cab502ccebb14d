package syscallpolicy

import (
	"encoding/json"
	"slices"

	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// gatewayArches are the architectures (moby's names) of the nodes the profile is for.
var gatewayArches = []string{"amd64", "x32", "x86", "arm64", "arm"}

// resolve decides a rule's conditions for a gateway container, which has no capabilities (it
// drops ALL) and runs on an amd64 or arm64 node with a current kernel, and removes them:
// reports whether the rule applies. The profile then has no conditions, so every runtime's
// loader reads it alike (containerd 1.6's applied moby's s390-only clone rule on amd64, which
// let CLONE_NEWUSER through).
func resolve(s *seccomp.Syscall) bool {
	if in := s.Includes; in != nil {
		if len(in.Caps) > 0 {
			return false
		}
		if len(in.Arches) > 0 && !slices.ContainsFunc(in.Arches, func(a string) bool { return slices.Contains(gatewayArches, a) }) {
			return false
		}
	}
	// Excluded capabilities are absent and excluded arches (s390) are not ours: the rule applies.
	s.Includes, s.Excludes = nil, nil
	return true
}

// Profile is the seccomp profile of the kube runtime's gateway pods (a Localhost profile on
// each node, kube.Options.SeccompProfile), in the JSON that the kubelet hands to the container
// runtime: the container runtimes' default (moby's, which containerd 2 shares: an allow-list
// that refuses io_uring, new namespaces and the calls that need a capability) with every
// unconditional call of Refused answering its errno whatever capabilities the container has.
// A pod whose runtime is containerd 1.6 or 1.7 gets the same protection as on a current one,
// whose RuntimeDefault lets io_uring through.
func Profile() ([]byte, error) {
	p := seccomp.DefaultProfile()
	byErrno := map[uint][]string{}
	refused := map[string]bool{}
	for _, r := range Refused {
		if r.Flags != 0 {
			continue // clone and unshare: the default refuses their namespace flags already
		}
		refused[r.Name] = true
		byErrno[uint(r.Errno)] = append(byErrno[uint(r.Errno)], r.Name)
	}
	var rules []*seccomp.Syscall
	for _, s := range p.Syscalls {
		if !resolve(s) {
			continue
		}
		s.Names = slices.DeleteFunc(slices.Clone(s.Names), func(n string) bool { return refused[n] })
		if len(s.Names) > 0 {
			rules = append(rules, s)
		}
	}
	errnos := make([]uint, 0, len(byErrno))
	for e := range byErrno {
		errnos = append(errnos, e)
	}
	slices.Sort(errnos)
	for _, e := range errnos {
		ret := e
		rules = append(rules, &seccomp.Syscall{
			LinuxSyscall: specs.LinuxSyscall{Names: byErrno[e], Action: specs.ActErrno, ErrnoRet: &ret},
			Comment:      "agentplane: syscallpolicy.Refused",
		})
	}
	p.Syscalls = rules
	out, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}
