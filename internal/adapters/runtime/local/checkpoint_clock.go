package local

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/checkpoint-restore/go-criu/v7/crit/images/timens"
	"golang.org/x/sys/unix"
)

// A checkpoint's clocks. CRIU dumps the CLOCK_MONOTONIC and CLOCK_BOOTTIME its processes
// read (timens-<id>.img) and restores them into a time namespace of their own whose clocks
// go on from the dump, as if no time had passed. Node's timers run on CLOCK_MONOTONIC. Which
// clock a restore gives is the dump's choice (clockMode):
//
//   - An agent's sleep counts (clockRuns): the timers its gateway set that came due while it
//     slept (its cron schedule among them) fire at its wake, as if it had run meanwhile. A
//     gateway of the host's time namespace (a cold start) is restored into it (the dump's
//     clocks are dropped); one in a namespace of its own (a copy of a template, below) gets
//     the offset from the host's clocks it had (clock-offsets.json): its restore moves the
//     dumped clocks on by the sleep.
//   - A template's clock stands still (clockHeld): each copy's clocks go on from the template's
//     dump, so however old the template is, none of its timers is due when a copy is thawed.
//     Before, with the host's clocks, a copy ran at its thaw every timer of the template that
//     came due since the dump, beside its restart on the agent's config: a copy of a 6.5 to
//     8.5 minutes old template took 8.1 to 8.6 s to restart, against 3.6 s for one of a minute
//     old, and a copy of a 256 s old one died of SIGBUS on its way (CI, 2026-12-07).
type clockMode int

const (
	clockRuns clockMode = iota
	clockHeld
)

// clockOffsetsName is the file of a checkpoint (clockRuns) that holds its time namespace's
// offsets from the host's clocks; without it, its clocks are the host's.
const clockOffsetsName = "clock-offsets.json"

// clockOffsets are a time namespace's offsets from the host's clocks (timens_offsets(5)).
type clockOffsets struct {
	Monotonic time.Duration `json:"monotonic"`
	Boottime  time.Duration `json:"boottime"`
}

// readClockOffsets reads the offsets of the time namespace of process pid (zero: the host's,
// or a kernel without time namespaces).
func readClockOffsets(pid int) (clockOffsets, error) {
	var off clockOffsets
	f, err := os.Open(fmt.Sprintf("/proc/%d/timens_offsets", pid))
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(fmt.Sprintf("/proc/%d", pid)); serr == nil {
			return off, nil // no time namespaces on this kernel
		}
	}
	if err != nil {
		return off, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) != 3 {
			return off, fmt.Errorf("timens_offsets: unexpected line %q", s.Text())
		}
		sec, err1 := strconv.ParseInt(fields[1], 10, 64)
		nsec, err2 := strconv.ParseInt(fields[2], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return off, fmt.Errorf("timens_offsets: %w", err)
		}
		d := time.Duration(sec)*time.Second + time.Duration(nsec)
		switch fields[0] {
		case "monotonic":
			off.Monotonic = d
		case "boottime":
			off.Boottime = d
		}
	}
	return off, s.Err()
}

// keepClock sets which clocks the checkpoint in dir restores (clockMode), its processes'
// time namespace having had the offsets off at the dump.
func keepClock(dir string, mode clockMode, off clockOffsets) error {
	switch {
	case mode == clockHeld:
		return nil // CRIU's own: the dumped clocks go on
	case off == clockOffsets{}:
		imgs, err := filepath.Glob(filepath.Join(dir, "timens-*.img"))
		if err != nil {
			return err
		}
		for _, img := range imgs {
			if err := os.Remove(img); err != nil {
				return err
			}
		}
		return nil
	}
	b, err := json.Marshal(off)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, clockOffsetsName), b, 0o600)
}

// clockForRestore prepares the clocks of the checkpoint in images for its restore now: when it
// keeps its time namespace's offsets (keepClock), its dumped clocks become the host's now
// moved by them, so that CRIU gives the restored namespace those offsets again.
func clockForRestore(images string) error {
	b, err := os.ReadFile(filepath.Join(images, clockOffsetsName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var off clockOffsets
	if err := json.Unmarshal(b, &off); err != nil {
		return fmt.Errorf("%s: %w", clockOffsetsName, err)
	}
	imgs, err := filepath.Glob(filepath.Join(images, "timens-*.img"))
	if err != nil {
		return err
	}
	if len(imgs) != 1 {
		return fmt.Errorf("the checkpoint keeps its clocks' offsets but has %d time namespace images", len(imgs))
	}
	var mono, boot unix.Timespec
	if err := errors.Join(unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono), unix.ClockGettime(unix.CLOCK_BOOTTIME, &boot)); err != nil {
		return err
	}
	return writeClocks(imgs[0], time.Duration(mono.Nano())+off.Monotonic, time.Duration(boot.Nano())+off.Boottime)
}

// writeClocks replaces the CRIU time namespace image img by one whose clocks read mono and
// boot (a new file: the old one may be linked elsewhere).
func writeClocks(img string, mono, boot time.Duration) error {
	if mono < 0 || boot < 0 {
		return fmt.Errorf("a restored clock would read before the host's boot (%s, %s)", mono, boot)
	}
	image, err := readImage(img, "TIMENS", &timens.TimensEntry{})
	if err != nil {
		return err
	}
	if len(image.Entries) != 1 {
		return fmt.Errorf("%s: %d entries", filepath.Base(img), len(image.Entries))
	}
	e := image.Entries[0].Message.(*timens.TimensEntry)
	e.Monotonic, e.Boottime = timespec(mono), timespec(boot)
	tmp := img + ".new"
	if err := writeImage(tmp, image); err != nil {
		return err
	}
	return os.Rename(tmp, img)
}

// timespec is d as CRIU's image gives a clock.
func timespec(d time.Duration) *timens.Timespec {
	sec, nsec := uint64(d/time.Second), uint64(d%time.Second)
	return &timens.Timespec{TvSec: &sec, TvNsec: &nsec}
}
