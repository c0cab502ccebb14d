package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/agentplane/agentplane/internal/adapters/modelproxy"
	apclient "github.com/agentplane/agentplane/pkg/client"
)

func newChatCommand() *cobra.Command {
	f := &apiFlags{}
	var conversation string
	var list bool
	cmd := &cobra.Command{
		Use:   "chat AGENT [MESSAGE]",
		Short: "Talk to an agent: its reply streams to the terminal (a sleeping agent is woken)",
		Long: `Sends MESSAGE to the agent and prints its reply as it streams, its tool calls and the turn's
model usage. Without MESSAGE, reads one message per line from standard input, in one
conversation, until end of input. --conversation continues a conversation; --list lists them.`,
		Example: `  agentplane chat agt-1234 "What is on my calendar?"
  agentplane chat agt-1234 --list
  agentplane chat agt-1234 --conversation cnv-abcdefghijklmnop`,
		Args: cobra.RangeArgs(1, 2),
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
			if list {
				return listConversations(ctx, c, args[0], out)
			}
			s := &chatSession{c: c, agent: args[0], conversation: conversation, out: out, errOut: cmd.ErrOrStderr()}
			if len(args) == 2 {
				return s.turn(ctx, args[1])
			}
			return s.repl(ctx, cmd.InOrStdin())
		},
	}
	f.register(cmd)
	cmd.Flags().StringVarP(&conversation, "conversation", "c", "", "continue this conversation (default: a new one)")
	cmd.Flags().BoolVar(&list, "list", false, "list the agent's conversations, the latest first")
	return cmd
}

func listConversations(ctx context.Context, c *apclient.Agentplane, agent string, out io.Writer) error {
	b, err := apclient.Decoded[struct {
		Conversations []apclient.ConversationSummary `json:"conversations"`
		Asleep        bool                           `json:"asleep"`
	}](c.ListConversationsWithResponse(ctx, agent, &apclient.ListConversationsParams{}))
	if err != nil {
		return err
	}
	if b.Asleep {
		fmt.Fprintln(out, "(the agent sleeps: its conversations are read once it wakes)")
	}
	for _, cv := range b.Conversations {
		fmt.Fprintf(out, "%s\t%s\t%d turns\t%s\n", cv.Id, cv.UpdatedAt.Format("2006-01-02 15:04"), cv.Turns, cv.Title)
	}
	return nil
}

// chatSession is one conversation from the terminal.
type chatSession struct {
	c                   *apclient.Agentplane
	agent, conversation string
	out, errOut         io.Writer
}

// repl sends each line of in as a turn of one conversation.
func (s *chatSession) repl(ctx context.Context, in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		if err := s.turn(ctx, sc.Text()); err != nil {
			return err
		}
	}
	return sc.Err()
}

// turn sends one message and prints the turn as it streams; a turn refused or failed is an
// error (exit 1) after what it printed.
func (s *chatSession) turn(ctx context.Context, message string) error {
	var failed error
	err := s.c.Chat(ctx, s.agent, s.conversation, message, func(ev apclient.ChatEvent) {
		switch ev.Type {
		case "waking":
			fmt.Fprintln(s.errOut, "(waking the agent...)")
		case "conversation":
			s.conversation = ev.Conversation.Id
		case "text":
			fmt.Fprint(s.out, ev.Text)
		case "tool":
			fmt.Fprintf(s.out, "\n[tool %s %s]\n", ev.Tool.Name, deref(ev.Tool.Arguments))
		case "tool_result":
			fmt.Fprintf(s.out, "[result %s]\n", deref(ev.Tool.Result))
		case "usage":
			fmt.Fprintln(s.out)
			if ev.Usage.Metered {
				fmt.Fprintf(s.errOut, "(%d model requests, %d input and %d output tokens%s; conversation %s)\n",
					ev.Usage.Requests, ev.Usage.InputTokens, ev.Usage.OutputTokens, turnCost(ev.Usage), s.conversation)
			}
		case "refused":
			failed = errors.New("refused: " + ev.Message)
		case "error":
			failed = errors.New(ev.Message)
		}
	})
	if errors.Is(err, context.Canceled) {
		return nil // interrupted
	}
	if err != nil {
		return err
	}
	return failed
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// turnCost is a turn's cost by the platform's price table (", 0.00017 USD", with its unpriced
// requests), "" when the platform has none.
func turnCost(u *apclient.TurnUsage) string {
	if u.Currency == nil || *u.Currency == "" {
		return ""
	}
	var micros, unpriced int64
	if u.CostMicros != nil {
		micros = *u.CostMicros
	}
	if u.UnpricedRequests != nil {
		unpriced = *u.UnpricedRequests
	}
	s := ", " + modelproxy.FormatMoney(micros) + " " + *u.Currency
	if unpriced > 0 {
		s += fmt.Sprintf(" and %d unpriced", unpriced)
	}
	return s
}
