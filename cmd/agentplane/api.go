package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	apclient "github.com/agentplane/agentplane/pkg/client"
)

// The commands agents, secrets, snapshots and logs are clients of the REST facade (pkg/client).
// They find it by --url/--token, else AGENTPLANE_URL/AGENTPLANE_TOKEN, else (in a build with
// the development tooling, devtools.go) the dev.env that `agentplane dev` writes into its
// --state-dir.

// usageError is a mistake of the command line or its environment: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// reportError prints err for a user and returns the process's exit code: 2 for a usage error,
// 1 for an answer of the facade (`agentplane: <status> <message>`) or anything else.
func reportError(w io.Writer, err error) int {
	var ue *usageError
	var ce *apclient.Error
	switch {
	case errors.As(err, &ue):
		fmt.Fprintln(w, "agentplane:", ue.msg)
		return 2
	case errors.As(err, &ce):
		fmt.Fprintln(w, "agentplane:", ce.Error())
		return 1
	default:
		fmt.Fprintln(w, "error:", err)
		return 1
	}
}

// apiFlags are the connection and output flags of the client commands.
type apiFlags struct {
	url, token, stateDir, output string
}

func (f *apiFlags) register(cmd *cobra.Command) {
	fl := cmd.PersistentFlags()
	fl.StringVar(&f.url, "url", "", "the facade's base URL (default $AGENTPLANE_URL"+devEnvDefault("AGENTPLANE_URL")+")")
	fl.StringVar(&f.token, "token", "", "bearer token (default $AGENTPLANE_TOKEN"+devEnvDefault("AGENTPLANE_TOKEN")+")")
	registerDevStateDir(cmd, &f.stateDir)
	fl.StringVarP(&f.output, "output", "o", "table", "output format: table, json or yaml")
}

// connect resolves the URL and token and returns a client of the facade.
func (f *apiFlags) connect() (*apclient.Agentplane, error) {
	switch f.output {
	case "table", "json", "yaml":
	default:
		return nil, &usageError{fmt.Sprintf("unknown --output %q (table, json or yaml)", f.output)}
	}
	url, token := f.url, f.token
	if url == "" {
		url = os.Getenv("AGENTPLANE_URL")
	}
	if token == "" {
		token = os.Getenv("AGENTPLANE_TOKEN")
	}
	var hint string
	if url == "" || token == "" {
		var env map[string]string
		env, hint = devPlatformEnv(f.stateDir)
		if url == "" {
			url = strings.TrimSpace(env["AGENTPLANE_URL"])
		}
		if token == "" {
			token = strings.TrimSpace(env["AGENTPLANE_TOKEN"])
		}
	}
	if url == "" {
		return nil, &usageError{"no API URL: pass --url or set AGENTPLANE_URL" + hint}
	}
	if token == "" {
		return nil, &usageError{"no API token: pass --token or set AGENTPLANE_TOKEN (see `agentplane token create`)" + hint}
	}
	return apclient.New(url, token)
}

// apiCall is what a client command does once connected: one call of the facade, answering what
// -o json|yaml prints and the table printed otherwise. With an error both are ignored (a call
// may build them from the zero answer: the table cells take zero values).
type apiCall func(ctx context.Context, c *apclient.Agentplane, args []string) (any, table, error)

// command is a client command: it connects to the facade, runs call and prints its answer.
func (f *apiFlags) command(use, short string, args cobra.PositionalArgs, call apiCall) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Args: args,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.connect()
			if err != nil {
				return err
			}
			v, t, err := call(cmd.Context(), c, args)
			if err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), v, t)
		},
	}
}

// The facade's answers, as the client commands decode them (apclient.Decoded).
type (
	agentBody struct {
		Agent apclient.Agent `json:"agent"`
	}
	agentsBody struct {
		Agents []apclient.Agent `json:"agents"`
	}
	secretBody struct {
		Secret apclient.Secret `json:"secret"`
	}
	secretsBody struct {
		Secrets []apclient.Secret `json:"secrets"`
	}
	snapshotBody struct {
		Snapshot apclient.Snapshot `json:"snapshot"`
	}
	snapshotsBody struct {
		Snapshots []apclient.Snapshot `json:"snapshots"`
	}
	resetBody struct {
		Agent    apclient.Agent    `json:"agent"`
		Snapshot apclient.Snapshot `json:"snapshot"`
	}
	deletedBody struct {
		Deleted bool   `json:"deleted"`
		Id      string `json:"id"`
	}
)

// table is a list printed as rows under a header.
type table struct {
	header []string
	rows   [][]string
}

// print writes v as JSON or YAML, or t as a table.
func (f *apiFlags) print(w io.Writer, v any, t table) error {
	switch f.output {
	case "json":
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(w, string(b))
		return err
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(t.header, "\t"))
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

func timeCell(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func strCell(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// agentsTable is the table of agents: stable columns.
func agentsTable(agents ...apclient.Agent) table {
	t := table{header: []string{"ID", "NAME", "STATUS", "TEMPLATE", "ENGINE", "CREATED"}}
	for _, a := range agents {
		t.rows = append(t.rows, []string{a.Id, a.Name, a.Status, strCell(a.Template), a.Engine, timeCell(a.CreatedAt)})
	}
	return t
}

// secretsTable is the table of secrets (never their values: the facade does not answer them).
func secretsTable(secrets ...apclient.Secret) table {
	t := table{header: []string{"ID", "NAME", "ENV", "PROVIDER", "ATTACHED", "CREATED"}}
	for _, s := range secrets {
		t.rows = append(t.rows, []string{s.Id, s.Name, s.EnvName, strCell(s.Provider), strings.Join(s.AttachedTo, ","), timeCell(s.CreatedAt)})
	}
	return t
}

func snapshotsTable(snaps ...apclient.Snapshot) table {
	t := table{header: []string{"ID", "CID", "SIZE", "CREATED"}}
	for _, s := range snaps {
		t.rows = append(t.rows, []string{s.Id, s.Cid, fmt.Sprint(s.Size), timeCell(s.CreatedAt)})
	}
	return t
}

// deletedTable is the answer of a delete.
func deletedTable(id string, deleted bool) table {
	return table{header: []string{"ID", "DELETED"}, rows: [][]string{{id, fmt.Sprint(deleted)}}}
}
