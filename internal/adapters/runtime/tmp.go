package runtime

// TmpSize bounds an agent's /tmp on both runtimes, in bytes: the local runtime's sandbox
// mounts a tmpfs of this size (memory the host would otherwise give until half of its RAM is
// gone), the kube runtime sets it as the sizeLimit of the gateway pod's /tmp emptyDir. The
// engine keeps little there (its logs go to the agent's home, its compile cache is a
// read-only bind); a write past the bound fails with ENOSPC in the sandbox and evicts the pod
// on a node, and touches no other agent.
const TmpSize = 512 << 20
