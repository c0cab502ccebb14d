package apiserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"sort"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/admission"
	"github.com/agentplane/agentplane/internal/storage"
)

// File messages.
const (
	msgFileNotFound     = "File not found"
	msgInvalidCID       = "Invalid CID"
	msgFileRequired     = "A file is required (multipart field \"file\")"
	msgInvalidNetwork   = "Network must be public or private"
	msgInvalidKeyValues = "keyvalues must be a JSON object of strings"
	msgStorageMissing   = "Storage not configured"
	// msgStorageQuota answers a write that would take the workspace over a storage quota
	// (spec.quotas): 403 like `Agent limit reached`, a limit of the account rather than of the
	// request (413 stays the per-request body limit).
	msgStorageQuota  = "Storage quota exceeded"
	dateLayoutMillis = "2006-01-02T15:04:05.000Z"
	// maxKeyValuesBytes bounds an upload's keyvalues (JSON text), which its File object holds.
	maxKeyValuesBytes = 64 << 10
)

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

// fileObjectName is the File's object name for (network, cid): a re-upload of the same bytes
// finds the same object, and the API server keeps it unique.
func fileObjectName(network agentsv1.Network, cid string) string { return string(network) + "-" + cid }

// filesSpace is the storage key space of a workspace's network.
func filesSpace(namespace string, network agentsv1.Network) string {
	return namespace + "/" + string(network)
}

// parseNetwork accepts the two networks; anything else means the path does not exist.
func parseNetwork(s string) (agentsv1.Network, error) {
	switch agentsv1.Network(s) {
	case agentsv1.NetworkPublic, agentsv1.NetworkPrivate:
		return agentsv1.Network(s), nil
	}
	return "", errorf(http.StatusNotFound, msgNotFound)
}

func (s *Server) filesStore() (storage.Store, error) {
	if s.opts.Files == nil {
		return nil, errorf(http.StatusServiceUnavailable, msgStorageMissing)
	}
	return s.opts.Files, nil
}

// uploadFile stores a multipart upload (fields file, network, name, keyvalues) and records it.
func (s *Server) uploadFile(r *http.Request, c *Caller) (*Response, error) {
	store, err := s.filesStore()
	if err != nil {
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
	network := agentsv1.NetworkPublic
	if v := r.FormValue("network"); v != "" {
		if network = agentsv1.Network(v); network != agentsv1.NetworkPublic && network != agentsv1.NetworkPrivate {
			return nil, errorf(http.StatusBadRequest, msgInvalidNetwork)
		}
	}
	var keyvalues map[string]string
	if v := r.FormValue("keyvalues"); v != "" {
		if len(v) > maxKeyValuesBytes {
			// Stored in the File object: beyond this it would not fit in the API server.
			return nil, errorf(http.StatusBadRequest, msgInvalidKeyValues)
		}
		if err := json.Unmarshal([]byte(v), &keyvalues); err != nil {
			return nil, withCause(http.StatusBadRequest, msgInvalidKeyValues, err)
		}
	}
	fh := headers[0]
	name := r.FormValue("name")
	if name == "" {
		name = fh.Filename
	}
	// Room for the file is reserved before its bytes are stored; the reservation is settled
	// once its File is recorded, or released when nothing new was stored.
	res, err := s.reserveStorage(r.Context(), c.Namespace, agentsv1.StorageFiles, fh.Size)
	if err != nil {
		return nil, err
	}
	obj, mimeType, err := putPart(r.Context(), store, filesSpace(c.Namespace, network), fh)
	if err != nil {
		res.release()
		return nil, err
	}
	f := &agentsv1.File{
		ObjectMeta: metav1.ObjectMeta{
			Name: fileObjectName(network, obj.CID), Namespace: c.Namespace,
			Annotations: res.annotations(),
		},
		Spec: agentsv1.FileSpec{
			Network: network, CID: obj.CID, Name: truncate(name, 1024), Size: obj.Size, MimeType: truncate(mimeType, 255),
			CreatedAt: s.opts.Now().UTC().Format(dateLayoutMillis), KeyValues: keyvalues,
		},
	}
	f.Spec.ID = f.Name
	if err := s.opts.Client.Create(r.Context(), f); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			if admission.Refused(err) {
				res.release()
			}
			return nil, err
		}
		// The same bytes on the same network: the upload is idempotent, keeps the first date
		// and holds no more room.
		res.release()
		if err := s.opts.APIReader.Get(r.Context(), client.ObjectKeyFromObject(f), f); err != nil {
			return nil, err
		}
		return ok(data(viewFile(f)))
	}
	res.settle(obj.Size)
	return ok(data(viewFile(f)))
}

// putPart stores one uploaded part and returns its object and MIME type.
func putPart(ctx context.Context, store storage.Store, space string, fh *multipart.FileHeader) (storage.Object, string, error) {
	part, err := fh.Open()
	if err != nil {
		return storage.Object{}, "", err
	}
	defer part.Close()
	mimeType := fh.Header.Get("Content-Type")
	if mimeType == "" || mimeType == "application/octet-stream" {
		head := make([]byte, 512)
		n, _ := io.ReadFull(part, head)
		mimeType = http.DetectContentType(head[:n])
		if _, err := part.Seek(0, io.SeekStart); err != nil {
			return storage.Object{}, "", err
		}
	}
	obj, err := store.Put(ctx, space, part)
	if err != nil {
		return storage.Object{}, "", storageError(err)
	}
	return obj, mimeType, nil
}

// storageError maps storage failures: unreachable 503, bad input 400.
func storageError(err error) error {
	switch {
	case errors.Is(err, storage.ErrUnavailable):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	case errors.Is(err, storage.ErrInvalid):
		return withCause(http.StatusBadRequest, msgInvalidCID, err)
	case errors.Is(err, storage.ErrNotFound):
		return withCause(http.StatusNotFound, msgFileNotFound, err)
	}
	return err
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// listFiles answers GET /v3/files/{network} with the hosted API's filters and paging.
func (s *Server) listFiles(r *http.Request, c *Caller) (*Response, error) {
	network, err := parseNetwork(r.PathValue("network"))
	if err != nil {
		return nil, err
	}
	var list agentsv1.FileList
	if err := s.opts.APIReader.List(r.Context(), &list, client.InNamespace(c.Namespace)); err != nil {
		return nil, err
	}
	q := r.URL.Query()
	files := make([]*agentsv1.File, 0, len(list.Items))
	for i := range list.Items {
		if f := &list.Items[i]; f.Spec.Network == network && fileMatches(f, q) {
			files = append(files, f)
		}
	}
	asc := strings.EqualFold(q.Get("order"), "ASC")
	sort.Slice(files, func(i, j int) bool {
		a, b := files[i].Spec.CreatedAt+files[i].Name, files[j].Spec.CreatedAt+files[j].Name
		if asc {
			return a < b
		}
		return a > b
	})
	limit := 10
	if v, err := strconv.Atoi(q.Get("limit")); err == nil && v > 0 {
		limit = min(v, 1000)
	}
	offset := 0
	if tok := q.Get("pageToken"); tok != "" {
		raw, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil {
			return nil, errorf(http.StatusBadRequest, "Invalid pageToken")
		}
		if offset, err = strconv.Atoi(string(raw)); err != nil || offset < 0 {
			return nil, errorf(http.StatusBadRequest, "Invalid pageToken")
		}
	}
	out := []fileView{}
	for i := offset; i < len(files) && len(out) < limit; i++ {
		out = append(out, viewFile(files[i]))
	}
	next := ""
	if offset+len(out) < len(files) {
		next = base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(offset + len(out))))
	}
	return ok(data(map[string]any{"files": out, "next_page_token": next}))
}

// fileMatches applies the list filters: cid, name (substring), mimeType and keyvalues[k].
func fileMatches(f *agentsv1.File, q map[string][]string) bool {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	if v := get("cid"); v != "" && v != f.Spec.CID {
		return false
	}
	if v := get("name"); v != "" && !strings.Contains(f.Spec.Name, v) {
		return false
	}
	if v := get("mimeType"); v != "" && v != f.Spec.MimeType {
		return false
	}
	for k, vs := range q {
		if key, ok := strings.CutPrefix(k, "keyvalues["); ok && strings.HasSuffix(key, "]") {
			if f.Spec.KeyValues[strings.TrimSuffix(key, "]")] != vs[0] {
				return false
			}
		}
	}
	return true
}

// fileByID reads a file of the caller's workspace on network.
func (s *Server) fileByID(ctx context.Context, c *Caller, network agentsv1.Network, id string) (*agentsv1.File, error) {
	f := &agentsv1.File{}
	if err := s.opts.APIReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: id}, f); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, errorf(http.StatusNotFound, msgFileNotFound)
		}
		return nil, err
	}
	if f.Spec.Network != network {
		return nil, errorf(http.StatusNotFound, msgFileNotFound)
	}
	return f, nil
}

func (s *Server) getFile(r *http.Request, c *Caller) (*Response, error) {
	network, err := parseNetwork(r.PathValue("network"))
	if err != nil {
		return nil, err
	}
	f, err := s.fileByID(r.Context(), c, network, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return ok(data(viewFile(f)))
}

// deleteFile removes the File and its bytes (the object is the only user of its bytes: one
// File per workspace, network and CID).
func (s *Server) deleteFile(r *http.Request, c *Caller) (*Response, error) {
	network, err := parseNetwork(r.PathValue("network"))
	if err != nil {
		return nil, err
	}
	store, err := s.filesStore()
	if err != nil {
		return nil, err
	}
	f, err := s.fileByID(r.Context(), c, network, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	switch err := s.opts.Client.Delete(r.Context(), f); {
	case err == nil:
		// Only the delete that removed the File gives its room back.
		s.freeStorage(r.Context(), c.Namespace, agentsv1.StorageFiles, f.Spec.Size)
	case !apierrors.IsNotFound(err):
		return nil, err
	}
	if err := store.Delete(r.Context(), filesSpace(c.Namespace, network), f.Spec.CID); err != nil {
		return nil, storageError(err)
	}
	return ok(data(nil))
}
