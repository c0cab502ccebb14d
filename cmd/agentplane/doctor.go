package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/adapters/runtime/kube"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
	"github.com/agentplane/agentplane/internal/ops/recovery"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/scheme"
)

// doctorFlags select what `agentplane doctor` compares: the runtime and storage of the
// manager it checks (the same flags as `agentplane manager`).
type doctorFlags struct {
	runtime, runtimeDir, storageDir, systemNamespace, output string
	repair                                                   bool
	s3f                                                      s3Flags
}

// errDisagree: the doctor found disagreements (exit status 1).
var errDisagree = errors.New("the API server, the runtime and storage disagree")

func newDoctorCommand() *cobra.Command {
	f := doctorFlags{}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Report what disagrees between the API server, the runtime and storage (after a restore); repair on --repair",
		Long: `doctor compares the Agents, Snapshots and Workspaces of the API server with the agent homes the
runtime keeps and the snapshot archives storage holds, and lists what disagrees: homes no Agent
names (kept: re-create the Agent with the same namespace and name), Agents without a home,
archives no Snapshot names, Snapshots whose archive is gone, counts that disagree with the
objects. The exit status is 0 when all agree, 1 when something disagrees.

--repair re-creates the Snapshots that storage's link records name (for agents that exist) and
recounts the counts that disagree, then checks again. Nothing is ever deleted.`,
		Example: `  agentplane doctor --runtime kube --s3-endpoint minio:9000 --s3-bucket agentplane --s3-credentials-secret s3
  agentplane doctor --runtime local --runtime-dir ./agentplane-runtime --storage-dir ./files -o json
  agentplane doctor --runtime local --runtime-dir ./agentplane-runtime --storage-dir ./files --repair`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := ctrl.GetConfig()
			if err != nil {
				return err
			}
			return runDoctor(cmd.Context(), cfg, f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.runtime, "runtime", platform.RuntimeKube, "the manager's runtime: kube (home volumes) or local (home directories)")
	fl.StringVar(&f.runtimeDir, "runtime-dir", "agentplane-runtime", "the local runtime's state dir (--runtime local)")
	fl.StringVar(&f.storageDir, "storage-dir", "", "the manager's storage directory (local disk backend); without it or --s3-endpoint, archives are not checked")
	fl.StringVar(&f.systemNamespace, "system-namespace", platform.DefaultSystemNamespace, "namespace of the S3 credentials Secret")
	fl.StringVarP(&f.output, "output", "o", "table", "output format: table or json")
	fl.BoolVar(&f.repair, "repair", false, "re-create the Snapshots storage records and recount what disagrees (never deletes)")
	f.s3f.add(cmd)
	return cmd
}

// runDoctor checks (and repairs, with --repair: what it did goes to log) and writes the
// report to out. It returns errDisagree when something disagrees.
func runDoctor(ctx context.Context, cfg *rest.Config, f doctorFlags, out, log io.Writer) error {
	if f.output != "table" && f.output != "json" {
		return &usageError{msg: fmt.Sprintf("unknown output format %q (table or json)", f.output)}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	d := recovery.Doctor{Reader: c}
	switch f.runtime {
	case platform.RuntimeKube:
		d.Homes = func(ctx context.Context) ([]runtime.Home, error) { return kube.ListHomes(ctx, c) }
	case platform.RuntimeLocal:
		d.Homes = func(ctx context.Context) ([]runtime.Home, error) { return local.ListHomes(ctx, f.runtimeDir) }
	default:
		return &usageError{msg: fmt.Sprintf("unknown runtime %q (kube or local)", f.runtime)}
	}
	if d.Store, err = openStorage(ctx, cfg, f.storageDir, &f.s3f, f.systemNamespace); err != nil {
		return err
	}
	rep, err := d.Check(ctx)
	if err != nil {
		return err
	}
	if f.repair && !rep.Agree() {
		done, err := d.Repair(ctx, c, rep)
		for _, r := range done {
			fmt.Fprintf(log, "repaired %s %s/%s: %s\n", r.Kind, r.Namespace, r.Name, r.Repair)
		}
		if err != nil {
			return err
		}
		if rep, err = d.Check(ctx); err != nil {
			return err
		}
	}
	if f.output == "json" {
		err = rep.WriteJSON(out)
	} else {
		err = rep.WriteTable(out)
	}
	if err == nil && !rep.Agree() {
		err = errDisagree
	}
	return err
}
