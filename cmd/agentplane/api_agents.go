package main

import (
	"context"

	"github.com/spf13/cobra"

	apclient "github.com/agentplane/agentplane/pkg/client"
)

func newAgentsCommand() *cobra.Command {
	f := &apiFlags{}
	cmd := &cobra.Command{
		Use:   "agents",
		Short: "List, create and manage agents through the REST API",
		Example: `  agentplane agents list
  agentplane agents create --name demo
  agentplane agents get agt-1234 -o yaml`,
	}
	f.register(cmd)
	cmd.AddCommand(
		f.command("list", "List the workspace's agents", cobra.NoArgs, func(ctx context.Context, c *apclient.Agentplane, _ []string) (any, table, error) {
			b, err := apclient.Decoded[agentsBody](c.ListAgentsWithResponse(ctx, &apclient.ListAgentsParams{}))
			return b.Agents, agentsTable(b.Agents...), err
		}),
		agentCommand(f, "get", "Show an agent", func(ctx context.Context, c *apclient.Agentplane, id string) (agentBody, error) {
			return apclient.Decoded[agentBody](c.GetAgentWithResponse(ctx, id, &apclient.GetAgentParams{}))
		}),
		newAgentsCreateCommand(f),
		f.command("delete AGENT", "Delete an agent", cobra.ExactArgs(1), func(ctx context.Context, c *apclient.Agentplane, args []string) (any, table, error) {
			b, err := apclient.Decoded[deletedBody](c.DeleteAgentWithResponse(ctx, args[0], &apclient.DeleteAgentParams{}))
			return b, deletedTable(b.Id, b.Deleted), err
		}),
		agentCommand(f, "restart", "Restart an agent's gateway", func(ctx context.Context, c *apclient.Agentplane, id string) (agentBody, error) {
			return apclient.Decoded[agentBody](c.RestartAgentWithResponse(ctx, id, &apclient.RestartAgentParams{}, apclient.RestartAgentJSONRequestBody{}))
		}),
		agentCommand(f, "suspend", "Suspend an agent (its gateway stops, its home is kept)", func(ctx context.Context, c *apclient.Agentplane, id string) (agentBody, error) {
			return apclient.Decoded[agentBody](c.SuspendAgentWithResponse(ctx, id, &apclient.SuspendAgentParams{}))
		}),
		agentCommand(f, "resume", "Resume a suspended agent", func(ctx context.Context, c *apclient.Agentplane, id string) (agentBody, error) {
			return apclient.Decoded[agentBody](c.ResumeAgentWithResponse(ctx, id, &apclient.ResumeAgentParams{}))
		}),
	)
	return cmd
}

func newAgentsCreateCommand(f *apiFlags) *cobra.Command {
	var name, template string
	var noWait bool
	cmd := f.command("create", "Create an agent (waits until its gateway answers)", cobra.NoArgs, func(ctx context.Context, c *apclient.Agentplane, _ []string) (any, table, error) {
		req := apclient.CreateAgentJSONRequestBody{}
		if name != "" {
			req.Name = &name
		}
		if template != "" {
			req.Template = &template
		}
		params := &apclient.CreateAgentParams{}
		if noWait {
			w := apclient.CreateAgentParamsWaitFalse
			params.Wait = &w
		}
		b, err := apclient.Decoded[agentBody](c.CreateAgentWithResponse(ctx, params, req))
		return b.Agent, agentsTable(b.Agent), err
	})
	cmd.Example = `  agentplane agents create --name demo
  agentplane agents create --name helper --template research-assistant --no-wait`
	cmd.PreRunE = func(*cobra.Command, []string) error {
		if name == "" && template == "" {
			return &usageError{"agents create needs --name (or a --template that names the agent)"}
		}
		return nil
	}
	cmd.Flags().StringVar(&name, "name", "", "the agent's name (1 to 100 characters)")
	cmd.Flags().StringVar(&template, "template", "", "a published template's slug")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "answer at once instead of waiting for the gateway")
	return cmd
}

// agentCommand is a command that takes an agent id, calls the facade with it and prints the
// agent it answers.
func agentCommand(f *apiFlags, use, short string, do func(context.Context, *apclient.Agentplane, string) (agentBody, error)) *cobra.Command {
	return f.command(use+" AGENT", short, cobra.ExactArgs(1), func(ctx context.Context, c *apclient.Agentplane, args []string) (any, table, error) {
		b, err := do(ctx, c, args[0])
		return b.Agent, agentsTable(b.Agent), err
	})
}
