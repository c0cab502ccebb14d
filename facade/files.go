package facade

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/ops"
)

// msgFileRequired answers an upload without its file part.
const msgFileRequired = "A file is required (multipart field \"file\")"

// fileView is a file as the hosted v3 API (and so the pinata SDK) shows it.
type fileView struct {
	ID            string            `json:"id"`
	Name          string            `json:"name"`
	CID           string            `json:"cid"`
	Size          int64             `json:"size"`
	NumberOfFiles int               `json:"number_of_files"`
	MimeType      string            `json:"mime_type"`
	GroupID       *string           `json:"group_id"`
	KeyValues     map[string]string `json:"keyvalues"`
	Vectorized    bool              `json:"vectorized"`
	Network       string            `json:"network"`
	CreatedAt     string            `json:"created_at"`
}

func viewFile(f *agentsv1.File) fileView {
	kv := f.Spec.KeyValues
	if kv == nil {
		kv = map[string]string{}
	}
	return fileView{
		ID: f.Name, Name: f.Spec.Name, CID: f.Spec.CID, Size: f.Spec.Size, NumberOfFiles: 1,
		MimeType: f.Spec.MimeType, KeyValues: kv, Network: string(f.Spec.Network), CreatedAt: f.Spec.CreatedAt,
	}
}

// uploadFile stores a multipart upload (fields file, network, name, keyvalues) and records it.
func (s *Server) uploadFile(r *http.Request, c *Caller) (*Response, error) {
	if err := s.ops.CheckFiles(); err != nil {
		return nil, err
	}
	// Parts beyond 1 MiB spool to temporary files, never to memory.
	if err := r.ParseMultipartForm(1 << 20); err != nil {
		var maxErr *http.MaxBytesError
		if errors.As(err, &maxErr) {
			return nil, withCause(http.StatusRequestEntityTooLarge, msgBodyTooLarge, err)
		}
		return nil, withCause(http.StatusBadRequest, "Invalid multipart body", err)
	}
	defer func() { _ = r.MultipartForm.RemoveAll() }()
	headers := r.MultipartForm.File["file"]
	if len(headers) == 0 {
		return nil, errorf(http.StatusBadRequest, msgFileRequired)
	}
	fh := headers[0]
	part, err := fh.Open()
	if err != nil {
		return nil, err
	}
	defer part.Close()
	name := r.FormValue("name")
	if name == "" {
		name = fh.Filename
	}
	f, err := s.ops.UploadFile(r.Context(), c.scope(), ops.NewFile{
		Network: r.FormValue("network"), Name: name, KeyValues: r.FormValue("keyvalues"),
		Content: part, Size: fh.Size, MimeType: fh.Header.Get("Content-Type"),
	})
	if err != nil {
		return nil, err
	}
	return ok(data(viewFile(f)))
}

// listFiles answers GET /v3/files/{network} with the hosted API's filters and paging.
func (s *Server) listFiles(r *http.Request, c *Caller) (*Response, error) {
	network, err := ops.ParseNetwork(r.PathValue("network"))
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	fq := ops.FileQuery{
		CID: q.Get("cid"), Name: q.Get("name"), MimeType: q.Get("mimeType"),
		Ascending: strings.EqualFold(q.Get("order"), "ASC"), PageToken: q.Get("pageToken"),
	}
	if v, err := strconv.Atoi(q.Get("limit")); err == nil && v > 0 {
		fq.Limit = v
	}
	for k, vs := range q {
		if key, ok := strings.CutPrefix(k, "keyvalues["); ok && strings.HasSuffix(key, "]") {
			if fq.KeyValues == nil {
				fq.KeyValues = map[string]string{}
			}
			fq.KeyValues[strings.TrimSuffix(key, "]")] = vs[0]
		}
	}
	files, next, err := s.ops.Files(r.Context(), c.scope(), network, fq)
	if err != nil {
		return nil, err
	}
	out := make([]fileView, 0, len(files))
	for i := range files {
		out = append(out, viewFile(&files[i]))
	}
	return ok(data(map[string]any{"files": out, "next_page_token": next}))
}

func (s *Server) getFile(r *http.Request, c *Caller) (*Response, error) {
	network, err := ops.ParseNetwork(r.PathValue("network"))
	if err != nil {
		return nil, err
	}
	f, err := s.ops.File(r.Context(), c.scope(), network, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return ok(data(viewFile(f)))
}

func (s *Server) deleteFile(r *http.Request, c *Caller) (*Response, error) {
	network, err := ops.ParseNetwork(r.PathValue("network"))
	if err != nil {
		return nil, err
	}
	if err := s.ops.DeleteFile(r.Context(), c.scope(), network, r.PathValue("id")); err != nil {
		return nil, err
	}
	return ok(data(nil))
}
