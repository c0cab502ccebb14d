//go:build !nodevtools

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime/local"
	"github.com/agentplane/agentplane/internal/devtools/devenv"
	"github.com/agentplane/agentplane/internal/devtools/images"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/rules/auth"
	"github.com/agentplane/agentplane/internal/scheme"
)

type devFlags struct {
	stateDir, controlPlaneDir, workspace, user, runtime string
	engineDirs                                          []string
	noManager                                           bool
	// warmPool, when set (warmPoolSet), is the size of the GatewayPool "default".
	warmPool    int
	warmPoolSet bool
}

func newDevCommand() *cobra.Command {
	o := platform.Options{}
	f := devFlags{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the embedded local platform: control plane, controllers, REST facade and local agents",
		Long: `dev starts a local kube-apiserver and etcd (state under --state-dir, so a restart keeps
every object), installs the CRDs, runs the controllers and the REST facade in this process, and
writes <state-dir>/kubeconfig and <state-dir>/dev.env (KUBECONFIG, AGENTPLANE_URL,
AGENTPLANE_TOKEN). Ctrl-C stops everything it started.

With --runtime kube (root only) it starts a local cluster instead: the control plane plus
kube-controller-manager, kube-scheduler and a real node (kubelet, containerd, runc, a CNI
bridge, a volume provisioner), imports a gateway image built from each --engine-dir, and runs
agents there as StatefulSets. That cluster is fresh at every start.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.warmPoolSet = cmd.Flags().Changed("warm-pool")
			return runDev(ctrl.SetupSignalHandler(), cmd.OutOrStdout(), f, o)
		},
	}
	addPlatformFlags(cmd, &o, "127.0.0.1:8080")
	fl := cmd.Flags()
	fl.StringVar(&f.stateDir, "state-dir", ".agentplane", "where the control plane, agents and files keep their state")
	fl.StringVar(&f.controlPlaneDir, "control-plane-dir", "bin/k8s", "directory with the kube-apiserver and etcd binaries (make envtest-assets)")
	fl.StringVar(&f.workspace, "workspace", "dev", "workspace the dev token belongs to")
	fl.StringVar(&f.user, "user", "developer", "user id of the dev token")
	fl.StringVar(&o.MetricsAddr, "metrics-bind-address", "0", "metrics endpoint address (0 disables)")
	fl.StringSliceVar(&f.engineDirs, "engine-dir", nil, "OpenClaw install dir with bin/openclaw (hack/install-engine.sh); repeat for several versions")
	fl.StringVar(&o.Runtime.DefaultVersion, "default-engine-version", "", "engine version of agents that name none (default: the newest installed)")
	fl.StringVar(&o.Runtime.CompileCacheDir, "compile-cache-dir", "", compileCacheDirUsage+" (default <state-dir>/runtime/compile-cache)")
	fl.BoolVar(&o.Runtime.GatewayTemplates, "gateway-templates", true, gatewayTemplatesUsage)
	fl.StringVar(&o.Runtime.TemplateDir, "template-dir", "", templateDirUsage+" (default <state-dir>/runtime/templates)")
	fl.BoolVar(&o.Runtime.MemoryMerge, "memory-merge", false, memoryMergeUsage)
	fl.DurationVar(&o.Runtime.CheckpointPackAfter, "checkpoint-pack-after", 0, checkpointPackAfterUsage)
	fl.StringVar(&o.Runtime.CAFile, "agent-ca-file", os.Getenv("NODE_EXTRA_CA_CERTS"), agentCAFileUsage)
	fl.StringVar(&o.Runtime.Sandbox, "sandbox", local.SandboxAuto, "contain each local agent in a bubblewrap sandbox: auto (when this host can; otherwise serve one workspace only), required (refuse to start without) or off (one workspace only)")
	fl.StringSliceVar(&o.Runtime.ReadOnlyPaths, "sandbox-ro-path", nil, "a further host path every local agent's sandbox shows read-only (repeatable)")
	fl.StringVar(&f.runtime, "runtime", platform.RuntimeLocal, "where agents run: local (processes on this host) or kube (a local cluster with a real node; root)")
	fl.IntVar(&f.warmPool, "warm-pool", 0, "keep this many gateways of the default engine version booted for new agents (the GatewayPool \""+devPoolName+"\"; unset: leave the pools as they are)")
	fl.BoolVar(&f.noManager, "no-manager", false, "with --runtime kube: start the cluster with the manager's image ("+images.ManagerImage+", from this binary) but run no manager, for `make deploy-local`")
	return cmd
}

func runDev(ctx context.Context, out io.Writer, f devFlags, o platform.Options) error {
	stateDir, err := filepath.Abs(f.stateDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return err
	}
	if len(f.engineDirs) == 0 {
		return errors.New("no engine: pass --engine-dir (make run installs one with hack/install-engine.sh)")
	}
	fmt.Fprintln(out, "[dev] checking the engine")
	engines, err := engineVersions(ctx, f.engineDirs)
	if err != nil {
		return err
	}
	switch f.runtime {
	case platform.RuntimeKube:
		return runDevKube(ctx, out, f, o, stateDir, engines)
	case platform.RuntimeLocal:
	default:
		return fmt.Errorf("unknown runtime %q (local or kube)", f.runtime)
	}
	fmt.Fprintf(out, "[dev] starting the local control plane (state in %s)\n", stateDir)
	cp, err := devenv.Start(stateDir, f.controlPlaneDir)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(out, "[dev] stopping the control plane")
		if err := cp.Stop(); err != nil {
			fmt.Fprintln(out, "[dev] stop:", err)
		}
	}()
	fmt.Fprintf(out, "[dev] control plane up at %s\n", cp.URL())
	o.Runtime.Name = platform.RuntimeLocal
	o.Runtime.EngineDirs = engines
	o.Runtime.StateDir = filepath.Join(stateDir, "runtime")
	return serveDev(ctx, out, f, o, stateDir, cp.Config, cp.Kubeconfig)
}

// serveDev runs the platform on the API server of cfg until ctx ends.
func serveDev(ctx context.Context, out io.Writer, f devFlags, o platform.Options, stateDir string, cfg *rest.Config, kubeconfig string) error {
	var err error
	o.Log = ctrl.Log
	o.ProbeAddr = "0"
	if o.Files, err = localStorage(filepath.Join(stateDir, "storage")); err != nil {
		return err
	}
	e, err := platform.RunEmbedded(ctx, cfg, o)
	if err != nil {
		return err
	}
	token, err := devToken(ctx, cfg, e.Signer, stateDir, f)
	if err == nil && f.warmPoolSet {
		err = applyWarmPool(ctx, cfg, f.warmPool, f.workspace)
	}
	if err == nil {
		envFile := filepath.Join(stateDir, devenv.EnvFileName)
		if err = devenv.WriteEnvFile(envFile, kubeconfig, e.URL, token); err == nil {
			printDevSummary(out, e.URL, kubeconfig, envFile)
			if ok, why := e.Sandboxed(); !ok {
				fmt.Fprintf(out, "WARNING: agents are not sandboxed (%s): this platform serves the agents of one workspace only.\n\n", why)
			}
			if ok, why := e.Checkpoints(); !ok {
				fmt.Fprintf(out, "NOTE: suspended agents are stopped and start cold on resume (no checkpoints: %s).\n\n", why)
			}
			if ok, why := e.Templates(); !ok && f.runtime == platform.RuntimeLocal {
				fmt.Fprintf(out, "NOTE: new agents' gateways boot cold (no gateway templates: %s).\n\n", why)
			}
			return e.Wait()
		}
	}
	_ = e.Stop()
	return err
}

// devToken returns the token of the dev workspace: the one written by an earlier run when its
// ApiKey still exists and it still verifies, else a new one.
func devToken(ctx context.Context, cfg *rest.Config, signer *auth.Signer, stateDir string, f devFlags) (string, error) {
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return "", err
	}
	if old := devenv.ReadEnvFile(filepath.Join(stateDir, devenv.EnvFileName))["AGENTPLANE_TOKEN"]; old != "" {
		if claims, err := signer.Parse(old); err == nil && claims.Workspace == f.workspace {
			key := &agentsv1.ApiKey{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: f.workspace, Name: claims.ID}, key); err == nil && !key.Spec.Revoked {
				return old, nil
			}
		}
	}
	return platform.OwnerToken(ctx, c, signer, f.workspace, f.user, "agentplane dev token")
}

func printDevSummary(out io.Writer, url, kubeconfig, envFile string) {
	fmt.Fprintf(out, `
agentplane is running.

  REST API    %s
  Web console %s/console
  kubeconfig  %s
  env file    %s   (KUBECONFIG, AGENTPLANE_URL, AGENTPLANE_TOKEN)

Try, in another terminal:

  set -a; . %s; set +a
  curl -s -H "Authorization: Bearer $AGENTPLANE_TOKEN" -d '{"name":"demo"}' $AGENTPLANE_URL/v0/agents
  kubectl get agents -A
  curl -s -H "Authorization: Bearer $AGENTPLANE_TOKEN" -d '{"command":"ls -la"}' $AGENTPLANE_URL/v0/agents/<agentId>/console/exec

Press Ctrl-C to stop.
`, url, url, kubeconfig, envFile, envFile)
}
