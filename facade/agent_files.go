package facade

import (
	"errors"
	"io"
	"net/http"
	"os"
	"path"

	"github.com/agentplane/agentplane/internal/ops"
)

// Upload messages (`File too large` is fixed by the contract).
const (
	msgFileTooLarge         = "File too large"
	msgInvalidContent       = "Invalid contentBase64"
	DefaultMaxAgentUpload   = 25 << 20
	uploadBodyOverheadBytes = 64 << 10
)

// agentUploadLimit is the largest decoded file a workspace upload takes.
func (s *Server) agentUploadLimit() int64 {
	if s.opts.MaxAgentUploadBytes > 0 {
		return s.opts.MaxAgentUploadBytes
	}
	return DefaultMaxAgentUpload
}

// uploadAgentFile writes {filename, contentBase64} into the agent's home. The body is
// decoded as it streams, into a spool file, so an oversized upload is refused (413) having
// held only small buffers; an accepted one is then read whole (at most agentUploadLimit, 25
// MiB by default) for the runtime's write, and the file lands atomically.
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
		return nil, errorf(http.StatusBadRequest, ops.MsgInvalidFilename)
	case errors.Is(err, errUploadContent):
		return nil, errorf(http.StatusBadRequest, msgInvalidContent)
	case err != nil:
		return nil, withCause(http.StatusBadRequest, msgInvalidBody, err)
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	content, err := io.ReadAll(spool)
	if err != nil {
		return nil, err
	}
	rel, err := s.ops.WriteAgentFile(r.Context(), c.scope(), r.PathValue("agentId"), name, content)
	if err != nil {
		return nil, err
	}
	return created(map[string]any{"path": rel, "filename": path.Base(rel), "size": size})
}
