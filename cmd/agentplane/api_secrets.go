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
		&cobra.Command{
			Use: "list", Short: "List the workspace's secrets (never their values)", Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				c, err := f.connect()
				if err != nil {
					return err
				}
				res, err := apclient.Checked(c.ListSecretsWithResponse(cmd.Context(), &apclient.ListSecretsParams{}))
				if err != nil {
					return err
				}
				body, err := either(res.JSON200, nil)
				if err != nil {
					return err
				}
				return f.print(cmd.OutOrStdout(), body.Secrets, secretsTable(body.Secrets...))
			},
		},
		newSecretsCreateCommand(f),
		&cobra.Command{
			Use: "delete SECRET", Short: "Delete a secret", Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := f.connect()
				if err != nil {
					return err
				}
				res, err := apclient.Checked(c.DeleteSecretWithResponse(cmd.Context(), args[0], &apclient.DeleteSecretParams{}))
				if err != nil {
					return err
				}
				body, err := either(res.JSON200, nil)
				if err != nil {
					return err
				}
				return f.print(cmd.OutOrStdout(), body, deletedTable(body.Id, body.Deleted))
			},
		},
		&cobra.Command{
			Use: "attach AGENT SECRET...", Short: "Attach secrets to an agent", Args: cobra.MinimumNArgs(2),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := f.connect()
				if err != nil {
					return err
				}
				res, err := apclient.Checked(c.AttachSecretsWithResponse(cmd.Context(), args[0], &apclient.AttachSecretsParams{},
					apclient.AttachSecretsJSONRequestBody{SecretIds: args[1:]}))
				if err != nil {
					return err
				}
				body, err := either(res.JSON200, nil)
				if err != nil {
					return err
				}
				return f.print(cmd.OutOrStdout(), body.Agent, agentsTable(body.Agent))
			},
		},
		&cobra.Command{
			Use: "detach AGENT SECRET", Short: "Detach a secret from an agent", Args: cobra.ExactArgs(2),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := f.connect()
				if err != nil {
					return err
				}
				res, err := apclient.Checked(c.DetachSecretWithResponse(cmd.Context(), args[0], args[1], &apclient.DetachSecretParams{}))
				if err != nil {
					return err
				}
				body, err := either(res.JSON200, nil)
				if err != nil {
					return err
				}
				return f.print(cmd.OutOrStdout(), body.Agent, agentsTable(body.Agent))
			},
		},
	)
	return cmd
}

func newSecretsCreateCommand(f *apiFlags) *cobra.Command {
	var name, value, fromFile, envName, provider string
	cmd := &cobra.Command{
		Use: "create", Short: "Create a secret (its value is sealed and never shown again)", Args: cobra.NoArgs,
		Example: `  agentplane secrets create --name openai --value "$OPENAI_API_KEY" --provider openai
  agentplane secrets create --name deploy-key --from-file ./id_ed25519`,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
			c, err := f.connect()
			if err != nil {
				return err
			}
			req := apclient.CreateSecretJSONRequestBody{Name: name, Value: value}
			if envName != "" {
				req.EnvName = &envName
			}
			if provider != "" {
				req.Provider = &provider
			}
			res, err := apclient.Checked(c.CreateSecretWithResponse(cmd.Context(), &apclient.CreateSecretParams{}, req))
			if err != nil {
				return err
			}
			body, err := either(res.JSON201, nil)
			if err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), body.Secret, secretsTable(body.Secret))
		},
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
		Short: "List, take and restore an agent's workspace snapshots through the REST API",
		Example: `  agentplane snapshots list agt-1234
  agentplane snapshots reset agt-1234 bafy...`,
	}
	f.register(cmd)
	cmd.AddCommand(
		&cobra.Command{
			Use: "list AGENT", Short: "An agent's snapshots, newest first", Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := f.connect()
				if err != nil {
					return err
				}
				res, err := apclient.Checked(c.ListSnapshotsWithResponse(cmd.Context(), args[0], &apclient.ListSnapshotsParams{}))
				if err != nil {
					return err
				}
				body, err := either(res.JSON200, nil)
				if err != nil {
					return err
				}
				return f.print(cmd.OutOrStdout(), body.Snapshots, snapshotsTable(body.Snapshots...))
			},
		},
		&cobra.Command{
			Use: "create AGENT", Short: "Archive the agent's workspace now", Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := f.connect()
				if err != nil {
					return err
				}
				res, err := apclient.Checked(c.SyncSnapshotWithResponse(cmd.Context(), args[0], &apclient.SyncSnapshotParams{}))
				if err != nil {
					return err
				}
				body, err := either(res.JSON201, nil)
				if err != nil {
					return err
				}
				return f.print(cmd.OutOrStdout(), body.Snapshot, snapshotsTable(body.Snapshot))
			},
		},
		&cobra.Command{
			Use: "reset AGENT SNAPSHOT_CID", Short: "Restore the agent's workspace from a snapshot of its history", Args: cobra.ExactArgs(2),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := f.connect()
				if err != nil {
					return err
				}
				res, err := apclient.Checked(c.ResetSnapshotWithResponse(cmd.Context(), args[0], &apclient.ResetSnapshotParams{},
					apclient.ResetSnapshotJSONRequestBody{SnapshotCid: args[1]}))
				if err != nil {
					return err
				}
				body, err := either(res.JSON200, nil)
				if err != nil {
					return err
				}
				return f.print(cmd.OutOrStdout(), body, snapshotsTable(body.Snapshot))
			},
		},
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
