// Package stress proves agentplane under stress: concurrent requests racing across two facade
// replicas that share one control plane, faults (a manager killed mid-provisioning, the API
// server, storage and DNS going away, an engine that crash-loops) and security checks (no
// secret in logs, events, objects or error bodies; constant-time token comparison; workspace
// isolation on every route). Everything is in the package's tests: a real kube-apiserver and
// etcd (envtest), the local runtime with the fakeclaw engine, a loopback DNS server and a fake
// ClawHub registry, all on loopback and all stopped when the tests end.
//
// `make test-stress` runs it alone; `make test` runs it with everything else.
package stress
