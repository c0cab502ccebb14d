package program

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// compileCache imitates what Node's module compile cache does for a gateway of the real engine
// (OpenClaw turns it on in os.tmpdir()/node-compile-cache/openclaw/<version>/..., Node keeps
// it in a dir named after itself and the uid): the dir
// <$NODE_COMPILE_CACHE or $TMPDIR/node-compile-cache>/openclaw/<version>/v0.0.0-fakeclaw-<uid>
// is made with one mkdir (its parents with MkdirAll), where EEXIST is fine and any other error
// turns the cache off; its entry "gateway" is read at start and written at a clean exit when
// it was missing (an error there changes nothing, as in Node). What happened is in
// <state>/fake-compile-cache.json: {"dir","enabled","hit","writeError"}.
type compileCache struct {
	Dir        string `json:"dir"`
	Enabled    bool   `json:"enabled"`
	Hit        bool   `json:"hit"`
	WriteError string `json:"writeError,omitempty"`
}

const compileCacheEntry = "gateway"

func openCompileCache() *compileCache {
	base := os.Getenv("NODE_COMPILE_CACHE")
	if base == "" {
		base = filepath.Join(os.TempDir(), "node-compile-cache")
	}
	c := &compileCache{Dir: filepath.Join(base, "openclaw", version(), "v0.0.0-fakeclaw-"+strconv.Itoa(os.Getuid()))}
	if os.Getenv("NODE_DISABLE_COMPILE_CACHE") != "" {
		c.save()
		return c
	}
	_ = os.MkdirAll(filepath.Dir(c.Dir), 0o755)
	if err := os.Mkdir(c.Dir, 0o700); err == nil || errors.Is(err, fs.ErrExist) {
		c.Enabled = true
		_, err := os.Stat(filepath.Join(c.Dir, compileCacheEntry))
		c.Hit = err == nil
	}
	c.save()
	return c
}

// persist writes the entry the gateway "compiled" when the cache did not have it.
func (c *compileCache) persist() {
	if !c.Enabled || c.Hit {
		return
	}
	if err := os.WriteFile(filepath.Join(c.Dir, compileCacheEntry), []byte("code cache of "+version()+"\n"), 0o600); err != nil {
		c.WriteError = err.Error()
	}
	c.save()
}

func (c *compileCache) save() {
	_ = os.WriteFile(filepath.Join(stateDir(), "fake-compile-cache.json"), []byte(encodeJSON(c, "")+"\n"), 0o600)
}
