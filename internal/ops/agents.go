package ops

import (
	"context"
	"errors"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/rules/admission"
)

// Agent messages (the contract fixes `Agent limit reached` and `Gateway failed to start`).
const (
	MsgAgentLimit       = "Agent limit reached"
	MsgGatewayFailed    = "Gateway failed to start"
	MsgNameRequired     = "Name is required"
	MsgNameTooLong      = "Name must be at most 100 characters"
	MsgNameBanned       = "Name contains invalid characters"
	MsgInvalidVersion   = "Invalid version"
	MsgTemplateNotFound = "Template not found"
	MaxAgentNameRunes   = 100
)

// bannedNameRunes are refused in agent names (also by the CRD's pattern): they break
// prompts, markup and logs.
const bannedNameRunes = "<>{}`\\"

// ValidateAgentName applies the contract's name rules: required, at most 100 characters,
// no banned characters.
func ValidateAgentName(name string) error {
	switch {
	case strings.TrimSpace(name) == "":
		return Fail(Invalid, MsgNameRequired)
	case utf8.RuneCountInString(name) > MaxAgentNameRunes:
		return Fail(Invalid, MsgNameTooLong)
	case !utf8.ValidString(name) || strings.ContainsAny(name, bannedNameRunes) ||
		strings.IndexFunc(name, func(r rune) bool { return unicode.IsControl(r) }) >= 0:
		return Fail(Invalid, MsgNameBanned)
	}
	return nil
}

// newAgentID returns a random agent id; ids are object names and unique across workspaces.
func newAgentID() string { return newID("agt-", 10) }

// NewAgent is an agent to create.
type NewAgent struct {
	// Name is the display name; nil keeps the template's.
	Name *string
	// AgentProfile is what the caller sets of the profile; the template fills the rest.
	agentsv1.AgentProfile
	EngineVersion string
	// TemplateID or Template (a slug) names the AgentTemplate the agent is expanded from.
	TemplateID string
	Template   string
	// CreatedBy is the user who creates it (labelled, made label-safe).
	CreatedBy string
}

// CreateAgent validates n, takes a slot of the workspace's agent limit and creates the agent;
// with wait it then waits (bounded by ProvisionTimeout) for the gateway. It returns the agent
// and whether the gateway answers (false: still starting, or not waited for); a gateway that
// crashed is an Internal `Gateway failed to start` whose Fields["agent"] is the agent.
func (o *Ops) CreateAgent(ctx context.Context, t Scope, n NewAgent, wait bool) (*agentsv1.Agent, bool, error) {
	agent, err := o.agentFrom(ctx, t, &n)
	if err != nil {
		return nil, false, err
	}
	if err := o.d.Admission.ReserveAgent(ctx, agent); err != nil {
		if errors.Is(err, admission.ErrLimitReached) {
			return nil, false, Fail(Forbidden, MsgAgentLimit)
		}
		return nil, false, err
	}
	// Once its slot is taken the create is carried out whether or not the caller waits.
	cctx := context.WithoutCancel(ctx)
	if err := o.d.Client.Create(cctx, agent); err != nil {
		// Only a refused create gives the slot back: after a lost answer the agent may exist
		// (the workspace controller frees the slot if it never appears).
		if admission.Refused(err) {
			_ = o.d.Admission.ReleaseAgent(cctx, agent)
		}
		return nil, false, err
	}
	if !wait {
		return agent, false, nil
	}
	return o.waitForGateway(ctx, agent, MsgGatewayFailed, nil)
}

// agentFrom validates n and builds the Agent (expanded from a template when one is named: the
// Agent controller expands an Agent applied with kubectl the same way).
func (o *Ops) agentFrom(ctx context.Context, t Scope, n *NewAgent) (*agentsv1.Agent, error) {
	a := &agentsv1.Agent{
		ObjectMeta: metav1.ObjectMeta{
			Name: newAgentID(), Namespace: t.Namespace,
			Labels: map[string]string{agentsv1.LabelCreatedBy: labelSafe(n.CreatedBy)},
		},
		Spec: agentsv1.AgentSpec{
			AgentProfile: n.AgentProfile,
			Engine:       agentsv1.EngineSpec{Name: agentsv1.EngineOpenClaw},
		},
	}
	if n.TemplateID != "" || n.Template != "" {
		tmpl, err := o.d.Admission.Template(ctx, n.TemplateID, n.Template)
		if errors.Is(err, admission.ErrTemplateNotFound) {
			return nil, Fail(NotFound, MsgTemplateNotFound)
		}
		if err != nil {
			return nil, err
		}
		o.d.Admission.Expand(ctx, a, tmpl)
	}
	if n.Name != nil {
		a.Spec.DisplayName = *n.Name
	}
	if err := ValidateAgentName(a.Spec.DisplayName); err != nil {
		return nil, err
	}
	if n.EngineVersion != "" {
		a.Spec.Engine.Version = n.EngineVersion
	}
	if a.Spec.Engine.Version != "" {
		if _, err := o.d.Admission.Version(a); err != nil {
			return nil, Fail(Invalid, MsgInvalidVersion)
		}
	}
	return a, nil
}

// Agents lists the workspace's agents (live) that are not being deleted, oldest first.
func (o *Ops) Agents(ctx context.Context, t Scope) ([]agentsv1.Agent, error) {
	var list agentsv1.AgentList
	if err := o.d.APIReader.List(ctx, &list, client.InNamespace(t.Namespace)); err != nil {
		return nil, err
	}
	sort.Slice(list.Items, func(i, j int) bool {
		return list.Items[i].CreationTimestamp.Before(&list.Items[j].CreationTimestamp) ||
			list.Items[i].CreationTimestamp.Equal(&list.Items[j].CreationTimestamp) && list.Items[i].Name < list.Items[j].Name
	})
	out := make([]agentsv1.Agent, 0, len(list.Items))
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp == nil {
			out = append(out, list.Items[i])
		}
	}
	return out, nil
}

// DeleteAgent deletes the workspace's agent (the controllers tear down what it runs); an agent
// already gone meanwhile counts as deleted.
func (o *Ops) DeleteAgent(ctx context.Context, t Scope, id string) (*agentsv1.Agent, error) {
	a, err := o.Agent(ctx, t, id)
	if err != nil {
		return nil, err
	}
	if err := o.d.Client.Delete(ctx, a); err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	return a, nil
}

// labelSafe keeps a value usable as a label value.
func labelSafe(v string) string {
	var b strings.Builder
	for _, r := range v {
		if b.Len() >= 63 {
			break
		}
		if r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_' || r == '.') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return strings.Trim(b.String(), "-_.")
}
