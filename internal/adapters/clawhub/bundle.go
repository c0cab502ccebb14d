package clawhub

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strings"
)

// SkillFile is the file every bundle must have at its root.
const SkillFile = "SKILL.md"

// Default bundle limits.
const (
	DefaultMaxFiles        = 1000
	DefaultMaxUnpackedSize = 50 << 20
	// maxEntries bounds the central directory (files and directories together).
	maxEntriesPerFile = 4
	maxPathBytes      = 1024
	maxSegmentBytes   = 255
	maxDepth          = 32
)

// ErrInvalidBundle: the bundle is not a safe, well-formed skill bundle (see BundleError).
var ErrInvalidBundle = errors.New("clawhub: invalid skill bundle")

// BundleError says why a bundle was refused. It matches ErrInvalidBundle.
type BundleError struct {
	// Reason is a short, client-safe explanation ("entry \"../x\" escapes the bundle").
	Reason string
}

func (e *BundleError) Error() string { return "invalid skill bundle: " + e.Reason }

// Is makes errors.Is(err, ErrInvalidBundle) true.
func (e *BundleError) Is(target error) bool { return target == ErrInvalidBundle }

func invalid(format string, args ...any) error {
	return &BundleError{Reason: fmt.Sprintf(format, args...)}
}

// File is one regular file of a bundle.
type File struct {
	// Path is relative to the skill's directory, "/"-separated, clean (no "..", no leading "/").
	Path string
	Data []byte
}

// Bundle is a checked skill bundle, its files relative to the skill's directory.
type Bundle struct {
	// Files are sorted by path; SKILL.md is among them.
	Files []File
	// Size is the total uncompressed size.
	Size int64
	// StrippedPrefix is the single top-level directory removed from every path ("" if none).
	StrippedPrefix string
}

// SkillMD returns the content of SKILL.md.
func (b Bundle) SkillMD() []byte {
	for _, f := range b.Files {
		if f.Path == SkillFile {
			return f.Data
		}
	}
	return nil
}

// Limits bound what CheckBundle accepts.
type Limits struct {
	// MaxFiles is the most regular files a bundle may have.
	MaxFiles int
	// MaxUnpackedSize is the most bytes its files may hold together, counted while
	// decompressing (declared sizes are not trusted).
	MaxUnpackedSize int64
}

// DefaultLimits are the limits of CheckBundle.
var DefaultLimits = Limits{MaxFiles: DefaultMaxFiles, MaxUnpackedSize: DefaultMaxUnpackedSize}

// CheckBundle checks zip bytes with DefaultLimits (see Limits.Check).
func CheckBundle(zipBytes []byte) (Bundle, error) { return DefaultLimits.Check(zipBytes) }

// Check verifies that zipBytes is a skill bundle safe to unpack and returns its files:
//   - a valid zip whose files decompress with matching checksums;
//   - no absolute paths, "..", empty or "." segments, backslashes or NUL in names (zip-slip);
//   - only regular files and directories: symlinks and other special entries are refused;
//   - at most MaxFiles files and MaxUnpackedSize bytes in total (zip bombs);
//   - no two entries for one path, no file that is also a directory;
//   - SKILL.md at the root, or inside a single top-level directory, which is then stripped.
//
// macOS metadata (`__MACOSX/`) is ignored. Every failure is a *BundleError.
func (l Limits) Check(zipBytes []byte) (Bundle, error) {
	zr, err := zip.NewReader(bytes.NewReader(zipBytes), int64(len(zipBytes)))
	if errors.Is(err, zip.ErrInsecurePath) {
		return Bundle{}, invalid("entry with an unsafe path")
	}
	if err != nil {
		return Bundle{}, invalid("not a zip archive")
	}
	if len(zr.File) > l.MaxFiles*maxEntriesPerFile {
		return Bundle{}, invalid("more than %d files", l.MaxFiles)
	}
	var (
		files    []File
		total    int64
		declared uint64
		entries  []*zip.File
	)
	for _, f := range zr.File {
		if err := checkName(f.Name); err != nil {
			return Bundle{}, err
		}
		if f.Name == "__MACOSX" || strings.HasPrefix(f.Name, "__MACOSX/") {
			continue
		}
		mode := f.Mode()
		switch {
		case mode&fs.ModeSymlink != 0:
			return Bundle{}, invalid("entry %q is a symlink", f.Name)
		case mode.IsDir() || strings.HasSuffix(f.Name, "/"):
			if f.UncompressedSize64 > 0 || !strings.HasSuffix(f.Name, "/") {
				return Bundle{}, invalid("entry %q is a malformed directory", f.Name)
			}
			continue
		case !mode.IsRegular():
			return Bundle{}, invalid("entry %q is not a regular file", f.Name)
		}
		declared += f.UncompressedSize64
		if declared > uint64(l.MaxUnpackedSize) {
			return Bundle{}, invalid("unpacked size over %d bytes", l.MaxUnpackedSize)
		}
		entries = append(entries, f)
	}
	if len(entries) > l.MaxFiles {
		return Bundle{}, invalid("more than %d files", l.MaxFiles)
	}
	for _, f := range entries {
		data, err := readEntry(f, l.MaxUnpackedSize-total)
		if err != nil {
			if errors.Is(err, errBudget) {
				return Bundle{}, invalid("unpacked size over %d bytes", l.MaxUnpackedSize)
			}
			return Bundle{}, invalid("entry %q is corrupt or uses an unsupported compression", f.Name)
		}
		total += int64(len(data))
		files = append(files, File{Path: f.Name, Data: data})
	}
	prefix, err := skillRoot(files)
	if err != nil {
		return Bundle{}, err
	}
	for i := range files {
		files[i].Path = strings.TrimPrefix(files[i].Path, prefix)
	}
	if err := checkTree(files); err != nil {
		return Bundle{}, err
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return Bundle{Files: files, Size: total, StrippedPrefix: strings.TrimSuffix(prefix, "/")}, nil
}

// checkName refuses names that could land outside the skill's directory.
func checkName(name string) error {
	switch {
	case name == "":
		return invalid("entry with an empty name")
	case len(name) > maxPathBytes:
		return invalid("entry name longer than %d bytes", maxPathBytes)
	case strings.ContainsAny(name, "\\\x00"):
		return invalid("entry %q has a backslash or NUL in its name", name)
	case strings.HasPrefix(name, "/"):
		return invalid("entry %q has an absolute path", name)
	case len(name) >= 2 && name[1] == ':':
		return invalid("entry %q has a drive letter", name)
	}
	segs := strings.Split(strings.TrimSuffix(name, "/"), "/")
	if len(segs) > maxDepth {
		return invalid("entry %q is nested deeper than %d levels", name, maxDepth)
	}
	for _, seg := range segs {
		switch {
		case seg == "..":
			return invalid("entry %q escapes the bundle", name)
		case seg == "" || seg == ".":
			return invalid("entry %q is not a clean path", name)
		case len(seg) > maxSegmentBytes:
			return invalid("entry %q has a name segment longer than %d bytes", name, maxSegmentBytes)
		}
	}
	return nil
}

// errBudget: an entry decompressed past the remaining size budget.
var errBudget = errors.New("size budget exceeded")

// readEntry decompresses one entry, reading at most budget bytes (the declared size is not
// trusted). Reading to EOF makes archive/zip verify the checksum.
func readEntry(f *zip.File, budget int64) ([]byte, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, budget+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > budget {
		return nil, errBudget
	}
	return data, nil
}

// skillRoot finds where SKILL.md is: "" at the root, or "dir/" when every file sits in the
// single top-level directory dir and dir/SKILL.md exists.
func skillRoot(files []File) (string, error) {
	top := ""
	for _, f := range files {
		if f.Path == SkillFile {
			return "", nil
		}
		dir, _, nested := strings.Cut(f.Path, "/")
		switch {
		case !nested:
			top = "\x00" // a file at the root: no single top-level directory
		case top == "":
			top = dir
		case top != dir:
			top = "\x00"
		}
	}
	if top != "" && top != "\x00" {
		for _, f := range files {
			if f.Path == top+"/"+SkillFile {
				return top + "/", nil
			}
		}
	}
	return "", invalid("%s missing at the bundle root", SkillFile)
}

// checkTree refuses two entries for one path and a path that is both a file and a directory.
func checkTree(files []File) error {
	seen := make(map[string]bool, len(files))
	for _, f := range files {
		if seen[f.Path] {
			return invalid("duplicate entry %q", f.Path)
		}
		seen[f.Path] = true
	}
	for _, f := range files {
		for dir := f.Path; ; {
			i := strings.LastIndexByte(dir, '/')
			if i < 0 {
				break
			}
			dir = dir[:i]
			if seen[dir] {
				return invalid("entry %q is both a file and a directory", dir)
			}
		}
	}
	return nil
}
