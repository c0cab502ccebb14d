package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/controllers"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
	"github.com/agentplane/agentplane/internal/rules/channels"
)

// configInputs is what an agent's engine config file is rendered from.
type configInputs struct {
	// user is the user's config (spec.configRef's value); nil: the agent has none.
	user []byte
	// channels are the Channels ready to be written (tokens in the environment, plugin
	// installed), by type; managed are the channel types the platform owns in the file: those
	// of the agent's Channels and those rendered before (so a Channel that went is removed).
	channels []engine.Channel
	rendered []agentsv1.RenderedChannel
	managed  []string
	// removed are the Channels being deleted that the render takes out of the file.
	removed []agentsv1.RenderedChannel
	// models are the attached providers pointed at the model proxy (their credentials
	// derive from the gateway token, so a rotation changes the hash).
	models []engine.ModelProvider
}

// modelNames are the providers of models, for status.config.modelProviders.
func (in *configInputs) modelNames() []string {
	var names []string
	for _, m := range in.models {
		names = append(names, m.Name)
	}
	return names
}

// pending is what a failed render meant to write and to remove (status.config.pendingChannels).
func (in *configInputs) pending() []agentsv1.RenderedChannel {
	return append(slices.Clone(in.rendered), in.removed...)
}

// hash identifies the inputs (status.config.inputsHash).
func (in *configInputs) hash() string {
	h := sha256.New()
	h.Write(in.user)
	b, _ := json.Marshal(struct {
		C    []engine.Channel
		R, D []agentsv1.RenderedChannel
		M    []string
		P    []engine.ModelProvider `json:",omitempty"`
	}{in.channels, in.rendered, in.removed, in.managed, in.models})
	h.Write(b)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// syncConfig renders the agent's engine config file from its inputs and writes it when it
// differs from the file in the agent's home; it is the only writer of that file besides the
// runtime's seed and the engine itself. env is the agent's environment (an enabled channel
// whose tokens it lacks is not written yet). Inputs that did not change since the last
// successful render cost no file access; otherwise the runtime tells whether the home can be
// reached (a stopped pod cannot). Failures are recorded on the ConfigApplied condition and
// retried later (a requeue, not an error: the gateway runs on).
func (r *Reconciler) syncConfig(ctx context.Context, agent *agentsv1.Agent, env map[string]string, gatewayToken string) (retryAfter time.Duration, err error) {
	if r.Engine == nil {
		return 0, nil
	}
	in, reason, msg, err := r.configInputs(ctx, agent, env, gatewayToken)
	if err != nil {
		return 0, err
	}
	prev := agent.Status.Config
	if prev == nil {
		prev = &agentsv1.AgentConfigStatus{}
	}
	if reason != "" {
		agent.Status.Config = &agentsv1.AgentConfigStatus{SourceHash: prev.SourceHash, InputsHash: prev.InputsHash, Channels: prev.Channels, PendingChannels: in.pending(), ModelProviders: prev.ModelProviders}
		setConfigApplied(agent, metav1.ConditionFalse, reason, msg)
		return limitRetry, nil
	}
	inputsHash := in.hash()
	// The status describes the file unless a render of this process says otherwise.
	last, ok := r.rendered.load(agent.UID)
	trusted := !ok || last == inputsHash
	if trusted && prev.InputsHash == inputsHash && meta.IsStatusConditionTrue(agent.Status.Conditions, agentsv1.AgentConfigApplied) {
		return 0, nil
	}
	if trusted && in.user == nil && len(in.managed) == 0 && len(in.models) == 0 && len(prev.ModelProviders) == 0 {
		// Nothing to render: the file in the home (the runtime's seed) is the config as it
		// is. No file access, so a new agent costs no exec into its pod.
		agent.Status.Config = &agentsv1.AgentConfigStatus{InputsHash: inputsHash}
		setConfigApplied(agent, metav1.ConditionTrue, agentsv1.ReasonConfigRendered, renderedMessage(in))
		return 0, nil
	}
	path := r.Engine.Layout().ConfigPath
	live, err := r.Runtime.ReadFile(ctx, agent, path)
	var out []byte
	if err == nil {
		if out, err = r.Engine.RenderConfig(engine.Render{Base: in.user, Live: live, Managed: in.managed, Channels: in.channels, ModelProviders: in.models}); err == nil && !sameJSON(out, live) {
			err = r.Runtime.WriteFile(ctx, agent, path, out)
		}
	}
	agent.Status.Config = &agentsv1.AgentConfigStatus{
		SourceHash: agentsv1.ConfigSourceHash(in.user), InputsHash: prev.InputsHash, Channels: prev.Channels, PendingChannels: in.pending(),
		ModelProviders: prev.ModelProviders,
	}
	switch {
	case errors.Is(err, runtime.ErrNotRunning), errors.Is(err, runtime.ErrNotFound):
		setConfigApplied(agent, metav1.ConditionFalse, agentsv1.ReasonWaitingForAgent, "the agent's home cannot be reached yet (the config is rendered once it can): "+err.Error())
		return startingPoll, nil
	case errors.Is(err, engine.ErrInvalidConfig):
		setConfigApplied(agent, metav1.ConditionFalse, agentsv1.ReasonConfigInvalid, controllers.Truncate(r.invalidConfigMessage(in.user, err)))
		return configRetry, nil
	case err != nil:
		setConfigApplied(agent, metav1.ConditionFalse, agentsv1.ReasonConfigWriteFailed, controllers.Truncate("rendering the engine config failed: "+err.Error()))
		return configRetry, nil
	}
	r.rendered.store(agent.UID, inputsHash)
	agent.Status.Config.InputsHash, agent.Status.Config.Channels, agent.Status.Config.PendingChannels = inputsHash, in.rendered, nil
	agent.Status.Config.ModelProviders = in.modelNames()
	setConfigApplied(agent, metav1.ConditionTrue, agentsv1.ReasonConfigRendered, renderedMessage(in))
	return 0, nil
}

// sameJSON reports whether a and b are the same JSON value (a document that is not plain
// JSON, e.g. JSON5, never is).
func sameJSON(a, b []byte) bool {
	va, erra := decodeJSONValue(a)
	vb, errb := decodeJSONValue(b)
	return erra == nil && errb == nil && reflect.DeepEqual(va, vb)
}

func decodeJSONValue(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

// invalidConfigMessage names the document that cannot be read: the user's config or the
// file in the agent's home (edited by hand, or by the engine).
func (r *Reconciler) invalidConfigMessage(user []byte, err error) string {
	if user != nil {
		if _, uerr := r.Engine.UserConfig(user, nil); uerr != nil {
			return "the config of spec.configRef: " + uerr.Error()
		}
	}
	return "the engine config file in the agent's home: " + err.Error()
}

// configInputs gathers the render's inputs. A reason is returned (with a message, and the
// channels gathered) when they cannot be had: the config Secret or key is missing.
func (r *Reconciler) configInputs(ctx context.Context, agent *agentsv1.Agent, env map[string]string, gatewayToken string) (in configInputs, reason, msg string, err error) {
	if in.models, err = r.proxiedProviders(ctx, agent, gatewayToken); err != nil {
		return in, "", "", err
	}
	chans, deleting, err := channels.Of(ctx, r.Client, agent)
	if err != nil {
		return in, "", "", fmt.Errorf("list channels: %w", err)
	}
	if agent.Status.Config != nil {
		for _, rc := range agent.Status.Config.Channels {
			in.managed = append(in.managed, string(rc.Type))
		}
	}
	for _, t := range agentsv1.ChannelTypes { // a fixed order: the render's and the status's
		ch, ok := chans[t]
		if !ok {
			continue
		}
		in.managed = append(in.managed, string(t))
		botEnv, appEnv := controllers.ChannelTokenEnv(t)
		c := engine.Channel{
			Type: string(t), Enabled: ch.IsEnabled(), BotTokenEnv: botEnv, AppTokenEnv: appEnv,
			DMPolicy: string(ch.Spec.DMPolicy), AllowFrom: ch.Spec.AllowFrom,
		}
		if relayed(r.ChannelRelay, t) {
			if !pluginReady(ch) {
				continue
			}
			tok, err := r.relayToken(ctx, agent, ch, gatewayToken)
			if err != nil {
				return in, "", "", err
			}
			if tok != "" {
				relayChannel(r.ChannelRelay, agent, &c, tok)
			} else if c.Enabled {
				continue // no token yet: not written (the Channel controller says why)
			}
		} else if !channelRenderable(ch, env) {
			continue
		}
		in.channels = append(in.channels, c)
		in.rendered = append(in.rendered, agentsv1.RenderedChannel{Type: t, Name: ch.Name, Generation: ch.Generation})
	}
	slices.Sort(in.managed)
	in.managed = slices.Compact(in.managed)
	for _, ch := range deleting {
		if _, replaced := chans[ch.Spec.Type]; !replaced && slices.Contains(in.managed, string(ch.Spec.Type)) {
			in.removed = append(in.removed, agentsv1.RenderedChannel{Type: ch.Spec.Type, Name: ch.Name, Generation: ch.Generation, Removal: true})
		}
	}
	if ref := agent.Spec.ConfigRef; ref != nil {
		sec := &corev1.Secret{}
		key := client.ObjectKey{Namespace: agent.Namespace, Name: ref.Name}
		err := r.Get(ctx, key, sec)
		if apierrors.IsNotFound(err) {
			err = r.apiReader().Get(ctx, key, sec)
		}
		switch {
		case apierrors.IsNotFound(err):
			return in, agentsv1.ReasonConfigSourceNotFound, fmt.Sprintf("secret %s does not exist", ref.Name), nil
		case err != nil:
			return in, "", "", fmt.Errorf("read the config secret: %w", err)
		}
		v, ok := sec.Data[ref.Key]
		if !ok {
			return in, agentsv1.ReasonConfigSourceNotFound, fmt.Sprintf("secret %s has no key %s", ref.Name, ref.Key), nil
		}
		in.user = v
	}
	return in, "", "", nil
}

// channelRenderable: the channel's external plugin (if any) is installed and, for an enabled
// channel, the agent's environment holds its tokens. Until then the config does not name the
// channel (an unknown plugin, or a token reference the gateway cannot resolve, would break
// it). A disabled channel is written disabled: the environment drops its tokens.
func channelRenderable(ch *agentsv1.Channel, env map[string]string) bool {
	if !pluginReady(ch) {
		return false
	}
	if !ch.IsEnabled() {
		return true
	}
	bot, app := controllers.ChannelTokenEnv(ch.Spec.Type)
	for _, name := range []string{bot, app} {
		if name != "" && env[name] == "" {
			return false
		}
	}
	return true
}

// pluginReady: the channel's type needs no external plugin, or it is installed.
func pluginReady(ch *agentsv1.Channel) bool {
	return controllers.ChannelPlugin(ch.Spec.Type) == "" || meta.IsStatusConditionTrue(ch.Status.Conditions, agentsv1.ChannelPluginInstalled)
}

func renderedMessage(in configInputs) string {
	var names []string
	for _, c := range in.rendered {
		names = append(names, string(c.Type))
	}
	src := "the file in the agent's home"
	if in.user != nil {
		src = "spec.configRef"
	}
	if len(names) == 0 {
		return "the engine config is rendered from " + src
	}
	return "the engine config is rendered from " + src + " with channels " + strings.Join(names, ", ")
}

func setConfigApplied(agent *agentsv1.Agent, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&agent.Status.Conditions, metav1.Condition{
		Type: agentsv1.AgentConfigApplied, Status: status, Reason: reason, Message: msg, ObservedGeneration: agent.Generation,
	})
}

func (r *Reconciler) apiReader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}
