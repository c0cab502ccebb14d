package channelrelay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// Defaults of Watch.
const (
	// DefaultPollTimeout is the long poll's timeout, Telegram's own upper bound.
	DefaultPollTimeout = 50 * time.Second
	// DefaultRetry is the wait after a failed poll (it doubles up to a minute) and after a
	// Conflict (another client, the woken gateway, polls the bot).
	DefaultRetry = 5 * time.Second
)

// Watch wakes sleeping agents for their Telegram messages. For each agent that sleeps
// (Suspended) with an enabled Telegram channel, it long-polls the bot's updates without an
// offset, which confirms nothing to Telegram; once one waits, it wakes the agent
// (spec.wakeRequestedAt, as a request that needs the gateway does) and stops. The woken gateway
// fetches the update itself from the offset it stored. It runs on the leader only: two clients
// polling one bot make Telegram end the older poll with a Conflict.
type Watch struct {
	Client    client.Client // reads Agents and Channels from the cache, patches spec.wakeRequestedAt
	APIReader client.Reader // reads channels' token Secrets and the Agent before a wake
	// TelegramAPI is the Bot API origin (default DefaultTelegramAPI).
	TelegramAPI string
	Transport   http.RoundTripper // default http.DefaultTransport
	Recorder    events.EventRecorder
	Clock       clock.Clock // default real
	Log         logr.Logger
	// PollTimeout and Retry: DefaultPollTimeout and DefaultRetry when zero.
	PollTimeout, Retry time.Duration

	polls loops[string] // by bot token
	http  *http.Client
}

// SetupWithManager runs the watch as a controller of Agents (their Channels wake it too), and
// ends its polls when the manager stops.
func (w *Watch) SetupWithManager(mgr ctrl.Manager) error {
	w.init()
	if err := mgr.Add(w); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).Named("channelrelay").
		For(&agentsv1.Agent{}, builder.WithPredicates(sleepChanged())).
		Watches(&agentsv1.Channel{}, agentsOfChannels(agentsv1.ChannelTelegram)).
		Complete(w)
}

// init sets the defaults.
func (w *Watch) init() {
	if w.TelegramAPI == "" {
		w.TelegramAPI = DefaultTelegramAPI
	}
	w.TelegramAPI = strings.TrimSuffix(w.TelegramAPI, "/")
	if w.Transport == nil {
		w.Transport = http.DefaultTransport
	}
	if w.Clock == nil {
		w.Clock = clock.RealClock{}
	}
	if w.PollTimeout <= 0 {
		w.PollTimeout = DefaultPollTimeout
	}
	if w.Retry <= 0 {
		w.Retry = DefaultRetry
	}
	w.http = &http.Client{Transport: w.Transport, Timeout: w.PollTimeout + 30*time.Second}
}

// Start implements manager.Runnable: the polls live until ctx ends, then Start stops them and
// waits for them.
func (w *Watch) Start(ctx context.Context) error {
	w.polls.run(ctx)
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: polls run on the leader.
func (w *Watch) NeedLeaderElection() bool { return true }

// Reconcile starts or stops the poll of one agent's bot.
func (w *Watch) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	agent := &agentsv1.Agent{}
	if err := w.Client.Get(ctx, req.NamespacedName, agent); err != nil {
		w.stop(req.NamespacedName)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !asleep(agent) {
		w.stop(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	tok, err := TelegramBotToken(ctx, w.Client, w.APIReader, agent)
	if err != nil {
		return ctrl.Result{}, err
	}
	if tok == "" {
		w.stop(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	key := req.NamespacedName
	w.polls.start(key, tok, func(ctx context.Context) { w.run(ctx, key, tok) })
	return ctrl.Result{}, nil
}

// Polled stops the poll of an agent whose gateway now asks for its updates (Options.Polled).
func (w *Watch) Polled(agent types.NamespacedName) { w.stop(agent) }

// Polling reports whether the watch polls the bot of agent now.
func (w *Watch) Polling(agent types.NamespacedName) bool { return w.polls.has(agent) }

func (w *Watch) stop(agent types.NamespacedName) { w.polls.stop(agent) }

// asleep: the agent sleeps (not stopped, not being deleted) and no wake is pending.
func asleep(a *agentsv1.Agent) bool {
	c := meta.FindStatusCondition(a.Status.Conditions, agentsv1.ConditionSuspended)
	if c == nil || c.Status != metav1.ConditionTrue || a.Spec.Stopped || a.DeletionTimestamp != nil {
		return false
	}
	wake := a.Spec.WakeRequestedAt
	return wake == nil || !wake.After(c.LastTransitionTime.Time)
}

// stillAsleep reads the agent from the cache again before each poll: a poll must not race the
// gateway of an agent woken meanwhile (Telegram would end the gateway's poll, whose engine
// then waits 30 s or more before it polls again).
func (w *Watch) stillAsleep(ctx context.Context, key types.NamespacedName) bool {
	a := &agentsv1.Agent{}
	return w.Client.Get(ctx, key, a) == nil && asleep(a)
}

// errConflict: another client polls the bot.
var errConflict = errors.New("another client polls the bot's updates")

func (w *Watch) run(ctx context.Context, agent types.NamespacedName, token string) {
	log := w.Log.WithValues("agent", agent.String())
	wait := w.Retry
	for ctx.Err() == nil && w.stillAsleep(ctx, agent) {
		n, err := w.pending(ctx, token)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, errConflict):
			log.V(1).Info("the bot is polled by another client; polling again later")
			wait = w.Retry
		case err != nil:
			log.Info("cannot poll the agent's Telegram bot; polling again later", "error", err.Error(), "retryIn", wait.String())
		case n == 0:
			wait = w.Retry
			continue
		default:
			err = w.wake(ctx, agent)
			if err == nil || ctx.Err() != nil {
				// Woken, or this poll was stopped meanwhile (the agent woke, changed or went:
				// Reconcile starts a new poll for an agent still asleep), which cut the wake.
				return
			}
			log.Error(err, "cannot wake the agent for its Telegram message; trying again later")
		}
		select {
		case <-ctx.Done():
			return
		case <-w.Clock.After(wait):
		}
		if err != nil && !errors.Is(err, errConflict) {
			wait = min(2*wait, time.Minute)
		}
	}
}

// pending long-polls the bot's updates without an offset and returns how many wait. Errors
// never name the request's URL, which holds the token.
func (w *Watch) pending(ctx context.Context, token string) (int, error) {
	body, _ := json.Marshal(map[string]any{"timeout": int(w.PollTimeout / time.Second), "limit": 1})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.TelegramAPI+"/bot"+token+"/getUpdates", bytes.NewReader(body))
	if err != nil {
		return 0, errors.New("cannot build the poll")
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.http.Do(req)
	if err != nil {
		var uerr interface{ Unwrap() error }
		if errors.As(err, &uerr) && uerr.Unwrap() != nil {
			err = uerr.Unwrap()
		}
		return 0, fmt.Errorf("getUpdates: %v", err)
	}
	defer resp.Body.Close()
	var out struct {
		OK          bool              `json:"ok"`
		ErrorCode   int               `json:"error_code"`
		Description string            `json:"description"`
		Result      []json.RawMessage `json:"result"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out); err != nil {
		return 0, fmt.Errorf("getUpdates: HTTP %d, an unreadable answer", resp.StatusCode)
	}
	switch {
	case resp.StatusCode == http.StatusConflict || out.ErrorCode == http.StatusConflict:
		return 0, errConflict
	case !out.OK:
		return 0, fmt.Errorf("getUpdates: HTTP %d: %s", resp.StatusCode, out.Description)
	}
	return len(out.Result), nil
}

// wake asks for the agent's gateway for its Telegram update.
func (w *Watch) wake(ctx context.Context, key types.NamespacedName) error {
	return wakeAgent(ctx, waker{Client: w.Client, APIReader: w.APIReader, Recorder: w.Recorder, Clock: w.Clock, Log: w.Log}, key,
		"its Telegram bot has an update waiting")
}

// waker is what wakeAgent needs.
type waker struct {
	Client    client.Client
	APIReader client.Reader
	Recorder  events.EventRecorder
	Clock     clock.Clock
	Log       logr.Logger
}

// wakeAgent asks for the agent's gateway (spec.wakeRequestedAt, later than any earlier
// request, which AnnotationMessageWake names as a message's), unless it no longer sleeps, with
// the event WokenByMessage saying why.
func wakeAgent(ctx context.Context, k waker, key types.NamespacedName, why string) error {
	var woken *agentsv1.Agent
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		a := &agentsv1.Agent{}
		if err := k.APIReader.Get(ctx, key, a); err != nil {
			return err
		}
		if !asleep(a) {
			return nil
		}
		before := a.DeepCopy()
		t := metav1.NewTime(k.Clock.Now().UTC().Truncate(time.Second))
		if prev := a.Spec.WakeRequestedAt; prev != nil && !t.After(prev.Time) {
			t = metav1.NewTime(prev.Add(time.Second))
		}
		a.Spec.WakeRequestedAt = &t
		metav1.SetMetaDataAnnotation(&a.ObjectMeta, agentsv1.AnnotationMessageWake, t.UTC().Format(time.RFC3339))
		if err := k.Client.Patch(ctx, a, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return err
		}
		woken = a
		return nil
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil && woken != nil {
		k.Log.Info("woke a sleeping agent: "+why, "agent", key.String())
		if k.Recorder != nil {
			k.Recorder.Eventf(woken, nil, corev1.EventTypeNormal, "WokenByMessage", "Wake", "woken: %s", why)
		}
	}
	return err
}
