// Command genchart writes the Helm chart dist/chart from config/ (make chart): the CRDs of
// config/crd/bases verbatim, the RBAC, manager Deployment, Services, NetworkPolicy,
// leader-election FlowSchema and the Agent finalizer's MutatingAdmissionPolicy that
// `kubectl kustomize config/default` renders (namespace, image,
// replicas, resources, scheduling, storage and flags from the values), the objects of config/monitoring behind values, and the
// static templates and values.yaml under hack/genchart/gen/static. hack/verify-generated.sh runs
// it and fails when dist/chart differs from what it writes.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/agentplane/agentplane/hack/genchart/gen"
)

func main() {
	var o gen.Options
	flag.StringVar(&o.Config, "config", "config", "the kustomize tree (default/, crd/bases/ under it)")
	flag.StringVar(&o.Monitoring, "monitoring", "config/monitoring", "directory of the monitoring objects and dashboards/*.json (absent: none)")
	flag.StringVar(&o.Out, "out", "dist/chart", "chart directory to (re)write")
	flag.StringVar(&o.Version, "version", "0.1.0", "chart version and appVersion")
	flag.StringVar(&o.Kubectl, "kubectl", "kubectl", "kubectl that renders the kustomize tree")
	flag.Parse()
	if err := gen.Run(o); err != nil {
		fmt.Fprintln(os.Stderr, "genchart:", err)
		os.Exit(1)
	}
}
