package main

import "testing"

func TestTierOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    pkg
		text string
		want tier
	}{
		{"plain table tests", pkg{TestImports: []string{"testing", module + "internal/rules/secrets"}}, "", unit},
		{"a fake engine is not the engine", pkg{XTestImports: []string{module + "internal/devtools/fakeclaw"}}, "", unit},
		{"the control plane", pkg{XTestImports: []string{module + "internal/devtools/testenv/kubeenv"}}, "", envtest},
		{"the whole platform", pkg{TestImports: []string{module + "internal/platform"}}, "", envtest},
		{"the public test kit", pkg{XTestImports: []string{module + "pkg/agentplanetest"}}, "", envtest},
		{"the engine named in a test", pkg{TestImports: []string{module + "internal/devtools/testenv/kubeenv"}}, `os.Getenv("AGENTPLANE_ENGINE_DIR")`, engine},
		{"the end-to-end harness", pkg{XTestImports: []string{module + "test/e2e"}}, "", engine},
		{"a real node wins over the engine", pkg{XTestImports: []string{module + "test/e2e", module + "internal/devtools/localcluster"}}, "", node},
	} {
		if got := tierOf(tc.p, tc.text); got != tc.want {
			t.Errorf("%s: tier %s, want %s", tc.name, got, tc.want)
		}
	}
}
