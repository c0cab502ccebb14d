package ops

import (
	"context"
	"errors"
	"path"
	"strings"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/runtime"
)

// Messages of a file written into an agent's home.
const (
	MsgInvalidFilename = "Invalid filename"
	MsgUploadFailed    = "Upload failed"
)

// Limits of a file name written into an agent's home.
const (
	maxUploadFilenameRunes = 255
	maxUploadFilenameDepth = 16
)

// CleanUploadPath turns a client's file name into a path inside the agent's home
// directory, or "" when it would leave it (absolute, `..`, NUL or backslash, too deep, a
// segment too long).
func CleanUploadPath(name string) string {
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

// WriteAgentFile writes content to name inside the agent's home directory, atomically,
// and counts it in the workspace's uploads quota (reserved before the write, settled once it
// landed, released when it failed). It returns the file's clean relative path. The name is
// judged before the agent is looked up.
func (o *Ops) WriteAgentFile(ctx context.Context, t Scope, agentID, name string, content []byte) (string, error) {
	rel := CleanUploadPath(name)
	if rel == "" {
		return "", Fail(Invalid, MsgInvalidFilename)
	}
	a, err := o.Agent(ctx, t, agentID)
	if err != nil {
		return "", err
	}
	if o.d.Runtime == nil {
		return "", Fail(Internal, MsgUploadFailed)
	}
	size := int64(len(content))
	res, err := o.ReserveStorage(ctx, t.Namespace, agentsv1.StorageUploads, size)
	if err != nil {
		return "", err
	}
	target := path.Join(o.d.Engine.Layout().WorkspaceDir, rel)
	if err := o.d.Runtime.WriteFile(ctx, a, target, content); err != nil {
		res.Release()
		if errors.Is(err, runtime.ErrInvalidPath) {
			return "", Because(Invalid, MsgInvalidFilename, err)
		}
		if errors.Is(err, runtime.ErrNoSpace) {
			// The agent's home is full: a limit of the agent, as the workspace's quota is of
			// the account; nothing was written.
			return "", Because(Forbidden, MsgStorageQuota, err)
		}
		return "", WithMessage(MsgUploadFailed, err)
	}
	o.TallyUpload(ctx, a, size)
	res.Settle(size)
	return rel, nil
}
