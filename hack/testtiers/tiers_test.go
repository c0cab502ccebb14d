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
		{"a fake engine is not the engine, but a program", pkg{XTestImports: []string{module + "internal/devtools/fakeclaw"}}, "", tools},
		{"a program the test runs", pkg{TestImports: []string{"os/exec", module + "internal/adapters/cid"}}, "", tools},
		{"a control plane wins over a program", pkg{TestImports: []string{"os/exec", module + "internal/devtools/testenv/kubeenv"}}, "", envtest},
		{"the control plane", pkg{XTestImports: []string{module + "internal/devtools/testenv/kubeenv"}}, "", envtest},
		{"the whole platform", pkg{TestImports: []string{module + "internal/platform"}}, "", envtest},
		{"the public test kit", pkg{XTestImports: []string{module + "pkg/agentplanetest"}}, "", envtest},
		{"the engine named in a test", pkg{TestImports: []string{module + "internal/devtools/testenv/kubeenv"}}, `os.Getenv("` + engineMarkers[0] + `")`, engine},
		{"the end-to-end harness", pkg{XTestImports: []string{module + "test/e2e"}}, "", engine},
		{"a real node wins over the engine", pkg{XTestImports: []string{module + "test/e2e", module + "internal/devtools/localcluster"}}, "", node},
	} {
		if got := tierOf(tc.p, tc.text); got != tc.want {
			t.Errorf("%s: tier %s, want %s", tc.name, got, tc.want)
		}
	}
}
