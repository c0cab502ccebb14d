package openclaw

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/adapters/engine"
)

func TestPluginInstall(t *testing.T) {
	e := New()
	cmd := e.PluginInstallCommand("@openclaw/slack@" + engine.PinnedVersion)
	if want := []string{"plugins", "install", "@openclaw/slack@" + engine.PinnedVersion}; !reflect.DeepEqual(cmd.Args, want) || cmd.Timeout <= 0 {
		t.Fatalf("PluginInstallCommand = %+v", cmd)
	}
	for _, tc := range []struct {
		name           string
		stdout, stderr string
		exit           int
		want           error  // nil: installed
		msg            string // in the error
	}{
		{name: "installed", stdout: "Installed plugin: slack\n", exit: 0},
		{name: "installed before", stderr: "plugin already exists: /home/a/.openclaw/extensions/slack (delete it first)\n", exit: 1},
		{name: "gateway down", exit: 1, want: engine.ErrGatewayUnreachable,
			stderr: "Downloading @openclaw/slack…\nGateway not reachable at ws://127.0.0.1:18789 (ECONNREFUSED).\nGateway target: ws://127.0.0.1:18789\n",
			msg:    "Gateway not reachable at ws://127.0.0.1:18789 (ECONNREFUSED). | Gateway target: ws://127.0.0.1:18789"},
		{name: "registry refuses", exit: 1, want: engine.ErrPluginRejected,
			stderr: "npm error code E404\n\nnpm error 404 Not Found - GET https://registry.npmjs.org/@openclaw%2fnope\n",
			msg:    "exit code 1: npm error code E404 | npm error 404 Not Found"},
		{name: "not on npm", exit: 1, want: engine.ErrPluginRejected,
			stderr: "Package not found on npm: @openclaw/nope. See https://docs.openclaw.ai/tools/plugin for installable plugins.\n", msg: "Package not found on npm"},
		{name: "no such version", exit: 1, want: engine.ErrPluginRejected,
			stderr: "npm error code ETARGET\nnpm error notarget No matching version found for @openclaw/slack@1999.1.1.\n", msg: "ETARGET"},
		{name: "policy", exit: 1, want: engine.ErrPluginRejected, stderr: "Install blocked by policy: review exceeds the 4,000-character display limit\n", msg: "Install blocked by policy"},
		{name: "registry down", exit: 1, want: engine.ErrCLI,
			stderr: "npm error code ECONNRESET\nnpm error network aborted\n", msg: "exit code 1: npm error code ECONNRESET | npm error network aborted"},
		{name: "killed", exit: 137, want: engine.ErrCLI, msg: "exit code 137"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := e.ParsePluginInstall([]byte(tc.stdout), []byte(tc.stderr), tc.exit)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("want installed, got %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("got %v, want %v with %q", err, tc.want, tc.msg)
			}
			if errors.Is(tc.want, engine.ErrCLI) && errors.Is(err, engine.ErrGatewayUnreachable) {
				t.Fatalf("a failed install is not a gateway that did not answer: %v", err)
			}
			wantRejected := errors.Is(tc.want, engine.ErrPluginRejected)
			if rejected := errors.Is(err, engine.ErrPluginRejected); rejected != wantRejected || !errors.Is(err, engine.ErrCLI) && !errors.Is(tc.want, engine.ErrGatewayUnreachable) {
				t.Fatalf("rejected %v (want %v), a CLI failure %v: %v", rejected, wantRejected, errors.Is(err, engine.ErrCLI), err)
			}
		})
	}
}
