package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	apclient "github.com/agentplane/agentplane/pkg/client"
)

func newSecretsCommand() *cobra.Command {
	f := &apiFlags{}
	cmd := &cobra.Command{
		Use:   "secrets",
		Short: "Manage workspace secrets and attach them to agents through the REST API",
		Example: `  agentplane secrets create --name openai --value "$OPENAI_API_KEY"
  agentplane secrets attach agt-1234 sec-5678`,
	}
	f.register(cmd)
	cmd.AddCommand(
		f.command("list", "List the workspace's secrets (never their values)", cobra.NoArgs, func(ctx context.Context, c *apclient.Agentplane, _ []string) (any, table, error) {
			b, err := apclient.Decoded[secretsBody](c.ListSecretsWithResponse(ctx, &apclient.ListSecretsParams{}))
			return b.Secrets, secretsTable(b.Secrets...), err
		}),
		newSecretsCreateCommand(f),
		f.command("delete SECRET", "Delete a secret", cobra.ExactArgs(1), func(ctx context.Context, c *apclient.Agentplane, args []string) (any, table, error) {
			b, err := apclient.Decoded[deletedBody](c.DeleteSecretWithResponse(ctx, args[0], &apclient.DeleteSecretParams{}))
			return b, deletedTable(b.Id, b.Deleted), err
		}),
		f.command("attach AGENT SECRET...", "Attach secrets to an agent", cobra.MinimumNArgs(2), func(ctx context.Context, c *apclient.Agentplane, args []string) (any, table, error) {
			b, err := apclient.Decoded[agentBody](c.AttachSecretsWithResponse(ctx, args[0], &apclient.AttachSecretsParams{},
				apclient.AttachSecretsJSONRequestBody{SecretIds: args[1:]}))
			return b.Agent, agentsTable(b.Agent), err
		}),
		f.command("detach AGENT SECRET", "Detach a secret from an agent", cobra.ExactArgs(2), func(ctx context.Context, c *apclient.Agentplane, args []string) (any, table, error) {
			b, err := apclient.Decoded[agentBody](c.DetachSecretWithResponse(ctx, args[0], args[1], &apclient.DetachSecretParams{}))
			return b.Agent, agentsTable(b.Agent), err
		}),
	)
	return cmd
}

func newSecretsCreateCommand(f *apiFlags) *cobra.Command {
	var name, value, fromFile, envName, provider string
	cmd := f.command("create", "Create a secret (its value is sealed and never shown again)", cobra.NoArgs, func(ctx context.Context, c *apclient.Agentplane, _ []string) (any, table, error) {
		req := apclient.CreateSecretJSONRequestBody{Name: name, Value: value}
		if envName != "" {
			req.EnvName = &envName
		}
		if provider != "" {
			req.Provider = &provider
		}
		b, err := apclient.Decoded[secretBody](c.CreateSecretWithResponse(ctx, &apclient.CreateSecretParams{}, req))
		return b.Secret, secretsTable(b.Secret), err
	})
	cmd.Example = `  agentplane secrets create --name openai --value "$OPENAI_API_KEY" --provider openai
  agentplane secrets create --name deploy-key --from-file ./id_ed25519`
	// The flags are checked and the value read before the facade is called.
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) error {
		if name == "" {
			return &usageError{"secrets create needs --name"}
		}
		if (value == "") == (fromFile == "") {
			return &usageError{"secrets create needs one of --value and --from-file"}
		}
		if fromFile != "" {
			raw, err := readValue(cmd.InOrStdin(), fromFile)
			if err != nil {
				return err
			}
			value = string(raw)
		}
		return nil
	}
	fl := cmd.Flags()
	fl.StringVar(&name, "name", "", "the secret's name, unique in the workspace")
	fl.StringVar(&value, "value", "", "the secret's value (prefer --from-file: a flag shows in the process list)")
	fl.StringVar(&fromFile, "from-file", "", "read the value from this file (- for standard input)")
	fl.StringVar(&envName, "env-name", "", "the environment variable agents see it as (default: the name, upper-cased)")
	fl.StringVar(&provider, "provider", "", "groups credentials: an agent attaches at most one secret per provider")
	return cmd
}

// readValue reads a secret's value from a file or, for "-", from stdin.
func readValue(stdin io.Reader, path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(stdin)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read --from-file: %w", err)
	}
	return raw, nil
}

func newSnapshotsCommand() *cobra.Command {
	f := &apiFlags{}
	cmd := &cobra.Command{
		Use:   "snapshots",
		Short: "List, take and restore an agent's home snapshots through the REST API",
		Example: `  agentplane snapshots list agt-1234
  agentplane snapshots reset agt-1234 bafy...`,
	}
	f.register(cmd)
	cmd.AddCommand(
		f.command("list AGENT", "An agent's snapshots, newest first", cobra.ExactArgs(1), func(ctx context.Context, c *apclient.Agentplane, args []string) (any, table, error) {
			b, err := apclient.Decoded[snapshotsBody](c.ListSnapshotsWithResponse(ctx, args[0], &apclient.ListSnapshotsParams{}))
			return b.Snapshots, snapshotsTable(b.Snapshots...), err
		}),
		f.command("create AGENT", "Archive the agent's home now", cobra.ExactArgs(1), func(ctx context.Context, c *apclient.Agentplane, args []string) (any, table, error) {
			b, err := apclient.Decoded[snapshotBody](c.SyncSnapshotWithResponse(ctx, args[0], &apclient.SyncSnapshotParams{}))
			return b.Snapshot, snapshotsTable(b.Snapshot), err
		}),
		f.command("reset AGENT SNAPSHOT_CID", "Restore the agent's home from a snapshot of its history", cobra.ExactArgs(2), func(ctx context.Context, c *apclient.Agentplane, args []string) (any, table, error) {
			b, err := apclient.Decoded[resetBody](c.ResetSnapshotWithResponse(ctx, args[0], &apclient.ResetSnapshotParams{},
				apclient.ResetSnapshotJSONRequestBody{SnapshotCid: args[1]}))
			return b, snapshotsTable(b.Snapshot), err
		}),
	)
	return cmd
}

func newLogsCommand() *cobra.Command {
	f := &apiFlags{}
	var tail int
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs AGENT",
		Short: "Print an agent's gateway log (the last lines, or follow it)",
		Example: `  agentplane logs agt-1234 --tail 50
  agentplane logs agt-1234 --follow`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.connect()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			out := cmd.OutOrStdout()
			err = c.Logs(ctx, args[0], apclient.LogsOptions{Tail: tail, Follow: follow}, func(l string) { fmt.Fprintln(out, l) })
			if follow && errors.Is(err, context.Canceled) {
				return nil // interrupted
			}
			return err
		},
	}
	f.register(cmd)
	cmd.Flags().IntVar(&tail, "tail", 0, "how many of the last lines (default: the facade's)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "stream new lines until interrupted or the stream ends")
	return cmd
}
