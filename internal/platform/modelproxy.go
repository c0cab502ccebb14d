package platform

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/metrics"

	agentctrl "github.com/agentplane/agentplane/controllers/agent"
	"github.com/agentplane/agentplane/internal/adapters/modelproxy"
	"github.com/agentplane/agentplane/internal/adapters/modelproxy/kubeaccess"
)

// ModelProxyOptions configure the model credential proxy: agents' calls to the model
// providers it knows go through the REST facade's /llm/ routes, which swap the agent's proxy
// credential for the real key (the agent never holds it) and enforce budgets.
type ModelProxyOptions struct {
	// Disabled hands every attached secret to the agents' environment, provider keys too.
	Disabled bool
	// URL is the facade's base URL as agents reach it. Default: the facade's own address on
	// loopback (local runtime), http://agentplane-api.<system namespace>.svc (kube runtime).
	URL string
	// Upstreams override provider origins (provider -> URL: tests, mirrors, egress proxies).
	Upstreams map[string]string
	// FlushInterval is how often each replica writes the usage it counted to status (0: 30 s).
	FlushInterval time.Duration
	// PricesFile is the model price table (modelproxy.PriceFile, YAML or JSON) the proxy
	// prices each request by; "" counts usage in tokens only.
	PricesFile string
	// Addr, when set, is a listener of its own that serves only the proxy (the facade serves
	// it too); URL then defaults to it. `dev --runtime kube` binds it on the node's address,
	// which its pods reach while the facade stays on loopback.
	Addr string
}

// modelRoutes tells the controllers where an agent reaches the proxy for a provider.
type modelRoutes struct{ base string }

// BaseURL implements agentctrl.ModelProxy.
func (m modelRoutes) BaseURL(provider string) (string, bool) {
	p, ok := modelproxy.Lookup(provider)
	if !ok {
		return "", false
	}
	return m.base + "/llm/" + p.Name + p.BasePath, true
}

// modelProxyBase is the proxy's base URL for agents ("" : no proxy). api is the facade's
// bound listener (nil: this process serves no facade), own the proxy's own (nil: none).
func (p *Platform) modelProxyBase(api, own net.Listener) string {
	o := p.opts.ModelProxy
	switch {
	case o.Disabled:
		return ""
	case o.URL != "":
		return strings.TrimSuffix(o.URL, "/")
	case own != nil:
		return "http://" + own.Addr().String()
	case p.opts.Runtime.Name == RuntimeKube:
		return "http://agentplane-api." + p.opts.SystemNamespace + ".svc"
	case api == nil:
		return ""
	}
	port := api.Addr().(*net.TCPAddr).Port
	return fmt.Sprintf("http://127.0.0.1:%d", port)
}

// controllersModelProxy is the proxy as the controllers see it (nil: none).
func (p *Platform) controllersModelProxy() agentctrl.ModelProxy {
	if p.modelBase == "" {
		return nil
	}
	return modelRoutes{base: p.modelBase}
}

// setupModelProxy builds the proxy the facade serves and its usage recorder (every replica),
// and serves it on own too (nil: only the facade serves it), with the channel relay (nil:
// none) beside it.
func (p *Platform) setupModelProxy(own net.Listener, relay http.Handler) (*modelproxy.Proxy, error) {
	if p.opts.ModelProxy.Disabled {
		return nil, nil
	}
	mgr := p.Manager
	var prices *modelproxy.Prices
	if f := p.opts.ModelProxy.PricesFile; f != "" {
		var err error
		if prices, err = modelproxy.LoadPrices(f); err != nil {
			return nil, err
		}
	}
	proxy, err := modelproxy.New(modelproxy.Options{
		Prices:     prices,
		Authorizer: &kubeaccess.Authorizer{Cache: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Sealer: p.sealer},
		Upstreams:  p.opts.ModelProxy.Upstreams,
		Log:        p.opts.Log.WithName("modelproxy"),
		Registerer: metrics.Registry,
	})
	if err != nil {
		return nil, err
	}
	err = mgr.Add(&kubeaccess.Recorder{
		Ledger: proxy, Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Interval: p.opts.ModelProxy.FlushInterval, Log: p.opts.Log.WithName("usage"), Currency: prices.Currency(),
	})
	if err == nil && own != nil {
		mux := http.NewServeMux()
		mux.Handle("/llm/", proxy)
		if relay != nil {
			mux.Handle("/relay/", relay)
		}
		err = mgr.Add(&proxyListener{l: own, h: mux})
	}
	return proxy, err
}

// proxyListener serves the model proxy (and the channel relay) alone on a listener of its own
// (every replica).
type proxyListener struct {
	l net.Listener
	h http.Handler
}

func (s *proxyListener) NeedLeaderElection() bool { return false }

func (s *proxyListener) Start(ctx context.Context) error {
	srv := &http.Server{Handler: s.h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(s.l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
