package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/rules/auth"
	"github.com/agentplane/agentplane/internal/rules/workspacens"
)

func newTokenCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Manage API tokens"}
	cmd.AddCommand(newTokenCreateCommand())
	return cmd
}

type tokenFlags struct {
	workspace, user, role, scopes, description, systemNamespace, plan string
	ttl                                                               time.Duration
	createWorkspace                                                   bool
}

func newTokenCreateCommand() *cobra.Command {
	f := tokenFlags{}
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create an ApiKey and print its bearer token (shown once)",
		Example: `  agentplane token create --workspace demo --user alice --scopes agents:read,agents:write --ttl 24h
  agentplane token create --workspace acme --create-workspace --user ci --scopes 'org:files:write' --role admin`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, c, err := kubeClient()
			if err != nil {
				return err
			}
			tok, err := createToken(cmd.Context(), c, f)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), tok)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.workspace, "workspace", "", "workspace (and namespace) the token belongs to (required)")
	fl.StringVar(&f.user, "user", "", "user id, the token's sub (required)")
	fl.StringVar(&f.scopes, "scopes", strings.Join([]string{auth.ScopeAgentsRead, auth.ScopeAgentsWrite}, ","), "comma-separated scopes, or * for all ("+strings.Join(auth.AllScopes, ", ")+")")
	fl.StringVar(&f.role, "role", string(agentsv1.RoleMember), "role when the user is not a member of the workspace: owner, admin, member or viewer")
	fl.DurationVar(&f.ttl, "ttl", 0, "lifetime, for example 24h (0 = no expiry)")
	fl.StringVar(&f.description, "description", "", "note stored on the ApiKey")
	fl.BoolVar(&f.createWorkspace, "create-workspace", false, "create the workspace when it does not exist")
	fl.StringVar(&f.plan, "plan", string(agentsv1.PlanFree), "plan of a workspace created with --create-workspace")
	fl.StringVar(&f.systemNamespace, "system-namespace", platform.DefaultSystemNamespace, "namespace of the platform's signing key")
	_ = cmd.MarkFlagRequired("workspace")
	_ = cmd.MarkFlagRequired("user")
	return cmd
}

// createToken makes sure the workspace exists (or creates it when asked), creates the ApiKey
// and returns the signed token.
func createToken(ctx context.Context, c client.Client, f tokenFlags) (string, error) {
	role := agentsv1.Role(f.role)
	switch role {
	case agentsv1.RoleOwner, agentsv1.RoleAdmin, agentsv1.RoleMember, agentsv1.RoleViewer:
	default:
		return "", fmt.Errorf("unknown role %q", f.role)
	}
	scopes := splitScopes(f.scopes)
	if err := auth.ValidateScopes(scopes); err != nil {
		return "", err
	}
	if err := ensureWorkspace(ctx, c, f); err != nil {
		return "", err
	}
	key, err := auth.EnsureSigningKey(ctx, c, f.systemNamespace)
	if err != nil {
		return "", err
	}
	signer, err := auth.NewSigner(key)
	if err != nil {
		return "", err
	}
	tok, _, err := auth.CreateKey(ctx, c, signer, auth.KeyRequest{
		Workspace: f.workspace, UserID: f.user, Scopes: scopes, Role: role, TTL: f.ttl, Description: f.description,
	})
	return tok, err
}

func ensureWorkspace(ctx context.Context, c client.Client, f tokenFlags) error {
	ws := &agentsv1.Workspace{}
	err := c.Get(ctx, client.ObjectKey{Name: f.workspace}, ws)
	if err == nil || !apierrors.IsNotFound(err) {
		return err
	}
	if !f.createWorkspace {
		return fmt.Errorf("workspace %q does not exist (pass --create-workspace to create it)", f.workspace)
	}
	return workspacens.EnsureWorkspace(ctx, c, &agentsv1.Workspace{
		ObjectMeta: metav1.ObjectMeta{Name: f.workspace},
		Spec:       agentsv1.WorkspaceSpec{Plan: agentsv1.Plan(f.plan)},
	})
}

func splitScopes(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
