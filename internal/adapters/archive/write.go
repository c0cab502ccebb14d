// Package archive writes a directory tree as a deterministic tar stream and extracts such a
// stream safely.
//
// Write produces the same bytes for the same tree: entries come in path order (component by
// component, as filepath.WalkDir visits them, so a directory precedes its contents), owners are
// 0/0 without names, every mtime is the Unix epoch, modes keep the permission bits only, and
// the format is always PAX (extended records appear only where USTAR cannot hold a value, such
// as long names, so they too depend on the tree alone).
//
// Extract refuses anything that could write outside the target directory: absolute names, ".."
// components, symlinks whose target leaves the tree, entries written through a symlink, hard
// links, device files and FIFOs. It extracts into a fresh directory next to the target and
// swaps it in only when the whole stream was good, so a failed extract leaves the old content.
package archive

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"
)

// epoch is the modification time of every entry Write produces.
var epoch = time.Unix(0, 0)

// Write writes the tree under dir to w as a tar stream (WriteRoot of dir opened as a root).
func Write(dir string, w io.Writer) error {
	info, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return fmt.Errorf("archive: %s is not a directory", dir)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	return WriteRoot(root, w)
}

// WriteRoot writes the tree under root to w as a tar stream. Regular files, directories and
// symlinks (with their target as is, never followed) are archived; sockets, FIFOs and device
// files are skipped. The root itself is not an entry: names are relative to it ("a/",
// "a/b.txt"). Every entry is read through root, so a tree that changes while it is archived
// (a file swapped for a symlink) never leads outside it. It streams: memory stays bounded by
// the largest directory listing, not by file sizes.
func WriteRoot(root *os.Root, w io.Writer) error {
	fsys := root.FS()
	tw := tar.NewWriter(w)
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		return writeEntry(tw, root, p, d)
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// writeEntry writes one tree entry (p in root, the name in the archive too).
func writeEntry(tw *tar.Writer, root *os.Root, p string, d fs.DirEntry) error {
	info, err := d.Info()
	if err != nil {
		return err
	}
	hdr := &tar.Header{
		Name:    p,
		Mode:    int64(info.Mode().Perm()),
		ModTime: epoch,
		Format:  tar.FormatPAX,
	}
	switch t := info.Mode().Type(); {
	case t == 0:
		hdr.Typeflag = tar.TypeReg
		hdr.Size = info.Size()
	case t == fs.ModeDir:
		hdr.Typeflag = tar.TypeDir
		hdr.Name += "/"
	case t == fs.ModeSymlink:
		target, err := root.Readlink(p)
		if err != nil {
			return err
		}
		hdr.Typeflag = tar.TypeSymlink
		hdr.Linkname = target
	default:
		// Sockets, FIFOs, devices: not workspace content.
		return nil
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("archive: %s: %w", p, err)
	}
	if hdr.Typeflag != tar.TypeReg || hdr.Size == 0 {
		return nil
	}
	// Not through a symlink swapped in since, and never blocking on a FIFO.
	f, err := root.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	// Exactly the size in the header: a file that grew is cut, one that shrank is an error.
	if _, err := io.CopyN(tw, f, hdr.Size); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("archive: %s shrank while it was archived", p)
		}
		return fmt.Errorf("archive: %s: %w", p, err)
	}
	return nil
}
