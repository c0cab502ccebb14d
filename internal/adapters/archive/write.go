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
	"path/filepath"
	"time"
)

// epoch is the modification time of every entry Write produces.
var epoch = time.Unix(0, 0)

// Write writes the tree under dir to w as a tar stream. Regular files, directories and
// symlinks (with their target as is, never followed) are archived; sockets, FIFOs and device
// files are skipped. dir itself is not an entry: names are relative to it ("a/", "a/b.txt").
// It streams: memory stays bounded by the largest directory listing, not by file sizes.
func Write(dir string, w io.Writer) error {
	info, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return fmt.Errorf("archive: %s is not a directory", dir)
	}
	tw := tar.NewWriter(w)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		return writeEntry(tw, p, filepath.ToSlash(rel), d)
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// writeEntry writes one tree entry (p on disk, name in the archive).
func writeEntry(tw *tar.Writer, p, name string, d fs.DirEntry) error {
	info, err := d.Info()
	if err != nil {
		return err
	}
	hdr := &tar.Header{
		Name:    name,
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
		target, err := os.Readlink(p)
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
		return fmt.Errorf("archive: %s: %w", name, err)
	}
	if hdr.Typeflag != tar.TypeReg || hdr.Size == 0 {
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	// Exactly the size in the header: a file that grew is cut, one that shrank is an error.
	if _, err := io.CopyN(tw, f, hdr.Size); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("archive: %s shrank while it was archived", name)
		}
		return fmt.Errorf("archive: %s: %w", name, err)
	}
	return nil
}
