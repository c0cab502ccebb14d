package local

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/agentplane/agentplane/internal/adapters/archive"
)

// Files in an agent dir.
const (
	homeDirName  = "home"
	logFileName  = "gateway.log"
	pidFileName  = "gateway.pid"
	stateFileNam = "state.json"
)

// state is what survives a manager restart (state.json, 0600). It holds no secret: the token
// only as a SHA-256, the attached secrets not at all.
type state struct {
	// Port the gateway listens on; kept across restarts of the gateway and of the manager.
	Port int `json:"port"`
	// PID and StartTime (clock ticks after boot, /proc/<pid>/stat) of the running gateway.
	PID       int    `json:"pid,omitempty"`
	StartTime uint64 `json:"startTime,omitempty"`
	// What the running gateway was started with.
	EngineVersion string `json:"engineVersion,omitempty"`
	EngineDir     string `json:"engineDir,omitempty"`
	ConfigHash    string `json:"configHash,omitempty"`
	RestartNonce  string `json:"restartNonce,omitempty"`
	// TokenHash is the SHA-256 of the token last written to the engine config.
	TokenHash string `json:"tokenHash,omitempty"`
	// Restarts counts crashes since the agent was provisioned.
	Restarts int32 `json:"restarts,omitempty"`
	// Stopped: the agent was asked to run no gateway.
	Stopped bool `json:"stopped,omitempty"`
	// Checkpoint: the stopped gateway was checkpointed into <agent dir>/checkpoint.
	Checkpoint bool `json:"checkpoint,omitempty"`
	// CheckpointAt is when it was checkpointed; CheckpointPacked: its pages were compressed
	// since (checkpoint_pack.go).
	CheckpointAt     time.Time `json:"checkpointAt,omitzero"`
	CheckpointPacked bool      `json:"checkpointPacked,omitempty"`
	// Home is the agent's home when it is not <agent dir>/home: the home of the warm pool
	// member the agent claimed (<StateDir>/pool/<member>/home).
	Home string `json:"home,omitempty"`
	// Template is the key of the template the agent's gateway was born from (templates.go):
	// its sandboxes show the home at templateHome and the gateway listens on templatePort in
	// its network namespace, as the template's did.
	Template string `json:"template,omitempty"`
}

// inSandbox is where the sandboxes of an agent with state st show its home ("" = at its own
// path) and the port its gateway listens on in its network namespace.
func (st state) inSandbox() (homeAt string, port int) {
	if st.Template != "" {
		return templateHome, templatePort
	}
	return "", st.Port
}

// homeOf is the home of the agent kept in dir (<StateDir>/agents/<namespace>/<name>) with
// state st: the recorded one when it is a member home of the same StateDir's pools, else
// <dir>/home.
func homeOf(dir string, st state) string {
	if st.Home != "" {
		pools := filepath.Join(filepath.Dir(filepath.Dir(filepath.Dir(dir))), poolDirName)
		if h := filepath.Clean(st.Home); filepath.Base(h) == homeDirName && filepath.Dir(filepath.Dir(h)) == pools {
			return h
		}
	}
	return filepath.Join(dir, homeDirName)
}

// readState reads dir/state.json; a missing file is the zero state.
func readState(dir string) (state, error) {
	var st state
	b, err := os.ReadFile(filepath.Join(dir, stateFileNam))
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return state{}, fmt.Errorf("%s: %w", filepath.Join(dir, stateFileNam), err)
	}
	return st, nil
}

// writeState writes dir/state.json and dir/gateway.pid atomically.
func writeState(dir string, st state) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, stateFileNam), append(b, '\n'), 0o600); err != nil {
		return err
	}
	pidFile := filepath.Join(dir, pidFileName)
	if st.PID == 0 {
		if err := os.Remove(pidFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	return writeFileAtomic(pidFile, []byte(strconv.Itoa(st.PID)+"\n"), 0o600)
}

// tokenHash is the SHA-256 of a gateway token, hex.
func tokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// writeFileAtomic writes path through a temp file in the same dir: fsync, rename, fsync dir.
func writeFileAtomic(path string, data []byte, perm fs.FileMode) error {
	dir := filepath.Dir(path)

	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	return archive.SyncDir(dir)
}
