package local

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// The program of TestTemplateCopiesDrawTheirOwnRandomness: a main thread, a worker thread
// and a child Node process, each of which draws from OpenSSL, Node's UUIDs and Math.random
// once before the freeze (their generators then hold state the image keeps); the main
// thread reports "ready" once all three run, and after a restore it writes what each draws
// then to results-<n>.json when the test writes n to "go".
const (
	drawMain = `const fs = require('fs'), crypto = require('crypto'), { Worker } = require('worker_threads'), { fork } = require('child_process');
const draw = () => [crypto.randomBytes(16).toString('hex'), crypto.randomUUID(), String(Math.random())];
draw();
const worker = new Worker(__dirname + '/worker.js');
const child = fork(__dirname + '/child.js', { stdio: ['ignore', 'ignore', 'ignore', 'ipc'] });
const ask = (peer) => new Promise((done) => { peer.once('message', done); peer.postMessage ? peer.postMessage('draw') : peer.send('draw'); });
let up = 0;
const online = () => { if (++up === 2) fs.writeFileSync(__dirname + '/ready', ''); };
worker.once('online', online);
child.once('message', online);
setInterval(async () => {
  let n;
  try { n = fs.readFileSync(__dirname + '/go', 'utf8').trim(); } catch { return; }
  if (n === '' || fs.existsSync(__dirname + '/results-' + n + '.json')) return;
  const all = { main: draw(), worker: await ask(worker), child: await ask(child) };
  fs.writeFileSync(__dirname + '/results.tmp', JSON.stringify(all));
  fs.renameSync(__dirname + '/results.tmp', __dirname + '/results-' + n + '.json');
}, 20);
`
	drawWorker = `const { parentPort } = require('worker_threads'), crypto = require('crypto');
const draw = () => [crypto.randomBytes(16).toString('hex'), crypto.randomUUID(), String(Math.random())];
draw();
parentPort.on('message', () => parentPort.postMessage(draw()));
`
	drawChild = `const crypto = require('crypto');
const draw = () => [crypto.randomBytes(16).toString('hex'), crypto.randomUUID(), String(Math.random())];
draw();
process.on('message', () => process.send(draw()));
process.send('up');
`
)

// TestTemplateCopiesDrawTheirOwnRandomness: two copies restored from one CRIU image of a
// frozen template (a main thread, a worker thread and a child Node process in a sandbox, as a
// gateway runs) draw different bytes from OpenSSL, different UUIDs and different Math.random
// numbers in every thread and process once thawed. Without the thaw's reseed each copy
// repeats what the other drew.
func TestTemplateCopiesDrawTheirOwnRandomness(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Skip(t, "checkpoints need root")
	}
	engineDir := os.Getenv("AGENTPLANE_ENGINE_DIR")
	if engineDir == "" {
		testenv.Skip(t, "AGENTPLANE_ENGINE_DIR is not set (hack/install-engine.sh --print-dir)")
	}
	criu, reseed := os.Getenv(CRIUEnv), os.Getenv(ReseedEnv)
	if criu == "" {
		criu, _ = filepath.Abs("../../../../bin/criu")
	}
	if reseed == "" {
		reseed, _ = filepath.Abs("../../../../bin/" + ReseedName)
	}
	if reseed = resolvedFile(reseed); !fileExists(criu) || reseed == "" {
		testenv.Skip(t, "no CRIU (%s) or reseed addon (%s): make sandbox-packages", criu, reseed)
	}
	ctx := context.Background()
	s, c := checkpointingSandbox(t, criu)
	dir := t.TempDir()
	home, tdir, root, images := filepath.Join(dir, "home"), filepath.Join(dir, "template"), filepath.Join(dir, sandboxRootName), filepath.Join(dir, checkpointDirName)
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string]string{"main.js": drawMain, "worker.js": drawWorker, "child.js": drawChild} {
		if err := os.WriteFile(filepath.Join(home, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := ownTree(home, ".", warmUID); err != nil {
		t.Fatal(err)
	}
	if err := makeTemplateDir(tdir, warmUID); err != nil {
		t.Fatal(err)
	}
	spec := sandboxSpec{home: home, dir: home, uid: warmUID, readOnly: []string{engineDir},
		binary: filepath.Join(engineDir, "bin", "node"), args: []string{filepath.Join(home, "main.js")},
		template:   &sandboxTemplate{dir: tdir, reseed: reseed},
		checkpoint: &checkpointSpec{tini: c.tini, log: filepath.Join(dir, logFileName)}}
	bin, args := s.wrap(spec)
	p, err := startProcess(launch{binary: bin, args: args, env: mergeEnv(map[string]string{"PATH": defaultPath}, templateEnv("")),
		dir: home, logPath: filepath.Join(dir, logFileName), sandboxed: true, dieWithManager: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopProcess(context.Background(), p, 0, nil) })
	waitFile(t, filepath.Join(home, "ready"), p.exited, filepath.Join(dir, logFileName))
	init := sandboxInit(p.pid)
	n, err := freezeNodeTree(ctx, init.pid, tdir)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("froze %d Node processes, want 2 (the program and its child)", n)
	}
	if err := c.dump(ctx, init.pid, images, root, args, clockHeld); err != nil {
		t.Fatal(err)
	}
	init.killAndWait()

	var copies [2]map[string][]string
	for i := range copies {
		copies[i] = restoreAndDraw(t, c, images, root, tdir, home, n, i)
	}
	for _, who := range []string{"main", "worker", "child"} {
		for k, what := range []string{"bytes from OpenSSL", "UUID", "Math.random number"} {
			a, b := copies[0][who], copies[1][who]
			if len(a) != 3 || len(b) != 3 {
				t.Fatalf("%s drew %q and %q", who, a, b)
			}
			if a[k] == b[k] {
				t.Errorf("the %s of both copies drew the same %s: %s", who, what, a[k])
			}
		}
	}
}

// restoreAndDraw restores the image in images as copy i, thaws its n processes, has it draw,
// ends it and returns what its main thread, worker and child drew.
func restoreAndDraw(t *testing.T, c *checkpointer, images, root, tdir, home string, n, i int) map[string][]string {
	t.Helper()
	work := filepath.Join(filepath.Dir(images), "copy-"+strconv.Itoa(i))
	if err := os.Mkdir(work, 0o700); err != nil {
		t.Fatal(err)
	}
	pid, err := c.restoreFrom(context.Background(), images, root, work, nil)
	if err != nil {
		t.Fatal(err)
	}
	restored := procRef{pid: pid}
	if st, err := readProcStat(pid); err == nil {
		restored.start = st.start
	}
	defer restored.killAndWait()
	if err := thawNodeTree(tdir, n); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "go"), []byte(strconv.Itoa(i)), 0o644); err != nil {
		t.Fatal(err)
	}
	results := filepath.Join(home, "results-"+strconv.Itoa(i)+".json")
	gone := make(chan struct{})
	go func() {
		for procAlive(restored.pid, restored.start) {
			time.Sleep(50 * time.Millisecond)
		}
		close(gone)
	}()
	waitFile(t, results, gone, filepath.Join(filepath.Dir(home), logFileName))
	var got map[string][]string
	b, err := os.ReadFile(results)
	if err == nil {
		err = json.Unmarshal(b, &got)
	}
	if err != nil {
		t.Fatalf("copy %d: %v", i, err)
	}
	return got
}

// waitFile waits until path exists (the program writes each file whole: a rename), or fails once ended is
// closed (the program ended) with the log's end.
func waitFile(t *testing.T, path string, ended <-chan struct{}, log string) {
	t.Helper()
	for {
		if _, err := os.Stat(path); err == nil {
			return
		} else if !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		select {
		case <-ended:
			t.Fatalf("the program ended before writing %s: %s", filepath.Base(path), lastLines(readTail(log), 15))
		case <-time.After(20 * time.Millisecond):
		}
	}
}
