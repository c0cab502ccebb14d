package local

import (
	"os"
	"path/filepath"
	"testing"
)

// TestInitExit: how a sandbox's gateway ended is read from the last line its init (tini -v)
// wrote to the log, and only from that line.
func TestInitExit(t *testing.T) {
	for _, tc := range []struct {
		name, log string
		code      int
		desc      string
		ok        bool
	}{
		{"an exit status", "[gateway] ready\n[INFO  tini (1)] Main child exited normally (with status '78')\n", 78, "exit code 78", true},
		{"a signal", "[INFO  tini (1)] Spawned child process 'node' with pid '2'\n[INFO  tini (1)] Main child exited with signal (with signal 'Segmentation fault')\n", 139, "signal 11 (segmentation fault)", true},
		{"SIGUSR2 with no handler", "[INFO  tini (1)] Main child exited with signal (with signal 'User defined signal 2')\n", 140, "signal 12 (user defined signal 2)", true},
		{"an unknown signal name", "[INFO  tini (7)] Main child exited with signal (with signal 'Real-time signal 99')\n", -1, "signal Real-time signal 99", true},
		{"an exit line before other lines: an earlier process's", "[INFO  tini (1)] Main child exited normally (with status '0')\n[gateway] ready\n", 0, "", false},
		{"no init line", "[gateway] ready\n", 0, "", false},
		{"an empty log", "", 0, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := filepath.Join(t.TempDir(), "gateway.log")
			if err := os.WriteFile(log, []byte(tc.log), 0o600); err != nil {
				t.Fatal(err)
			}
			code, desc, ok := initExit(log)
			if code != tc.code || desc != tc.desc || ok != tc.ok {
				t.Fatalf("initExit = %d, %q, %v; want %d, %q, %v", code, desc, ok, tc.code, tc.desc, tc.ok)
			}
		})
	}
	if _, _, ok := initExit(""); ok {
		t.Fatal("no log, yet an exit")
	}
}
