package platform

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/engine/openclaw"
	"github.com/agentplane/agentplane/internal/rules/auth"
	"github.com/agentplane/agentplane/internal/rules/secrets"
	"github.com/agentplane/agentplane/internal/rules/workspacens"
	"github.com/agentplane/agentplane/internal/scheme"
	"github.com/agentplane/agentplane/internal/syskeys"
)

// Embedded is a platform running in this process (`agentplane dev`, the public test kit).
type Embedded struct {
	*Platform
	// URL is the REST facade's base URL (http://host:port).
	URL    string
	cancel context.CancelFunc
	done   chan error
}

// RunEmbedded provisions the secrets key in o's system namespace, builds the platform on cfg,
// starts it and returns once the REST facade listens (o.APIAddr must be set; o.APIReady is
// taken). The platform runs until ctx ends or Stop is called.
func RunEmbedded(ctx context.Context, cfg *rest.Config, o Options) (*Embedded, error) {
	if o.APIAddr == "" {
		return nil, errors.New("embedded platform: no APIAddr")
	}
	if o.SystemNamespace == "" {
		o.SystemNamespace = DefaultSystemNamespace
	}
	if err := EnsureSecretsKey(ctx, cfg, o.SystemNamespace); err != nil {
		return nil, err
	}
	ready := make(chan string, 1)
	o.APIReady = func(addr string) { ready <- addr }
	p, err := New(ctx, cfg, o)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	e := &Embedded{Platform: p, cancel: cancel, done: make(chan error, 1)}
	go func() { e.done <- p.Start(runCtx) }()
	select {
	case addr := <-ready:
		e.URL = "http://" + addr
		return e, nil
	case err := <-e.done:
		cancel()
		if err == nil {
			err = errors.New("embedded platform stopped before its REST facade listened")
		}
		return nil, err
	}
}

// Wait blocks until the platform has stopped and returns why (nil after a cancellation).
func (e *Embedded) Wait() error {
	err := <-e.done
	e.done <- err // a later Wait gets the same answer
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// Stop stops the platform (controllers, facade, local gateways) and waits for it.
func (e *Embedded) Stop() error {
	e.cancel()
	return e.Wait()
}

// OwnerToken returns a token with every scope for user, the owner of workspace, after creating
// the workspace (and its namespace) when missing: an internal workspace on the pro plan, so
// every route answers. description labels the ApiKey.
func OwnerToken(ctx context.Context, c client.Client, signer *auth.Signer, workspace, user, description string) (string, error) {
	ws := &agentsv1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Name: workspace},
		Spec: agentsv1.WorkspaceSpec{
			DisplayName: workspace, Plan: agentsv1.PlanPro, Internal: true,
			Members: []agentsv1.WorkspaceMember{{UserID: user, Role: agentsv1.RoleOwner}},
		},
	}
	if err := workspacens.EnsureWorkspace(ctx, c, ws); err != nil {
		return "", err
	}
	tok, _, err := auth.CreateKey(ctx, c, signer, auth.KeyRequest{
		Workspace: workspace, UserID: user, Scopes: []string{auth.ScopeAll},
		Role: agentsv1.RoleOwner, Description: description,
	})
	return tok, err
}

// EngineVersions asks each engine dir's bin/openclaw for its version: version -> absolute dir.
func EngineVersions(ctx context.Context, dirs []string) (map[string]string, error) {
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

// EnsureSecretsKey provisions the secrets key where nobody did (dev mode, tests; a cluster's
// platform team provisions it themselves, and until then secrets answer 503).
func EnsureSecretsKey(ctx context.Context, cfg *rest.Config, systemNamespace string) error {
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	_, err = syskeys.EnsureRandomKey(ctx, c, systemNamespace, secrets.KeySecretName, 32)
	return err
}
