package ops

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/adapters/storage"
	"github.com/agentplane/agentplane/internal/rules/admission"
)

// File messages.
const (
	MsgFileNotFound     = "File not found"
	MsgInvalidCID       = "Invalid CID"
	MsgInvalidNetwork   = "Network must be public or private"
	MsgInvalidKeyValues = "keyvalues must be a JSON object of strings"
	MsgStorageMissing   = "Storage not configured"
	MsgInvalidPageToken = "Invalid pageToken"
	// DateLayoutMillis is how a file's creation date reads (the hosted API's format).
	DateLayoutMillis = "2006-01-02T15:04:05.000Z"
	// maxKeyValuesBytes bounds an upload's keyvalues (JSON text), which its File object holds.
	maxKeyValuesBytes = 64 << 10
)

// FileObjectName is the File's object name for (network, cid): a re-upload of the same bytes
// finds the same object, and the API server keeps it unique.
func FileObjectName(network agentsv1.Network, cid string) string { return string(network) + "-" + cid }

// filesSpace is the storage key space of a workspace's network.
func filesSpace(namespace string, network agentsv1.Network) string {
	return namespace + "/" + string(network)
}

// ParseNetwork accepts the two networks of a route's path; anything else is a path that does
// not exist (NotFound).
func ParseNetwork(s string) (agentsv1.Network, error) {
	switch agentsv1.Network(s) {
	case agentsv1.NetworkPublic, agentsv1.NetworkPrivate:
		return agentsv1.Network(s), nil
	}
	return "", Fail(NotFound, MsgNotFound)
}

// StorageError classifies a storage failure: unreachable Unavailable, a bad CID Invalid, a
// missing object NotFound.
func StorageError(err error) error {
	switch {
	case errors.Is(err, storage.ErrUnavailable):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	case errors.Is(err, storage.ErrInvalid):
		return Because(Invalid, MsgInvalidCID, err)
	case errors.Is(err, storage.ErrNotFound):
		return Because(NotFound, MsgFileNotFound, err)
	}
	return err
}

// CheckFiles fails Unavailable `Storage not configured` when no file store is set: a door
// may ask before it reads an upload's body.
func (o *Ops) CheckFiles() error {
	_, err := o.filesStore()
	return err
}

func (o *Ops) filesStore() (storage.Store, error) {
	if o.d.Files == nil {
		return nil, Fail(Unavailable, MsgStorageMissing)
	}
	return o.d.Files, nil
}

// NewFile is an upload: its bytes, what the client says of them, and where they go.
type NewFile struct {
	// Network is "public" or "private" ("": public).
	Network string
	// Name is the file's name (truncated to 1,024 bytes).
	Name string
	// KeyValues is the JSON object of strings the client attached ("": none).
	KeyValues string
	// Content is the bytes, Size their length; MimeType is what the client said
	// ("" or application/octet-stream: sniffed from the first 512 bytes).
	Content  io.ReadSeeker
	Size     int64
	MimeType string
}

// validate checks the upload's fields and returns its network and key-values.
func (n NewFile) validate() (agentsv1.Network, map[string]string, error) {
	network := agentsv1.NetworkPublic
	if n.Network != "" {
		if network = agentsv1.Network(n.Network); network != agentsv1.NetworkPublic && network != agentsv1.NetworkPrivate {
			return "", nil, Fail(Invalid, MsgInvalidNetwork)
		}
	}
	var keyvalues map[string]string
	if n.KeyValues != "" {
		if len(n.KeyValues) > maxKeyValuesBytes {
			// Stored in the File object: beyond this it would not fit in the API server.
			return "", nil, Fail(Invalid, MsgInvalidKeyValues)
		}
		if err := json.Unmarshal([]byte(n.KeyValues), &keyvalues); err != nil {
			return "", nil, Because(Invalid, MsgInvalidKeyValues, err)
		}
	}
	return network, keyvalues, nil
}

// UploadFile stores the bytes by CID on their network and records their File. Room for them
// is reserved in the workspace's files quota before they are stored, settled once the File
// is recorded, released when nothing new was stored. The same bytes on the same network
// again are the same File: the upload is idempotent, keeps the first date and holds no more
// room.
func (o *Ops) UploadFile(ctx context.Context, t Scope, n NewFile) (*agentsv1.File, error) {
	store, err := o.filesStore()
	if err != nil {
		return nil, err
	}
	network, keyvalues, err := n.validate()
	if err != nil {
		return nil, err
	}
	res, err := o.ReserveStorage(ctx, t.Namespace, agentsv1.StorageFiles, n.Size)
	if err != nil {
		return nil, err
	}
	obj, mimeType, err := putContent(ctx, store, filesSpace(t.Namespace, network), n)
	if err != nil {
		res.Release()
		return nil, err
	}
	f := &agentsv1.File{
		ObjectMeta: metav1.ObjectMeta{
			Name: FileObjectName(network, obj.CID), Namespace: t.Namespace, Annotations: res.Annotations(),
		},
		Spec: agentsv1.FileSpec{
			Network: network, CID: obj.CID, Name: truncate(n.Name, 1024), Size: obj.Size, MimeType: truncate(mimeType, 255),
			CreatedAt: o.d.Now().UTC().Format(DateLayoutMillis), KeyValues: keyvalues,
		},
	}
	f.Spec.ID = f.Name
	if err := o.d.Client.Create(ctx, f); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			if admission.Refused(err) {
				res.Release()
			}
			return nil, err
		}
		res.Release()
		if err := o.d.APIReader.Get(ctx, client.ObjectKeyFromObject(f), f); err != nil {
			return nil, err
		}
		return f, nil
	}
	res.Settle(obj.Size)
	return f, nil
}

// putContent stores the upload's bytes and returns their object and MIME type.
func putContent(ctx context.Context, store storage.Store, space string, n NewFile) (storage.Object, string, error) {
	mimeType := n.MimeType
	if mimeType == "" || mimeType == "application/octet-stream" {
		head := make([]byte, 512)
		got, _ := io.ReadFull(n.Content, head)
		mimeType = http.DetectContentType(head[:got])
		if _, err := n.Content.Seek(0, io.SeekStart); err != nil {
			return storage.Object{}, "", err
		}
	}
	obj, err := store.Put(ctx, space, n.Content)
	if err != nil {
		return storage.Object{}, "", StorageError(err)
	}
	return obj, mimeType, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// FileQuery are the hosted API's list filters and paging.
type FileQuery struct {
	// CID, MimeType match exactly; Name is a substring; KeyValues must all match.
	CID, Name, MimeType string
	KeyValues           map[string]string
	// Ascending orders by creation date, oldest first (default newest first).
	Ascending bool
	// Limit is the page size (<= 0: 10; at most 1,000); PageToken continues a listing.
	Limit     int
	PageToken string
}

// Files lists a page of the workspace's files on network that match q, and the token of the
// next page ("" on the last).
func (o *Ops) Files(ctx context.Context, t Scope, network agentsv1.Network, q FileQuery) ([]agentsv1.File, string, error) {
	var list agentsv1.FileList
	if err := o.d.APIReader.List(ctx, &list, client.InNamespace(t.Namespace)); err != nil {
		return nil, "", err
	}
	files := make([]agentsv1.File, 0, len(list.Items))
	for i := range list.Items {
		if f := &list.Items[i]; f.Spec.Network == network && q.matches(f) {
			files = append(files, *f)
		}
	}
	sort.Slice(files, func(i, j int) bool {
		a, b := files[i].Spec.CreatedAt+files[i].Name, files[j].Spec.CreatedAt+files[j].Name
		if q.Ascending {
			return a < b
		}
		return a > b
	})
	limit := 10
	if q.Limit > 0 {
		limit = min(q.Limit, 1000)
	}
	offset := 0
	if q.PageToken != "" {
		raw, err := base64.RawURLEncoding.DecodeString(q.PageToken)
		if err != nil {
			return nil, "", Fail(Invalid, MsgInvalidPageToken)
		}
		if offset, err = strconv.Atoi(string(raw)); err != nil || offset < 0 {
			return nil, "", Fail(Invalid, MsgInvalidPageToken)
		}
	}
	page := files[min(offset, len(files)):]
	page = page[:min(limit, len(page))]
	next := ""
	if offset+len(page) < len(files) {
		next = base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(offset + len(page))))
	}
	return page, next, nil
}

// matches applies the filters.
func (q FileQuery) matches(f *agentsv1.File) bool {
	switch {
	case q.CID != "" && q.CID != f.Spec.CID,
		q.Name != "" && !strings.Contains(f.Spec.Name, q.Name),
		q.MimeType != "" && q.MimeType != f.Spec.MimeType:
		return false
	}
	for k, v := range q.KeyValues {
		if f.Spec.KeyValues[k] != v {
			return false
		}
	}
	return true
}

// File reads a file of the workspace on network (live).
func (o *Ops) File(ctx context.Context, t Scope, network agentsv1.Network, id string) (*agentsv1.File, error) {
	f := &agentsv1.File{}
	if err := o.d.APIReader.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: id}, f); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, Fail(NotFound, MsgFileNotFound)
		}
		return nil, err
	}
	if f.Spec.Network != network {
		return nil, Fail(NotFound, MsgFileNotFound)
	}
	return f, nil
}

// DeleteFile removes the File and its bytes (the File is the only user of its bytes: one
// File per workspace, network and CID). Only the delete that removed the File gives its
// room back.
func (o *Ops) DeleteFile(ctx context.Context, t Scope, network agentsv1.Network, id string) error {
	store, err := o.filesStore()
	if err != nil {
		return err
	}
	f, err := o.File(ctx, t, network, id)
	if err != nil {
		return err
	}
	switch err := o.d.Client.Delete(ctx, f); {
	case err == nil:
		o.FreeStorage(ctx, t.Namespace, agentsv1.StorageFiles, f.Spec.Size)
	case !apierrors.IsNotFound(err):
		return err
	}
	if err := store.Delete(ctx, filesSpace(t.Namespace, network), f.Spec.CID); err != nil {
		return StorageError(err)
	}
	return nil
}
