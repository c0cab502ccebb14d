package local

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/checkpoint-restore/go-criu/v7/crit"
	critcli "github.com/checkpoint-restore/go-criu/v7/crit/cli"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// A copy of a template runs as its agent's sandbox uid, not the template's: its image is the
// template's with every owner that is the template's uid made the agent's (the processes'
// credentials, the owners of their files' signals, the files of the sandbox's /tmp). The
// memory pages, most of the image, are the template's own files, hard-linked.

// idFields are the fields of CRIU's images that hold a uid or a gid (creds, fown, tmpfs).
var idFields = map[protoreflect.Name]bool{
	"uid": true, "euid": true, "suid": true, "fsuid": true,
	"gid": true, "egid": true, "sgid": true, "fsgid": true, "groups": true,
}

// rewriteImage makes in dst the image of src with the uid and gid from made to: each image
// file that names from rewritten, every other linked to src's (linkOrCopy).
func rewriteImage(src, dst string, from, to int) error {
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		in, out := filepath.Join(src, name), filepath.Join(dst, name)
		var changed bool
		switch {
		case strings.HasPrefix(name, "pages-") || !strings.HasSuffix(name, ".img"):
		case strings.HasSuffix(name, ".tar.gz.img"):
			changed, err = rewriteTar(in, out, from, to)
		default:
			changed, err = rewriteProtoImage(in, out, from, to)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if !changed {
			if err := linkOrCopy(in, out); err != nil {
				return err
			}
		}
	}
	return nil
}

// linkOrCopy makes dst the file src: a hard link (not a symbolic one: CRIU reads some of
// the images once it has moved into the restored sandbox's root), a copy across file systems.
func linkOrCopy(src, dst string) error {
	err := os.Link(src, dst)
	if errors.Is(err, syscall.EXDEV) {
		return copyRegular(src, dst, 0o600)
	}
	return err
}

// rewriteProtoImage writes out as the CRIU image in with the ids rewritten, when it names
// from; it reports whether it did.
func rewriteProtoImage(in, out string, from, to int) (bool, error) {
	f, err := os.Open(in)
	if err != nil {
		return false, err
	}
	defer f.Close()
	typ, err := critcli.GetEntryTypeFromImg(f)
	if err != nil {
		return false, nil // not an image of entries (raw data): kept as it is
	}
	img, err := crit.New(f, nil, "", false, false).Decode(typ)
	if err != nil {
		return false, err
	}
	changed := false
	for _, e := range img.Entries {
		if e.Message != nil && rewriteIDs(e.Message.ProtoReflect(), uint32(from), uint32(to)) {
			changed = true
		}
	}
	if !changed {
		return false, nil
	}
	return true, writeImage(out, img)
}

// rewriteIDs replaces from by to in m's id fields, in m and the messages it holds; it
// reports whether it replaced any.
func rewriteIDs(m protoreflect.Message, from, to uint32) bool {
	changed := false
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Kind() == protoreflect.MessageKind && fd.IsList():
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				changed = rewriteIDs(l.Get(i).Message(), from, to) || changed
			}
		case fd.Kind() == protoreflect.MessageKind && !fd.IsMap():
			changed = rewriteIDs(v.Message(), from, to) || changed
		case fd.Kind() == protoreflect.Uint32Kind && idFields[fd.Name()] && fd.IsList():
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				if uint32(l.Get(i).Uint()) == from {
					l.Set(i, protoreflect.ValueOfUint32(to))
					changed = true
				}
			}
		case fd.Kind() == protoreflect.Uint32Kind && idFields[fd.Name()]:
			if uint32(v.Uint()) == from {
				m.Set(fd, protoreflect.ValueOfUint32(to))
				changed = true
			}
		}
		return true
	})
	return changed
}

// rewriteTar writes out as the gzipped tar in (a tmpfs's files) with the entries owned by
// from owned by to; it reports whether any was.
func rewriteTar(in, out string, from, to int) (bool, error) {
	f, err := os.Open(in)
	if err != nil {
		return false, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return false, err
	}
	o, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return false, err
	}
	zw := gzip.NewWriter(o)
	tr, tw := tar.NewReader(zr), tar.NewWriter(zw)
	changed := false
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			o.Close()
			return false, err
		}
		if h.Uid == from {
			h.Uid, changed = to, true
		}
		if h.Gid == from {
			h.Gid, changed = to, true
		}
		if err := tw.WriteHeader(h); err != nil {
			o.Close()
			return false, err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			o.Close()
			return false, err
		}
	}
	for _, c := range []io.Closer{tw, zw, o} {
		if err := c.Close(); err != nil {
			return false, err
		}
	}
	if !changed {
		return false, os.Remove(out)
	}
	return true, nil
}
