//go:build !nodevtools

package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/devtools/devenv"
	"github.com/agentplane/agentplane/internal/devtools/fakeclaw"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
	"github.com/agentplane/agentplane/internal/platform"
)

// agentplane dev serves the facade with a token of the dev workspace in dev.env, stops on its
// context, and a restart on the same state keeps that token.
func TestDevServesAndKeepsItsToken(t *testing.T) {
	fake := fakeclaw.MustEngineDir(t)
	state := t.TempDir()
	run := func() map[string]string {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		f := devFlags{stateDir: state, controlPlaneDir: kubeenv.AssetsDir(), workspace: "dev", user: "developer",
			runtime: platform.RuntimeLocal, engineDirs: []string{fake}}
		// Two runs in one process: controller names repeat.
		o := platform.Options{APIAddr: "127.0.0.1:0", MetricsAddr: "0", ProvisionTimeout: 30 * time.Second, SkipNameValidation: true}
		envFile := filepath.Join(state, devenv.EnvFileName)
		before := devenv.ReadEnvFile(envFile)["AGENTPLANE_URL"]
		done := make(chan error, 1)
		go func() { done <- runDev(ctx, io.Discard, f, o) }()
		deadline := time.Now().Add(2 * time.Minute)
		var env map[string]string
		for env = devenv.ReadEnvFile(envFile); env["AGENTPLANE_URL"] == "" || env["AGENTPLANE_URL"] == before; env = devenv.ReadEnvFile(envFile) {
			select {
			case err := <-done:
				t.Fatalf("dev stopped: %v", err)
			case <-time.After(100 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatal("dev.env was not written")
			}
		}
		req, _ := http.NewRequest(http.MethodGet, env["AGENTPLANE_URL"]+"/v0/agents", nil)
		req.Header.Set("Authorization", "Bearer "+env["AGENTPLANE_TOKEN"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET /v0/agents with the dev token: %s", resp.Status)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dev returned %v after its context ended", err)
		}
		return env
	}
	first, second := run(), run()
	if first["AGENTPLANE_TOKEN"] == "" || second["AGENTPLANE_TOKEN"] != first["AGENTPLANE_TOKEN"] {
		t.Errorf("the restart minted another token")
	}
}
