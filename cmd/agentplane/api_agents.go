package main

import (
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
		&cobra.Command{
			Use: "list", Short: "List the workspace's agents", Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				c, err := f.connect()
				if err != nil {
					return err
				}
				res, err := apclient.Checked(c.ListAgentsWithResponse(cmd.Context(), &apclient.ListAgentsParams{}))
				if err != nil {
					return err
				}
				body, err := either(res.JSON200, nil)
				if err != nil {
					return err
				}
				return f.print(cmd.OutOrStdout(), body.Agents, agentsTable(body.Agents...))
			},
		},
		&cobra.Command{
			Use: "get AGENT", Short: "Show an agent", Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := f.connect()
				if err != nil {
					return err
				}
				res, err := apclient.Checked(c.GetAgentWithResponse(cmd.Context(), args[0], &apclient.GetAgentParams{}))
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
		newAgentsCreateCommand(f),
		&cobra.Command{
			Use: "delete AGENT", Short: "Delete an agent", Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				c, err := f.connect()
				if err != nil {
					return err
				}
				res, err := apclient.Checked(c.DeleteAgentWithResponse(cmd.Context(), args[0], &apclient.DeleteAgentParams{}))
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
		agentActionCommand(f, "restart", "Restart an agent's gateway", func(cmd *cobra.Command, c *apclient.Agentplane, id string) (*apclient.Agent, error) {
			res, err := apclient.Checked(c.RestartAgentWithResponse(cmd.Context(), id, &apclient.RestartAgentParams{}, apclient.RestartAgentJSONRequestBody{}))
			if err != nil {
				return nil, err
			}
			body, err := either(res.JSON200, res.JSON202)
			if err != nil {
				return nil, err
			}
			return &body.Agent, nil
		}),
		agentActionCommand(f, "suspend", "Suspend an agent (its gateway stops, its home is kept)", func(cmd *cobra.Command, c *apclient.Agentplane, id string) (*apclient.Agent, error) {
			res, err := apclient.Checked(c.SuspendAgentWithResponse(cmd.Context(), id, &apclient.SuspendAgentParams{}))
			if err != nil {
				return nil, err
			}
			body, err := either(res.JSON200, res.JSON202)
			if err != nil {
				return nil, err
			}
			return &body.Agent, nil
		}),
		agentActionCommand(f, "resume", "Resume a suspended agent", func(cmd *cobra.Command, c *apclient.Agentplane, id string) (*apclient.Agent, error) {
			res, err := apclient.Checked(c.ResumeAgentWithResponse(cmd.Context(), id, &apclient.ResumeAgentParams{}))
			if err != nil {
				return nil, err
			}
			body, err := either(res.JSON200, res.JSON202)
			if err != nil {
				return nil, err
			}
			return &body.Agent, nil
		}),
	)
	return cmd
}

func newAgentsCreateCommand(f *apiFlags) *cobra.Command {
	var name, template string
	var noWait bool
	cmd := &cobra.Command{
		Use: "create", Short: "Create an agent (waits until its gateway answers)", Args: cobra.NoArgs,
		Example: `  agentplane agents create --name demo
  agentplane agents create --name helper --template research-assistant --no-wait`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if name == "" && template == "" {
				return &usageError{"agents create needs --name (or a --template that names the agent)"}
			}
			c, err := f.connect()
			if err != nil {
				return err
			}
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
			res, err := apclient.Checked(c.CreateAgentWithResponse(cmd.Context(), params, req))
			if err != nil {
				return err
			}
			body, err := either(res.JSON201, res.JSON202)
			if err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), body.Agent, agentsTable(body.Agent))
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "the agent's name (1 to 100 characters)")
	cmd.Flags().StringVar(&template, "template", "", "a published template's slug")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "answer at once instead of waiting for the gateway")
	return cmd
}

// agentActionCommand is a command that takes an agent id and prints the agent the facade answers.
func agentActionCommand(f *apiFlags, use, short string, do func(*cobra.Command, *apclient.Agentplane, string) (*apclient.Agent, error)) *cobra.Command {
	return &cobra.Command{
		Use: use + " AGENT", Short: short, Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.connect()
			if err != nil {
				return err
			}
			a, err := do(cmd, c, args[0])
			if err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), a, agentsTable(*a))
		},
	}
}
