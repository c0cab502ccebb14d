package program

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// pluginRecord is one plugin `plugins install` recorded in <state>/fake-plugins.json.
type pluginRecord struct {
	ID          string `json:"id"`
	Spec        string `json:"spec"`
	PackageName string `json:"packageName"`
	InstalledAt string `json:"installedAt"`
}

func pluginStorePath() string { return filepath.Join(stateDir(), "fake-plugins.json") }

func loadPlugins() (map[string]pluginRecord, error) {
	out := map[string]pluginRecord{}
	b, err := os.ReadFile(pluginStorePath())
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	return out, json.Unmarshal(b, &out)
}

// pluginID is the plugin id of an npm spec: "@openclaw/slack@2026.9.6" -> "slack".
func pluginID(spec string) (id, pkg string) {
	pkg = spec
	if i := strings.LastIndex(pkg, "@"); i > 0 {
		pkg = pkg[:i]
	}
	id = pkg[strings.LastIndex(pkg, "/")+1:]
	return strings.TrimPrefix(id, "openclaw-"), pkg
}

// pluginsInstall implements `openclaw plugins install <spec> [--force]` like openclaw 2026.9.6
// for npm specs, without the network: the plugin is recorded in <state>/fake-plugins.json and
// trusted in the config (plugins.entries.<id>.enabled = true). A plugin installed before is
// refused with exit 1 and "plugin already exists: <path> (delete it first)" on stderr, unless
// --force.
func pluginsInstall(args []string) int {
	f, err := parseFlags(args, []string{"marketplace"}, []string{"force", "pin", "link", "accept-capabilities",
		"acknowledge-install-policy-warning", "dangerously-force-unsafe-install"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if len(f.args) != 1 || f.args[0] == "" {
		fmt.Fprintln(os.Stderr, "error: missing required argument 'path-or-spec-or-plugin'")
		return 1
	}
	spec := f.args[0]
	id, pkg := pluginID(spec)
	if slices.Contains(strings.Split(os.Getenv("FAKECLAW_NPM_MISSING"), ","), pkg) {
		fmt.Fprintf(os.Stderr, "Package not found on npm: %s. See https://docs.openclaw.ai/tools/plugin for installable plugins.\n", spec)
		return 1
	}
	plugins, err := loadPlugins()
	if err != nil {
		return fail("plugin registry unreadable: " + err.Error())
	}
	dir := filepath.Join(stateDir(), "npm", "projects", "openclaw-"+id, "node_modules", pkg)
	if _, ok := plugins[id]; ok && !f.bools["force"] {
		fmt.Fprintf(os.Stderr, "plugin already exists: %s (delete it first)\n", dir)
		return 1
	}
	if err := trustPlugin(id); err != nil {
		return fail(err.Error())
	}
	plugins[id] = pluginRecord{ID: id, Spec: spec, PackageName: pkg, InstalledAt: time.Now().UTC().Format(time.RFC3339)}
	if err := writeFileAtomic(pluginStorePath(), []byte(encodeJSON(plugins, "  ")+"\n")); err != nil {
		return fail(err.Error())
	}
	fmt.Printf("Installing %s into %s…\nInstalled plugin: %s\nSaved for the next Gateway start.\n", spec, dir, id)
	return 0
}

// trustPlugin sets plugins.entries.<id>.enabled in the config (created when missing).
func trustPlugin(id string) error {
	path := configPath()
	cfg, issues, err := loadConfig(path)
	switch {
	case errors.Is(err, errNoConfig):
		cfg = map[string]any{}
	case err != nil:
		return err
	case cfg == nil:
		return fmt.Errorf("config invalid at %s: %s", path, issues[0].Message)
	}
	node := cfg
	for _, k := range []string{"plugins", "entries", id} {
		next, ok := node[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			node[k] = next
		}
		node = next
	}
	node["enabled"] = true
	return writeFileAtomic(path, []byte(encodeJSON(cfg, "  ")+"\n"))
}

// pluginsList implements `openclaw plugins list [--json]` for the recorded plugins.
func pluginsList(args []string) int {
	f, err := parseFlags(args, nil, []string{"json", "enabled", "verbose"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	plugins, err := loadPlugins()
	if err != nil {
		return fail("plugin registry unreadable: " + err.Error())
	}
	ids := make([]string, 0, len(plugins))
	for id := range plugins {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	list := make([]map[string]any, 0, len(ids))
	for _, id := range ids {
		list = append(list, map[string]any{"id": id, "packageName": plugins[id].PackageName, "enabled": true, "status": "loaded", "origin": "global"})
	}
	if f.bools["json"] {
		printJSON(map[string]any{"plugins": list})
		return 0
	}
	for _, id := range ids {
		fmt.Println(id)
	}
	return 0
}

// writeFileAtomic writes data to path through a temporary file and a rename.
func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp-" + randomHex(4)
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}
