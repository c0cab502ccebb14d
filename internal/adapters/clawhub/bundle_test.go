package clawhub_test

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/adapters/clawhub"
	"github.com/agentplane/agentplane/internal/adapters/clawhub/clawhubtest"
)

type entry = clawhubtest.Entry

func TestCheckBundleAcceptsRootSkill(t *testing.T) {
	z := clawhubtest.Zip(
		entry{Name: "SKILL.md", Body: clawhubtest.SkillMD("hello", "says hello")},
		entry{Name: "scripts/", Mode: fs.ModeDir | 0o755},
		entry{Name: "scripts/run.sh", Body: "echo hi\n"},
		entry{Name: "__MACOSX/._SKILL.md", Body: "junk"},
	)
	b, err := clawhub.CheckBundle(z)
	if err != nil {
		t.Fatalf("CheckBundle: %v", err)
	}
	if got := paths(b); got != "SKILL.md,scripts/run.sh" {
		t.Fatalf("files = %s", got)
	}
	if b.StrippedPrefix != "" || !strings.Contains(string(b.SkillMD()), "name: hello") {
		t.Fatalf("prefix %q, SKILL.md %q", b.StrippedPrefix, b.SkillMD())
	}
	if want := int64(len(clawhubtest.SkillMD("hello", "says hello")) + len("echo hi\n")); b.Size != want {
		t.Fatalf("size = %d, want %d", b.Size, want)
	}
}

func TestCheckBundleStripsSingleTopLevelDirectory(t *testing.T) {
	z := clawhubtest.Files("hello-1.0.0/SKILL.md", "# hi", "hello-1.0.0/ref/a.md", "a")
	b, err := clawhub.CheckBundle(z)
	if err != nil {
		t.Fatalf("CheckBundle: %v", err)
	}
	if got := paths(b); got != "SKILL.md,ref/a.md" || b.StrippedPrefix != "hello-1.0.0" {
		t.Fatalf("files = %s, prefix %q", got, b.StrippedPrefix)
	}
}

func TestCheckBundleRefuses(t *testing.T) {
	skill := entry{Name: "SKILL.md", Body: "# ok"}
	cases := []struct {
		name string
		zip  []byte
		want string
	}{
		{"not a zip", []byte("PK\x03\x04 definitely not"), "not a zip"},
		{"empty zip", clawhubtest.Zip(), "SKILL.md missing"},
		{"no SKILL.md", clawhubtest.Files("README.md", "x"), "SKILL.md missing"},
		{"SKILL.md too deep", clawhubtest.Files("a/b/SKILL.md", "x"), "SKILL.md missing"},
		{"two top-level dirs", clawhubtest.Files("a/SKILL.md", "x", "b/c.md", "y"), "SKILL.md missing"},
		{"dot-dot", clawhubtest.Zip(skill, entry{Name: "../evil.sh", Body: "x"}), "escapes"},
		{"nested dot-dot", clawhubtest.Zip(skill, entry{Name: "a/../../evil", Body: "x"}), "escapes"},
		{"absolute", clawhubtest.Zip(skill, entry{Name: "/etc/passwd", Body: "x"}), "absolute"},
		{"backslash", clawhubtest.Zip(skill, entry{Name: `..\evil`, Body: "x"}), "backslash"},
		{"drive letter", clawhubtest.Zip(skill, entry{Name: "C:/evil", Body: "x"}), "drive letter"},
		{"dot segment", clawhubtest.Zip(skill, entry{Name: "a/./b", Body: "x"}), "not a clean path"},
		{"double slash", clawhubtest.Zip(skill, entry{Name: "a//b", Body: "x"}), "not a clean path"},
		{"symlink", clawhubtest.Zip(skill, entry{Name: "link", Body: "/etc/passwd", Mode: fs.ModeSymlink | 0o777}), "symlink"},
		{"symlink SKILL.md", clawhubtest.Zip(entry{Name: "SKILL.md", Body: "/etc/shadow", Mode: fs.ModeSymlink | 0o777}), "symlink"},
		{"device", clawhubtest.Zip(skill, entry{Name: "dev", Body: "x", Mode: fs.ModeDevice | 0o644}), "not a regular file"},
		{"duplicate", clawhubtest.Zip(skill, entry{Name: "SKILL.md", Body: "again"}), "duplicate"},
		{"file and dir", clawhubtest.Zip(skill, entry{Name: "a", Body: "x"}, entry{Name: "a/b", Body: "y"}), "both a file and a directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := clawhub.CheckBundle(tc.zip)
			assertInvalid(t, err, tc.want)
		})
	}
}

func TestCheckBundleRefusesZipBombs(t *testing.T) {
	limits := clawhub.Limits{MaxFiles: 5, MaxUnpackedSize: 1 << 20}
	zeros := strings.Repeat("\x00", 2<<20)
	t.Run("one big file", func(t *testing.T) {
		z := clawhubtest.Files("SKILL.md", "# x", "zeros.bin", zeros)
		if len(z) > 64<<10 {
			t.Fatalf("the bomb should compress well, got %d bytes", len(z))
		}
		_, err := limits.Check(z)
		assertInvalid(t, err, "unpacked size over")
	})
	t.Run("many files", func(t *testing.T) {
		pairs := []string{"SKILL.md", "# x"}
		for i := 0; i < 5; i++ {
			pairs = append(pairs, "f"+string(rune('a'+i)), "x")
		}
		_, err := limits.Check(clawhubtest.Files(pairs...))
		assertInvalid(t, err, "more than 5 files")
	})
	t.Run("lying header", func(t *testing.T) {
		// A deflate stream of 2 MiB declared as 10 bytes: the declared size is not trusted.
		_, err := limits.Check(lyingZip(t, []byte(zeros), 10))
		assertInvalid(t, err, "")
	})
	t.Run("lying header within the declared budget", func(t *testing.T) {
		// Declared sizes sum below the cap, the real bytes are far over it.
		_, err := clawhub.Limits{MaxFiles: 5, MaxUnpackedSize: 100}.Check(lyingZip(t, []byte(zeros), 50))
		assertInvalid(t, err, "")
	})
	t.Run("default limits", func(t *testing.T) {
		big := strings.Repeat("\x00", clawhub.DefaultMaxUnpackedSize+1)
		_, err := clawhub.CheckBundle(clawhubtest.Files("SKILL.md", "# x", "big", big))
		assertInvalid(t, err, "unpacked size over")
	})
}

// lyingZip is a zip with SKILL.md and one deflated entry whose header declares size bytes.
func lyingZip(t *testing.T, content []byte, size uint64) []byte {
	t.Helper()
	var comp bytes.Buffer
	fw, _ := flate.NewWriter(&comp, flate.BestCompression)
	_, _ = fw.Write(content)
	_ = fw.Close()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create("SKILL.md")
	_, _ = w.Write([]byte("# x"))
	w, err := zw.CreateRaw(&zip.FileHeader{
		Name: "bomb", Method: zip.Deflate, CompressedSize64: uint64(comp.Len()), UncompressedSize64: size, CRC32: 0,
	})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write(comp.Bytes())
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func assertInvalid(t *testing.T, err error, want string) {
	t.Helper()
	if !errors.Is(err, clawhub.ErrInvalidBundle) {
		t.Fatalf("err = %v, want ErrInvalidBundle", err)
	}
	var be *clawhub.BundleError
	if !errors.As(err, &be) || !strings.Contains(be.Reason, want) {
		t.Fatalf("reason = %q, want it to contain %q", be.Reason, want)
	}
}

func paths(b clawhub.Bundle) string {
	var out []string
	for _, f := range b.Files {
		out = append(out, f.Path)
	}
	return strings.Join(out, ",")
}
