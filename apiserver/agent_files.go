package apiserver

import (
	"errors"
	"io"
	"net/http"
	"os"
	"path"
	"strings"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/runtime"
)

// Upload messages (`File too large` is fixed by the contract).
const (
	msgFileTooLarge         = "File too large"
	msgInvalidFilename      = "Invalid filename"
	msgInvalidContent       = "Invalid contentBase64"
	msgUploadFailed         = "Upload failed"
	DefaultMaxAgentUpload   = 25 << 20
	uploadBodyOverheadBytes = 64 << 10
	maxUploadFilenameRunes  = 255
	maxUploadFilenameDepth  = 16
)

// agentUploadLimit is the largest decoded file a workspace upload takes.
func (s *Server) agentUploadLimit() int64 {
	if s.opts.MaxAgentUploadBytes > 0 {
		return s.opts.MaxAgentUploadBytes
	}
	return DefaultMaxAgentUpload
}

// cleanUploadPath turns a client filename into a path inside the workspace, or "".
func cleanUploadPath(name string) string {
	if name == "" || strings.ContainsAny(name, "\x00\\") || strings.HasPrefix(name, "/") {
		return ""
	}
	clean := path.Clean(name)
	if clean == "." || clean == ".." || strings.HasPrefix(clean, "../") || strings.Count(clean, "/") >= maxUploadFilenameDepth {
		return ""
	}
	for _, seg := range strings.Split(clean, "/") {
		if len([]rune(seg)) > maxUploadFilenameRunes {
			return ""
		}
	}
	return clean
}

// uploadAgentFile writes {filename, contentBase64} into the agent's workspace. The body is
// decoded as it streams, into a spool file, so an oversized upload is refused (413) having
// held only small buffers; the file lands atomically.
func (s *Server) uploadAgentFile(r *http.Request, c *Caller) (*Response, error) {
	spool, err := os.CreateTemp("", "agentplane-upload-*")
	if err != nil {
		return nil, err
	}
	defer func() { spool.Close(); os.Remove(spool.Name()) }()
	name, size, err := parseUpload(r.Body, spool, s.agentUploadLimit())
	var maxErr *http.MaxBytesError
	switch {
	case errors.Is(err, errUploadTooLarge), errors.As(err, &maxErr):
		return nil, withCause(http.StatusRequestEntityTooLarge, msgFileTooLarge, err)
	case errors.Is(err, errUploadFilename):
		return nil, errorf(http.StatusBadRequest, msgInvalidFilename)
	case errors.Is(err, errUploadContent):
		return nil, errorf(http.StatusBadRequest, msgInvalidContent)
	case err != nil:
		return nil, withCause(http.StatusBadRequest, msgInvalidBody, err)
	}
	rel := cleanUploadPath(name)
	if rel == "" {
		return nil, errorf(http.StatusBadRequest, msgInvalidFilename)
	}
	// The body's shape is checked (above) before the agent is looked up.
	a, err := s.getAgent(r.Context(), c, r.PathValue("agentId"))
	if err != nil {
		return nil, err
	}
	if s.opts.Runtime == nil {
		return nil, errorf(http.StatusInternalServerError, msgUploadFailed)
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	content, err := io.ReadAll(spool)
	if err != nil {
		return nil, err
	}
	// Room in the workspace's uploads quota is reserved before the file is written, settled
	// once it is, released when the write fails.
	res, err := s.reserveStorage(r.Context(), c.Namespace, agentsv1.StorageUploads, size)
	if err != nil {
		return nil, err
	}
	target := path.Join(s.opts.Engine.Layout().WorkspaceDir, rel)
	if err := s.opts.Runtime.WriteFile(r.Context(), a, target, content); err != nil {
		res.release()
		if errors.Is(err, runtime.ErrInvalidPath) {
			return nil, withCause(http.StatusBadRequest, msgInvalidFilename, err)
		}
		return nil, withMessage(msgUploadFailed, err)
	}
	s.tallyUpload(r.Context(), a, size)
	res.settle(size)
	return created(map[string]any{"path": rel, "filename": path.Base(rel), "size": size})
}
