// Package images assembles the local cluster's container images from files, without a
// Docker engine: the OpenClaw gateway image from the pinned npm engine and the host's
// glibc tools, and the pod sandbox (pause) image. Images are written as tarballs with
// go-containerregistry and imported into containerd; each is rebuilt only when its inputs
// change.
package images

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"time"
)

// entry is one file of a layer: a copy of a host file, literal content, a directory or a
// symlink, at path Path inside the image.
type entry struct {
	Path     string
	Mode     int64
	Src      string // host file to copy
	Data     []byte // literal content (when Src is empty)
	Link     string // symlink target
	Dir      bool
	UID, GID int
}

// tree is the files of a layer, keyed by their path in the image.
type tree map[string]entry

// dir adds a directory (and its parents).
func (t tree) dir(p string, mode int64, uid, gid int) {
	p = path.Clean("/" + p)
	for q := path.Dir(p); q != "/"; q = path.Dir(q) {
		if _, ok := t[q]; !ok {
			t[q] = entry{Path: q, Mode: 0o755, Dir: true}
		}
	}
	t[p] = entry{Path: p, Mode: mode, Dir: true, UID: uid, GID: gid}
}

// add adds e and its parent directories.
func (t tree) add(e entry) {
	e.Path = path.Clean("/" + e.Path)
	if d := path.Dir(e.Path); d != "/" {
		if _, ok := t[d]; !ok {
			t.dir(d, 0o755, 0, 0)
		}
	}
	t[e.Path] = e
}

// copyFile adds the host file src at dst, following symlinks (the image gets the file).
func (t tree) copyFile(src, dst string) error {
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	t.add(entry{Path: dst, Src: src, Mode: int64(st.Mode().Perm())})
	return nil
}

// copyDir adds the host directory src at dst, keeping symlinks inside it as they are.
func (t tree) copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := path.Join(dst, filepath.ToSlash(rel))
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			t.dir(target, int64(info.Mode().Perm()), 0, 0)
		case info.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			t.add(entry{Path: target, Link: link, Mode: 0o777})
		case info.Mode().IsRegular():
			t.add(entry{Path: target, Src: p, Mode: int64(info.Mode().Perm())})
		}
		return nil
	})
}

// epoch is the modification time of every file: the same inputs give the same layer digest.
var epoch = time.Unix(0, 0)

// writeTar writes t as an uncompressed tar, parents before children, in a stable order.
func (t tree) writeTar(w io.Writer) error {
	paths := make([]string, 0, len(t))
	for p := range t {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	tw := tar.NewWriter(w)
	for _, p := range paths {
		e := t[p]
		h := &tar.Header{Name: e.Path[1:], Mode: e.Mode, Uid: e.UID, Gid: e.GID, ModTime: epoch, Format: tar.FormatPAX}
		switch {
		case e.Dir:
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		case e.Link != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.Link
		default:
			h.Typeflag = tar.TypeReg
		}
		if e.Src == "" || e.Dir || e.Link != "" {
			h.Size = int64(len(e.Data))
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			if _, err := tw.Write(e.Data); err != nil {
				return err
			}
			continue
		}
		if err := copyInto(tw, h, e.Src); err != nil {
			return err
		}
	}
	return tw.Close()
}

func copyInto(tw *tar.Writer, h *tar.Header, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	h.Size = st.Size()
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	if _, err := io.Copy(tw, f); err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return nil
}
