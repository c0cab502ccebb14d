package main

import (
	"testing"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/agentplane/agentplane/internal/platform"
)

// TestKubeAPIFlags: with its flag defaults the manager's client to the Kubernetes API server
// has no client-side rate limiter (the API server's priority and fairness paces it), whatever
// the kubeconfig says; --kube-api-qps and --kube-api-burst set one, and the burst defaults to
// twice the rate.
func TestKubeAPIFlags(t *testing.T) {
	limiter := func(args ...string) (*rest.Config, *rest.RESTClient) {
		t.Helper()
		var o platform.Options
		cmd := &cobra.Command{Use: "x"}
		addPlatformFlags(cmd, &o, ":8080")
		if err := cmd.Flags().Parse(args); err != nil {
			t.Fatal(err)
		}
		// A kubeconfig with limits of its own, as envtest's (1,000 QPS, burst 2,000).
		in := &rest.Config{Host: "https://127.0.0.1:1", QPS: 1000, Burst: 2000}
		cfg := platform.ClientConfig(in, o.APIQPS, o.APIBurst)
		rc := *cfg
		rc.GroupVersion = &corev1.SchemeGroupVersion
		rc.APIPath = "/api"
		rc.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
		c, err := rest.RESTClientFor(&rc)
		if err != nil {
			t.Fatal(err)
		}
		return cfg, c
	}
	if cfg, c := limiter(); c.GetRateLimiter() != nil || cfg.QPS >= 0 {
		t.Fatalf("defaults: QPS %v, burst %d, limiter %v; want no client-side limit", cfg.QPS, cfg.Burst, c.GetRateLimiter())
	}
	if cfg, c := limiter("--kube-api-qps", "50", "--kube-api-burst", "100"); c.GetRateLimiter() == nil || c.GetRateLimiter().QPS() != 50 || cfg.Burst != 100 {
		t.Fatalf("--kube-api-qps 50 --kube-api-burst 100: QPS %v, burst %d", cfg.QPS, cfg.Burst)
	}
	if cfg, _ := limiter("--kube-api-qps", "20"); cfg.QPS != 20 || cfg.Burst != 40 {
		t.Fatalf("--kube-api-qps 20: QPS %v, burst %d; want burst 40", cfg.QPS, cfg.Burst)
	}
	if cfg, c := limiter("--kube-api-qps", "0"); c.GetRateLimiter() == nil || cfg.QPS != 1000 || cfg.Burst != 2000 {
		t.Fatalf("--kube-api-qps 0: QPS %v, burst %d; want the kubeconfig's 1000, 2000", cfg.QPS, cfg.Burst)
	}
}
