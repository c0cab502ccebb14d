package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/internal/engine/openclaw"
	"github.com/agentplane/agentplane/internal/scheme"
	"github.com/agentplane/agentplane/internal/secrets"
	"github.com/agentplane/agentplane/internal/storage/local"
	"github.com/agentplane/agentplane/internal/syskeys"
)

// engineVersions asks each engine dir's bin/openclaw for its version.
func engineVersions(ctx context.Context, dirs []string) (map[string]string, error) {
	eng := openclaw.New()
	out := map[string]string{}
	for _, d := range dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, err
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		cmd := exec.CommandContext(cctx, filepath.Join(abs, "bin", "openclaw"), eng.VersionCommand().Args...)
		raw, err := cmd.Output()
		cancel()
		if err != nil {
			return nil, fmt.Errorf("engine in %s: %w", abs, err)
		}
		v, err := eng.ParseVersion(raw)
		if err != nil {
			return nil, fmt.Errorf("engine in %s: %w (%q)", abs, err, strings.TrimSpace(string(raw)))
		}
		out[v] = abs
	}
	return out, nil
}

func localStorage(dir string) (*local.Store, error) { return local.New(dir) }

// ensureSecretsKey provisions the secrets key in dev mode (a cluster's platform team provisions
// it themselves; until then secrets answer 503).
func ensureSecretsKey(ctx context.Context, cfg *rest.Config, systemNamespace string) error {
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	_, err = syskeys.EnsureRandomKey(ctx, c, systemNamespace, secrets.KeySecretName, 32)
	return err
}
