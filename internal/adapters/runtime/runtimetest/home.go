package runtimetest

import (
	"bytes"
	"context"
	"path"
	"strings"
	"testing"
	"time"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// ws is rel inside the home's workspace directory, as a path relative to the home.
func (f *Fixture) ws(rel string) string { return path.Join(f.Layout.WorkspaceDir, rel) }

func (f *Fixture) write(t *testing.T, a *agentsv1.Agent, rel, data string) {
	t.Helper()
	if err := f.Runtime.WriteFile(f.ctx(t), a, rel, []byte(data)); err != nil {
		t.Fatalf("WriteFile(%s): %v", rel, err)
	}
}

// read fails unless rel holds want.
func (f *Fixture) read(t *testing.T, a *agentsv1.Agent, rel, want string) {
	t.Helper()
	got, err := f.Runtime.ReadFile(f.ctx(t), a, rel)
	if err != nil || string(got) != want {
		t.Fatalf("ReadFile(%s) = %q, %v; want %q", rel, got, err, want)
	}
}

// sh runs script in the home's workspace directory and fails unless it exits 0.
func (f *Fixture) sh(t *testing.T, a *agentsv1.Agent, script string) string {
	t.Helper()
	res, err := f.Runtime.Exec(f.ctx(t), a, runtime.ExecRequest{Argv: []string{"sh", "-c", script}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Exec(%s) = %+v, %v", script, res, err)
	}
	return string(res.Stdout)
}

// WriteFile and ReadFile round-trip any bytes, making parent directories; they are the files
// commands see in the home's workspace directory.
func testFiles(t *testing.T, f *Fixture) {
	a, _, _, _ := f.running(t, "files")
	ctx := t.Context()
	data := "line 1\n$(not run)\n\x00binary\xff"
	f.write(t, a, f.ws("notes/deep/today.bin"), data)
	f.read(t, a, f.ws("notes/deep/today.bin"), data)
	f.write(t, a, f.ws("notes/deep/today.bin"), "again")
	f.read(t, a, f.ws("notes/deep/today.bin"), "again")
	f.write(t, a, f.ws("empty"), "")
	f.read(t, a, f.ws("empty"), "")
	for _, p := range []string{f.ws("missing.txt"), f.ws("no/such/dir/file")} {
		_, err := f.Runtime.ReadFile(ctx, a, p)
		wantErr(t, "ReadFile("+p+")", err, runtime.ErrNotFound)
	}
	if out := f.sh(t, a, "cat notes/deep/today.bin; printf made > made.txt"); out != "again" {
		t.Errorf("the command read %q of the file written", out)
	}
	f.read(t, a, f.ws("made.txt"), "made")
}

// Paths that leave the home, lexically or through a symlink, and directories are refused.
func testFilePaths(t *testing.T, f *Fixture) {
	a, _, _, _ := f.running(t, "paths")
	ctx := t.Context()
	f.sh(t, a, "mkdir -p sub && ln -s /etc escape-dir && ln -s /etc/passwd escape-file")
	for _, p := range []string{"../x", "/etc/passwd", "", "a/../../x", f.ws("escape-file"), f.ws("escape-dir/passwd"),
		f.ws("sub"), f.Layout.WorkspaceDir} {
		_, err := f.Runtime.ReadFile(ctx, a, p)
		wantErr(t, "ReadFile("+p+")", err, runtime.ErrInvalidPath)
	}
	for _, p := range []string{"../x", "/tmp/x", "", "a/../../x", f.ws("escape-dir/new"), f.ws("sub")} {
		wantErr(t, "WriteFile("+p+")", f.Runtime.WriteFile(ctx, a, p, []byte("x")), runtime.ErrInvalidPath)
	}
}

// A stop keeps the agent's files; the gateway started again finds them.
func testFilesSurviveStop(t *testing.T, f *Fixture) {
	a, d, _, _ := f.running(t, "keeper")
	f.write(t, a, f.ws("kept.md"), "v1")
	d.Stopped = true
	f.waitFor(t, a, d, "stopped", func(o runtime.Observed, g string) bool { return o.Phase == runtime.PhaseStopped && g == "" })
	d.Stopped = false
	f.waitRunning(t, a, d)
	f.read(t, a, f.ws("kept.md"), "v1")
}

// Delete removes the agent's files: an agent of the same name starts afresh.
func testFilesGoWithDelete(t *testing.T, f *Fixture) {
	a, d, _, _ := f.running(t, "reborn")
	f.write(t, a, f.ws("gone.md"), "old")
	if err := f.Runtime.Delete(f.ctx(t), a); err != nil {
		t.Fatal(err)
	}
	f.waitRunning(t, a, d)
	_, err := f.Runtime.ReadFile(f.ctx(t), a, f.ws("gone.md"))
	wantErr(t, "ReadFile of a file of the deleted agent", err, runtime.ErrNotFound)
}

// Exec runs in the workspace (or a directory of it) with the agent's HOME, the caller's
// environment and stdin, and reports the exit code and both outputs; engine commands run the
// engine; StdinFile hands stdin over as a file outside the home.
func testExec(t *testing.T, f *Fixture) {
	a, d, _, _ := f.running(t, "exec")
	ctx := t.Context()
	f.write(t, a, f.ws("marker"), "marker|")
	f.write(t, a, f.ws("sub/in-sub"), "in sub")
	res, err := f.Runtime.Exec(ctx, a, runtime.ExecRequest{
		Argv: []string{"sh", "-c", `cat marker; echo err >&2; printf '%s|' "$EXTRA"; cat "$HOME/` + f.ws("marker") + `"; cat; exit 3`},
		Env:  map[string]string{"EXTRA": "x $(y) `z`"}, Stdin: []byte("fed"),
	})
	if want := "marker|x $(y) `z`|marker|fed"; err != nil || string(res.Stdout) != want || string(res.Stderr) != "err\n" ||
		res.ExitCode != 3 || res.TimedOut || res.Truncated {
		t.Errorf("Exec = %+v (stdout %q), %v; want stdout %q, stderr \"err\\n\", exit code 3", res, res.Stdout, err, want)
	}
	res, err = f.Runtime.Exec(ctx, a, runtime.ExecRequest{Argv: []string{"cat", "in-sub"}, Dir: "sub"})
	if err != nil || string(res.Stdout) != "in sub" {
		t.Errorf("Exec in sub = %+v, %v", res, err)
	}
	for _, dir := range []string{"..", "../..", "/etc", "missing", "sub/../.."} {
		_, err := f.Runtime.Exec(ctx, a, runtime.ExecRequest{Argv: []string{"true"}, Dir: dir})
		wantErr(t, "Exec in "+dir, err, runtime.ErrInvalidPath)
	}
	res, err = f.Runtime.Exec(ctx, a, runtime.ExecRequest{Argv: []string{"--version"}, Engine: true})
	if want := f.RunningVersion(d.EngineVersion); err != nil || res.ExitCode != 0 || !strings.Contains(string(res.Stdout), want) {
		t.Errorf("engine --version = %+v (stdout %q), %v; want %s", res, res.Stdout, err, want)
	}
	res, err = f.Runtime.Exec(ctx, a, runtime.ExecRequest{
		Argv:  []string{"sh", "-c", `cat "$CANDIDATE"; case "$CANDIDATE" in "$HOME"/*) echo " in the home";; *) echo " $CANDIDATE";; esac`},
		Stdin: []byte(`{"gateway":{}}`), StdinFile: &runtime.StdinFile{Env: "CANDIDATE", Name: "openclaw.json"},
	})
	body, file, _ := strings.Cut(strings.TrimSpace(string(res.Stdout)), " ")
	if err != nil || res.ExitCode != 0 || body != `{"gateway":{}}` || path.Base(file) != "openclaw.json" {
		t.Fatalf("StdinFile: %+v (stdout %q), %v", res, res.Stdout, err)
	}
	if out := f.sh(t, a, `test -e '`+path.Dir(file)+`' || echo removed`); out != "removed\n" {
		t.Errorf("the stdin file's directory %s is left", path.Dir(file))
	}
}

// Exec ends a command at its timeout (TimedOut) or when the caller gives up, and caps each
// output at MaxOutput. The commands would sleep far longer than any call of the fixture may
// take (its Timeout, the bound of f.ctx): an Exec that returns at all, before that bound, was
// ended by the bound under test, however slow the machine.
func testExecBounds(t *testing.T, f *Fixture) {
	a, _, _, _ := f.running(t, "bounds")
	endless := []string{"sleep", "86400"}
	res, err := f.Runtime.Exec(f.ctx(t), a, runtime.ExecRequest{Argv: endless, Timeout: time.Second})
	if err != nil || !res.TimedOut {
		t.Errorf("timeout: %+v, %v", res, err)
	}
	res, err = f.Runtime.Exec(f.ctx(t), a, runtime.ExecRequest{
		Argv: []string{"sh", "-c", "head -c 100000 /dev/zero; echo done >&2"}, MaxOutput: 100})
	if err != nil || len(res.Stdout) != 100 || string(res.Stderr) != "done\n" || !res.Truncated || res.ExitCode != 0 {
		t.Errorf("MaxOutput: stdout %d bytes, stderr %q, truncated %v, exit code %d, %v", len(res.Stdout), res.Stderr, res.Truncated, res.ExitCode, err)
	}
	// The caller gives up half a second in; the call must return then, with an error, while
	// the fixture's bound (f.timeout()) only ends a wait for a call that would never return.
	ctx, cancel := context.WithTimeout(f.ctx(t), 500*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := f.Runtime.Exec(ctx, a, runtime.ExecRequest{Argv: endless})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("cancelled: no error")
		}
	case <-time.After(f.timeout()):
		t.Errorf("cancelled: the call still runs %s after its caller gave up", f.timeout())
	}
}

// Logs reads the gateway's output: the last Tail lines, then, following, until Follow says
// stop or the caller's context ends.
func testLogs(t *testing.T, f *Fixture) {
	a, _, _, _ := f.running(t, "logs")
	ctx := t.Context()
	lines, err := f.Runtime.Logs(ctx, a, runtime.LogRequest{Tail: 1000})
	if err != nil || len(lines) == 0 || len(lines) > 1000 {
		t.Fatalf("Logs tail 1000 = %d lines, %v; want the gateway's output", len(lines), err)
	}
	if one, err := f.Runtime.Logs(ctx, a, runtime.LogRequest{Tail: 1}); err != nil || len(one) != 1 {
		t.Errorf("Logs tail 1 = %q, %v", one, err)
	}
	var got []string
	done := make(chan error, 1)
	go func() {
		_, err := f.Runtime.Logs(ctx, a, runtime.LogRequest{Tail: 5, Follow: func(l string) bool { got = append(got, l); return false }})
		done <- err
	}()
	if err := waitDone(t, done); err != nil || len(got) != 1 {
		t.Errorf("following until Follow says stop: %q, %v", got, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, err := f.Runtime.Logs(cctx, a, runtime.LogRequest{Tail: 5, Follow: func(string) bool { cancel(); return true }})
		done <- err
	}()
	if err := waitDone(t, done); err != nil {
		t.Errorf("following until the context ends: %v", err)
	}
}

func waitDone(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("Logs did not return")
		return nil
	}
}

// ArchiveWorkspace writes the workspace as a tar stream, the same for the same files;
// RestoreWorkspace puts it back, files added since gone, on a new gateway; a stream that is
// not an archive is refused and changes nothing.
func testArchiveRestore(t *testing.T, f *Fixture) {
	a, d, _, gw := f.running(t, "snap")
	ctx := t.Context()
	f.write(t, a, f.ws("keep.md"), "v1")
	f.write(t, a, f.ws("dir/b.txt"), "bee")
	var snap, again bytes.Buffer
	if err := f.Runtime.ArchiveWorkspace(ctx, a, &snap); err != nil {
		t.Fatal(err)
	}
	if err := f.Runtime.ArchiveWorkspace(ctx, a, &again); err != nil || !bytes.Equal(snap.Bytes(), again.Bytes()) {
		t.Fatalf("a second archive of the same workspace differs (%v)", err)
	}
	f.write(t, a, f.ws("keep.md"), "v2")
	f.write(t, a, f.ws("new.md"), "new")
	if err := f.Runtime.RestoreWorkspace(ctx, a, bytes.NewReader(snap.Bytes())); err != nil {
		t.Fatal(err)
	}
	if _, now := f.waitRunning(t, a, d); now == gw {
		t.Errorf("the gateway %q was not replaced to see the restored files", gw)
	}
	f.read(t, a, f.ws("keep.md"), "v1")
	f.read(t, a, f.ws("dir/b.txt"), "bee")
	_, err := f.Runtime.ReadFile(ctx, a, f.ws("new.md"))
	wantErr(t, "ReadFile of a file made after the archive", err, runtime.ErrNotFound)

	if err := f.Runtime.RestoreWorkspace(ctx, a, strings.NewReader("not a tar stream, clearly not one")); err == nil {
		t.Error("a stream that is no archive was restored")
	}
	f.read(t, a, f.ws("keep.md"), "v1")
}
