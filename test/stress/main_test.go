package stress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/agentplane/agentplane/internal/adapters/clawhub/clawhubtest"
	"github.com/agentplane/agentplane/internal/adapters/dnsverify/dnstest"
	"github.com/agentplane/agentplane/internal/adapters/engine"
	"github.com/agentplane/agentplane/internal/adapters/storage"
	"github.com/agentplane/agentplane/internal/adapters/storage/local"
	"github.com/agentplane/agentplane/internal/devtools/fakeclaw"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
	"github.com/agentplane/agentplane/internal/devtools/testenv/kubeenv"
	"github.com/agentplane/agentplane/internal/platform"
	"github.com/agentplane/agentplane/internal/rules/secrets"
)

// What every test shares: one control plane, one full platform (manager and facade) and one
// facade-only replica over it.
var (
	env        *kubeenv.Env
	k8s        client.Client
	plat       *platform.Platform
	mainURL    string
	replicaURL string
	logs       = &testenv.SyncBuffer{}
	dnsServer  *dnstest.Server
	hub        *clawhubtest.Registry
	files      *switchStore
	fakeDir    string
	stateDir   string
	// suiteTmp is removed when the tests end.
	suiteTmp string
)

// Engine versions of the shared platform.
const (
	versionGood  = engine.PinnedVersion
	versionCrash = "2026.1.9-crashloop"
	// provisionTimeout bounds how long agent create and restart wait for the gateway.
	provisionTimeout = 30 * time.Second
	// Domain checks of the shared platform: look-ups every 300 ms, backing off to 1 s.
	domainCheckInterval    = 300 * time.Millisecond
	domainMaxCheckInterval = time.Second
)

// facades are the two replicas requests are spread over.
func facades() [2]string { return [2]string{mainURL, replicaURL} }

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChildManager())
	}
	os.Exit(runSuite(m))
}

// runSuite starts what the tests share, runs them and stops everything again.
func runSuite(m *testing.M) int {
	logger := zap.New(zap.WriteTo(logs), zap.UseDevMode(true))
	logf.SetLogger(logger)
	tmp, err := os.MkdirTemp("", "agentplane-stress-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "stress:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithCancel(context.Background())
	var stops []func() error
	stop := func() error {
		cancel()
		var errs []error
		for i := len(stops) - 1; i >= 0; i-- {
			errs = append(errs, stops[i]())
		}
		return errors.Join(errs...)
	}
	code := 1
	if err := startSuite(ctx, tmp, &stops); err != nil {
		fmt.Fprintln(os.Stderr, "stress: start:", err)
	} else {
		code = m.Run()
	}
	if err := stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stress: stop:", err)
		code = 1
	}
	if code != 0 {
		path := filepath.Join(os.TempDir(), fmt.Sprintf("agentplane-stress-%d.log", os.Getpid()))
		if os.WriteFile(path, []byte(logs.String()), 0o600) == nil {
			fmt.Fprintln(os.Stderr, "stress: the platform's log is in", path)
		}
	}
	return code
}

// startSuite starts the control plane, the DNS server, the ClawHub registry, the full
// platform and the facade replica; stops receives what undoes each.
func startSuite(ctx context.Context, tmp string, stops *[]func() error) error {
	suiteTmp = tmp
	var err error
	if env, err = kubeenv.Start(); err != nil {
		return err
	}
	*stops = append(*stops, func() error { return env.Stop() })
	k8s = env.Client
	if fakeDir, err = fakeclaw.EngineDir(); err != nil {
		return err
	}
	// dnstest takes a random UDP port and the same TCP port, which another process may hold:
	// a few tries.
	for try := 0; ; try++ {
		if dnsServer, err = dnstest.Start(); err == nil || try == 4 {
			break
		}
	}
	if err != nil {
		return err
	}
	*stops = append(*stops, func() error { dnsServer.Stop(); return nil })
	hub = clawhubtest.NewRegistry()
	*stops = append(*stops, func() error { hub.Close(); return nil })
	store, err := local.New(filepath.Join(tmp, "files"))
	if err != nil {
		return err
	}
	files = &switchStore{Store: store}
	// The crashing engine exits 1 before it listens, at every start: it is never healthy,
	// whatever the health poll's timing. (It used to die 1 ms after it listened, and a busy
	// machine let the poll see it up: the create then answered 201.)
	crash, err := wrapEngine(filepath.Join(tmp, "engine-crash"), fakeDir, "FAKECLAW_FAIL_START=1")
	if err != nil {
		return err
	}
	stateDir = filepath.Join(tmp, "state")
	var done, replicaDone <-chan error
	plat, mainURL, done, err = startPlatform(ctx, platform.Options{
		Runtime: platform.RuntimeOptions{
			Name: platform.RuntimeLocal, StateDir: stateDir, DefaultVersion: versionGood,
			EngineDirs: map[string]string{versionGood: fakeDir, versionCrash: crash},
		},
		ProvisionTimeout: provisionTimeout,
		ClawHubURL:       hub.URL,
		Files:            files,
		Domains: platform.DomainOptions{
			Nameservers:   []string{dnsServer.Addr},
			CheckInterval: domainCheckInterval, MaxCheckInterval: domainMaxCheckInterval,
		},
	})
	if err != nil {
		return err
	}
	*stops = append(*stops, func() error { return awaitStop("platform", done, stateDir) })
	if err := k8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secrets.KeySecretName, Namespace: platform.DefaultSystemNamespace},
		Data:       map[string][]byte{"key": bytes.Repeat([]byte{0x42}, 32)},
	}); err != nil {
		return err
	}
	_, replicaURL, replicaDone, err = startPlatform(ctx, platform.Options{
		APIOnly: true, ProvisionTimeout: provisionTimeout, ClawHubURL: hub.URL, Files: files,
		Runtime: platform.RuntimeOptions{Name: platform.RuntimeLocal, DefaultVersion: versionGood, EngineDirs: map[string]string{versionGood: fakeDir, versionCrash: crash}},
	})
	if err != nil {
		return err
	}
	*stops = append(*stops, func() error { return awaitStop("replica", replicaDone, "") })
	return nil
}

// startPlatform starts a platform (o plus loopback addresses and the suite's logger) and
// waits until its facade listens. done receives what Start returned.
func startPlatform(ctx context.Context, o platform.Options) (*platform.Platform, string, <-chan error, error) {
	return startPlatformOn(ctx, env.Config, o)
}

// startPlatformOn is startPlatform on the control plane of cfg.
func startPlatformOn(ctx context.Context, cfg *rest.Config, o platform.Options) (*platform.Platform, string, <-chan error, error) {
	ready := make(chan string, 1)
	o.APIAddr, o.MetricsAddr, o.ProbeAddr = "127.0.0.1:0", "0", "0"
	o.Log = logf.Log
	o.APIReady = func(a string) { ready <- a }
	p, err := platform.New(ctx, cfg, o)
	if err != nil {
		return nil, "", nil, err
	}
	done := make(chan error, 1)
	go func() { done <- p.Start(ctx) }()
	select {
	case addr := <-ready:
		return p, "http://" + addr, done, nil
	case err := <-done:
		return nil, "", nil, fmt.Errorf("platform stopped at once: %w", err)
	case <-time.After(testenv.EventBound):
		return nil, "", nil, fmt.Errorf("the facade did not listen within %s", testenv.EventBound)
	}
}

// awaitStop waits (bounded) for a platform to return from Start, then checks that no gateway
// of its runtime (under dir, if any) is left running.
func awaitStop(name string, done <-chan error, dir string) error {
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("%s: %w", name, err)
		}
	case <-time.After(90 * time.Second):
		return fmt.Errorf("%s did not stop within 90s", name)
	}
	if dir == "" {
		return nil
	}
	if left := killGateways(dir); len(left) > 0 {
		return fmt.Errorf("%s left gateways running after it stopped (killed now): pids %v", name, left)
	}
	return nil
}

// wrapEngine makes an engine dir whose bin/openclaw runs the fake of fake with env set
// (KEY=VALUE words).
func wrapEngine(dir, fake string, env ...string) (string, error) {
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		return "", err
	}
	script := "#!/bin/sh\n"
	for _, e := range env {
		script += "export " + e + "\n"
	}
	script += "exec " + filepath.Join(fake, "bin", "openclaw") + " \"$@\"\n"
	return dir, os.WriteFile(filepath.Join(dir, "bin", "openclaw"), []byte(script), 0o755)
}

// switchStore is the shared platform's storage (files, skills, snapshots): a local store
// that a test can make unreachable (every call fails) or make refuse writes only (an
// archive upload fails mid-sync while listing still works).
type switchStore struct {
	storage.Store
	down, putDown atomic.Bool
}

var errOutage = errors.New("dial tcp 127.0.0.1:9: connect: connection refused (test outage)")

func (s *switchStore) check(op string, write bool) error {
	if s.down.Load() || write && s.putDown.Load() {
		return storage.Unavailable(op, errOutage)
	}
	return nil
}

// Put implements storage.Store.
func (s *switchStore) Put(ctx context.Context, space string, r io.Reader) (storage.Object, error) {
	if err := s.check("put", true); err != nil {
		_, _ = io.Copy(io.Discard, r)
		return storage.Object{}, err
	}
	return s.Store.Put(ctx, space, r)
}

// Get implements storage.Store.
func (s *switchStore) Get(ctx context.Context, space, c string) (io.ReadCloser, storage.Object, error) {
	if err := s.check("get", false); err != nil {
		return nil, storage.Object{}, err
	}
	return s.Store.Get(ctx, space, c)
}

// Stat implements storage.Store.
func (s *switchStore) Stat(ctx context.Context, space, c string) (storage.Object, error) {
	if err := s.check("stat", false); err != nil {
		return storage.Object{}, err
	}
	return s.Store.Stat(ctx, space, c)
}

// Delete implements storage.Store.
func (s *switchStore) Delete(ctx context.Context, space, c string) error {
	if err := s.check("delete", true); err != nil {
		return err
	}
	return s.Store.Delete(ctx, space, c)
}

// List implements storage.Store.
func (s *switchStore) List(ctx context.Context, space string) ([]storage.Object, error) {
	if err := s.check("list", false); err != nil {
		return nil, err
	}
	return s.Store.List(ctx, space)
}
