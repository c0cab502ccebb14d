package local

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/checkpoint-restore/go-criu/v7/crit"
	"github.com/checkpoint-restore/go-criu/v7/crit/images/timens"
	"golang.org/x/sys/unix"

	"github.com/agentplane/agentplane/internal/adapters/runtime/local/lockprobe"
	"github.com/agentplane/agentplane/internal/devtools/testenv"
)

// writeTimensImage writes a CRIU time namespace image at path whose clocks read mono and boot.
func writeTimensImage(t *testing.T, path string, mono, boot time.Duration) {
	t.Helper()
	img := &crit.CriuImage{Magic: "TIMENS", Entries: []*crit.CriuEntry{{Message: &timens.TimensEntry{Monotonic: timespec(mono), Boottime: timespec(boot)}}}}
	if err := writeImage(path, img); err != nil {
		t.Fatal(err)
	}
}

// readTimensImage reads the clocks of the CRIU time namespace image at path.
func readTimensImage(t *testing.T, path string) (mono, boot time.Duration) {
	t.Helper()
	img, err := readImage(path, "TIMENS", &timens.TimensEntry{})
	if err != nil {
		t.Fatal(err)
	}
	e := img.Entries[0].Message.(*timens.TimensEntry)
	d := func(ts *timens.Timespec) time.Duration {
		return time.Duration(ts.GetTvSec())*time.Second + time.Duration(ts.GetTvNsec())
	}
	return d(e.Monotonic), d(e.Boottime)
}

// hostClocks reads the host's CLOCK_MONOTONIC and CLOCK_BOOTTIME.
func hostClocks(t *testing.T) (mono, boot time.Duration) {
	t.Helper()
	var m, b unix.Timespec
	if err := errors.Join(unix.ClockGettime(unix.CLOCK_MONOTONIC, &m), unix.ClockGettime(unix.CLOCK_BOOTTIME, &b)); err != nil {
		t.Fatal(err)
	}
	return time.Duration(m.Nano()), time.Duration(b.Nano())
}

// TestCheckpointClocksForRestore: what each kind of checkpoint's restore gives its clocks. A
// template's dumped clocks are restored as they are (a copy's go on from the dump); an
// agent's dumped in the host's time namespace are dropped (restored into the host's); an
// agent's dumped in a namespace of its own are moved on to the host's clocks now plus that
// namespace's offsets, so that its sleep counts.
func TestCheckpointClocksForRestore(t *testing.T) {
	const dumpedMono, dumpedBoot = 3 * time.Second, 4 * time.Second
	// Offsets behind the host's clocks by about half its uptime: a restored clock cannot read
	// before the host's boot (a fixed 2 hours failed on a machine booted 72 minutes before).
	mono, _ := hostClocks(t)
	back := (mono / 2).Truncate(time.Millisecond)
	off := clockOffsets{Monotonic: -back - 7*time.Millisecond, Boottime: -back - 9*time.Millisecond}
	for _, tc := range []struct {
		name    string
		mode    clockMode
		off     clockOffsets
		image   bool // the time namespace image is still there for the restore
		shifted bool // its clocks are moved to the host's now plus off
	}{
		{name: "a template's clocks stand still", mode: clockHeld, off: clockOffsets{}, image: true},
		{name: "a template's in a namespace of its own stand still", mode: clockHeld, off: off, image: true},
		{name: "an agent of the host's time namespace gets the host's clocks", mode: clockRuns, off: clockOffsets{}},
		{name: "an agent of a namespace of its own keeps its offsets", mode: clockRuns, off: off, image: true, shifted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			img := filepath.Join(dir, "timens-7.img")
			writeTimensImage(t, img, dumpedMono, dumpedBoot)
			if err := keepClock(dir, tc.mode, tc.off); err != nil {
				t.Fatal(err)
			}
			beforeMono, beforeBoot := hostClocks(t)
			if err := clockForRestore(dir); err != nil {
				t.Fatal(err)
			}
			afterMono, afterBoot := hostClocks(t)
			if _, err := os.Stat(img); errors.Is(err, fs.ErrNotExist) {
				if tc.image {
					t.Fatal("the time namespace image was removed")
				}
				return
			}
			if !tc.image {
				t.Fatal("the time namespace image is still there: the restore would hold the host's clocks where the dump left them")
			}
			mono, boot := readTimensImage(t, img)
			if !tc.shifted {
				if mono != dumpedMono || boot != dumpedBoot {
					t.Fatalf("the clocks read %s and %s, want the dumped %s and %s", mono, boot, dumpedMono, dumpedBoot)
				}
				return
			}
			if mono < beforeMono+tc.off.Monotonic || mono > afterMono+tc.off.Monotonic {
				t.Errorf("CLOCK_MONOTONIC reads %s, want the host's now (%s to %s) plus %s", mono, beforeMono, afterMono, tc.off.Monotonic)
			}
			if boot < beforeBoot+tc.off.Boottime || boot > afterBoot+tc.off.Boottime {
				t.Errorf("CLOCK_BOOTTIME reads %s, want the host's now (%s to %s) plus %s", boot, beforeBoot, afterBoot, tc.off.Boottime)
			}
		})
	}
}

// TestCopyOfATemplateHoldsItsClockAndItsSleepCounts, with CRIU: a sandboxed process dumped as
// a template is (clockHeld) is restored into a time namespace whose clocks go on from the
// dump, so its CLOCK_MONOTONIC is behind the host's by at least the time between the dump and
// the restore (no timer of the template is due at a copy's thaw); that copy dumped as an
// agent's gateway is (clockRuns) is restored with the same offsets, so the time it slept
// counts on its clocks (its timers due meanwhile fire at its wake).
func TestCopyOfATemplateHoldsItsClockAndItsSleepCounts(t *testing.T) {
	if os.Geteuid() != 0 {
		testenv.Skip(t, "checkpoints need root")
	}
	criu := os.Getenv(CRIUEnv)
	if criu == "" {
		criu, _ = filepath.Abs("../../../../bin/criu")
	}
	if !fileExists(criu) {
		testenv.Skip(t, "no CRIU (%s): make sandbox-packages", criu)
	}
	ctx := context.Background()
	s, c := checkpointingSandbox(t, criu)
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, warmUID, warmUID); err != nil {
		t.Fatal(err)
	}
	held := filepath.Join(home, "probe.db-shm")
	if err := os.WriteFile(held, make([]byte, lockprobe.Size), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(held, warmUID, warmUID); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, args := s.wrap(sandboxSpec{home: home, dir: home, uid: warmUID, binary: exe, readOnly: []string{exe},
		checkpoint: &checkpointSpec{tini: c.tini, log: filepath.Join(dir, logFileName)}})
	p, err := startProcess(launch{binary: bin, args: args, env: mergeEnv(map[string]string{"PATH": defaultPath, lockprobe.Env: held}),
		dir: home, logPath: filepath.Join(dir, logFileName), sandboxed: true, dieWithManager: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopProcess(context.Background(), p, 0, nil) })
	init, err := probeHolder(ctx, p, held, c.runTimeout())
	if err != nil {
		t.Fatalf("the sandbox did not start: %v (%s)", err, lastLines(readTail(filepath.Join(dir, logFileName)), 5))
	}
	restore := func(images, root string) (procRef, clockOffsets, time.Duration) {
		t.Helper()
		start := time.Now()
		pid, err := c.restoreFrom(ctx, images, root, filepath.Join(dir, filepath.Base(images)+"-work"), nil)
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		restored := procRef{pid: pid}
		if st, err := readProcStat(pid); err == nil {
			restored.start = st.start
		}
		t.Cleanup(restored.killAndWait)
		off, err := readClockOffsets(pid)
		if err != nil {
			t.Fatal(err)
		}
		return restored, off, took
	}
	for _, d := range []string{"template-work", "agent-work"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}

	template, troot := filepath.Join(dir, "template"), filepath.Join(dir, "template-root")
	if err := c.dump(ctx, init.pid, template, troot, args, clockHeld); err != nil {
		t.Fatal(err)
	}
	dumped := time.Now()
	init.killAndWait()
	// The copy's clocks went on from before the dump's end, and the restore reads the host's
	// after gap: they are behind the host's by more than gap.
	gap := time.Since(dumped)
	copied, off, _ := restore(template, troot)
	if off.Monotonic > -gap || off.Boottime > -gap {
		t.Fatalf("the copy's clocks are %s (monotonic) and %s (boottime) off the host's, want at least %s behind: "+
			"they did not go on from the template's dump", off.Monotonic, off.Boottime, gap)
	}

	agent, aroot := filepath.Join(dir, "agent"), filepath.Join(dir, "agent-root")
	if err := c.dump(ctx, copied.pid, agent, aroot, args, clockRuns); err != nil {
		t.Fatal(err)
	}
	copied.killAndWait()
	_, woke, took := restore(agent, aroot)
	for _, cl := range []struct {
		name      string
		was, woke time.Duration
	}{{"monotonic", off.Monotonic, woke.Monotonic}, {"boottime", off.Boottime, woke.Boottime}} {
		// The restore reads the host's clock after clockForRestore did, by at most its own time.
		if cl.woke > cl.was || cl.woke < cl.was-took {
			t.Errorf("the woken copy's %s clock is %s off the host's, want the %s it had (less at most the restore's %s): its sleep did not count",
				cl.name, cl.woke, cl.was, took)
		}
	}
}

// checkpointingSandbox is this host's sandbox and a checkpointer with CRIU at criu; the test is
// skipped when the host cannot checkpoint.
func checkpointingSandbox(t *testing.T, criu string) (*sandbox, *checkpointer) {
	t.Helper()
	ctx := context.Background()
	s, err := newSandbox(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, why := newCheckpointer(ctx, criu, 0)
	if c == nil {
		testenv.Skip(t, "this host cannot checkpoint: %s", why)
	}
	return s, c
}
