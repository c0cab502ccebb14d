// Command controlplane builds the test control plane (kube-apiserver and etcd) when it is not
// cached and prints its directory, as `agentplane envtest-assets --print-dir` does, without
// compiling the whole agentplane binary first: hack/build-controlplane.sh runs it on the
// Kubernetes lane of make test, where every minute before kube-apiserver's build is one more
// on a fresh machine's critical path.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/agentplane/agentplane/internal/devtools/controlplane"
)

func main() {
	dir, err := controlplane.Builder{Log: os.Stderr}.Ensure(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "control plane:", err)
		os.Exit(1)
	}
	fmt.Println(dir)
}
