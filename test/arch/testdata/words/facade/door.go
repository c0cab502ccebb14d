// Package facade plants violations of the REST facade's word rule: lines marked want name
// Kubernetes' server as if the facade had no server of its own.
package facade

// Read asks the API server for the agent. // want: alone
// Write goes to kube-apiserver, as the Kubernetes API server's docs say.
// The API server answers before the Kubernetes API server does. // want: once alone
func Read() {}
