//go:build !nodevtools

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/agentplane/agentplane/config/crd"
	"github.com/agentplane/agentplane/internal/devtools/images"
	"github.com/agentplane/agentplane/internal/devtools/localcluster"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/scheme"
)

// runDevKube runs the platform with the kube runtime on a fresh local cluster whose real node
// runs the gateway images built from engines (version -> install dir).
func runDevKube(ctx context.Context, out io.Writer, f devFlags, o platform.Options, stateDir string, engines map[string]string) error {
	if os.Geteuid() != 0 {
		return localcluster.ErrNoRoot
	}
	probe, err := probeBinary()
	if err != nil {
		return err
	}
	var imgs []string
	var versions []string
	for v, dir := range engines {
		spec, err := images.GatewaySpec(dir, v, probe)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "[dev] gateway image %s (built once, cached in %s)\n", spec.Ref, images.CacheDir())
		file, err := images.Ensure(images.CacheDir(), spec)
		if err != nil {
			return err
		}
		imgs = append(imgs, file)
		versions = append(versions, v)
	}
	sort.Strings(versions)
	if f.noManager {
		file, err := managerImage()
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "[dev] manager image %s\n", images.ManagerImage)
		imgs = append(imgs, file)
	}
	crds, err := crd.CRDs()
	if err != nil {
		return err
	}
	dir := filepath.Join(stateDir, "cluster")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fmt.Fprintf(out, "[dev] starting the local cluster with a real node (state in %s)\n", dir)
	cl, err := localcluster.Start(ctx, localcluster.Options{
		BinDir: f.controlPlaneDir, Dir: dir, CRDs: crds, Images: imgs, Scheme: scheme.New(),
	})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(out, "[dev] stopping the local cluster")
		if err := cl.Stop(); err != nil {
			fmt.Fprintln(out, "[dev] stop:", err)
		}
	}()
	fmt.Fprintf(out, "[dev] node %s Ready at %s; API server %s\n", cl.NodeName, cl.NodeIP, cl.Config.Host)
	if f.noManager {
		fmt.Fprintf(out, "[dev] no manager runs: deploy it with\n  KUBECONFIG=%s make deploy-local\n[dev] Ctrl-C stops the cluster\n", cl.Kubeconfig)
		<-ctx.Done()
		return nil
	}
	o.Runtime.Name = platform.RuntimeKube
	o.Runtime.Versions = versions
	o.Runtime.Image = images.GatewayTemplate()
	o.Runtime.Init = []string{images.Init, "--"}
	o.Runtime.Probe = []string{images.Probe}
	if o.Runtime.SeccompProfile == "" {
		o.Runtime.SeccompProfile = localcluster.AgentSeccompProfile
	}
	if o.ModelProxy.URL == "" {
		// The node's pods reach the model proxy on the node's address; the facade stays on
		// loopback.
		o.ModelProxy.Addr = cl.NodeIP + ":0"
	}
	return serveDev(ctx, out, f, o, stateDir, cl.Config, cl.Kubeconfig)
}

// managerImage is the tarball of the manager's image built from this binary, which must be
// static (make build builds it with CGO_ENABLED=0): the image has no C library.
func managerImage() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	if err := images.CheckStatic(self); err != nil {
		return "", fmt.Errorf("the manager's image: %w (make build)", err)
	}
	spec, err := images.ManagerSpec(self)
	if err != nil {
		return "", err
	}
	return images.Ensure(images.CacheDir(), spec)
}

// probeBinary is the agentplane-probe built beside this binary (make build).
func probeBinary() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	p := filepath.Join(filepath.Dir(self), "agentplane-probe")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("the gateway image needs agentplane-probe beside %s (make build): %w", self, err)
	}
	return p, nil
}
