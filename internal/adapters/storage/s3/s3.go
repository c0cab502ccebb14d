// Package s3 is a storage.Store on an S3-compatible bucket (AWS S3, MinIO,
// versitygw, …) through minio-go. The object cid of space is the key
// [<Prefix>/]<space>/<cid>.
//
// Put spools the bytes to a temp file while computing their CID in one pass,
// so the key is known before the upload, then uploads the file under it; an
// S3 PUT (or a completed multipart upload) is atomic, so a failed Put leaves
// no object behind. Network failures, timeouts and 5xx answers are reported
// as storage.ErrUnavailable, missing keys as storage.ErrNotFound.
package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/agentplane/agentplane/internal/adapters/cid"
	"github.com/agentplane/agentplane/internal/adapters/storage"
)

// Config configures a Store. Zero durations and counts take the defaults
// given on each field.
type Config struct {
	// Endpoint is host[:port] of the S3 API, without scheme.
	Endpoint string
	// Bucket must exist.
	Bucket string
	// AccessKey and SecretKey are static credentials.
	AccessKey string
	SecretKey string
	// Region is the bucket's region; default "us-east-1".
	Region string
	// UseSSL selects https.
	UseSSL bool
	// Prefix is an optional key prefix ("a/b", validated like a space) under
	// which all spaces live.
	Prefix string
	// PathStyle forces path-style requests (endpoint/bucket/key); otherwise
	// minio-go decides (virtual-host style for AWS, path style elsewhere).
	PathStyle bool
	// TempDir is where Put spools uploads; default os.TempDir().
	TempDir string
	// DialTimeout bounds connecting to the endpoint; default 5s.
	DialTimeout time.Duration
	// ResponseTimeout bounds the wait for response headers once a request
	// is sent; default 30s.
	ResponseTimeout time.Duration
	// OpTimeout bounds Stat, Delete, List and the start of Get (not the
	// reading of the body or an upload); default 60s.
	OpTimeout time.Duration
	// Retries is how many times a request failing with a network error or a
	// 5xx is retried (with a short backoff); default 2, negative for none.
	Retries int
}

// Store is a storage.Store on an S3 bucket. Create it with New.
type Store struct {
	cfg    Config
	client *minio.Client
}

var _ storage.Store = (*Store)(nil)

// New returns a Store for cfg. It does not contact the endpoint.
func New(cfg Config) (*Store, error) {
	if cfg.Endpoint == "" || cfg.Bucket == "" {
		return nil, errors.New("s3 storage: endpoint and bucket are required")
	}
	if strings.Contains(cfg.Endpoint, "://") {
		return nil, fmt.Errorf("s3 storage: endpoint %q must be host[:port] without a scheme (set UseSSL for https)", cfg.Endpoint)
	}
	cfg.Prefix = strings.Trim(cfg.Prefix, "/")
	if cfg.Prefix != "" {
		if err := storage.ValidateSpace(cfg.Prefix); err != nil {
			return nil, fmt.Errorf("s3 storage: prefix: %w", err)
		}
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.TempDir == "" {
		cfg.TempDir = os.TempDir()
	}
	cfg.DialTimeout = orDefault(cfg.DialTimeout, 5*time.Second)
	cfg.ResponseTimeout = orDefault(cfg.ResponseTimeout, 30*time.Second)
	cfg.OpTimeout = orDefault(cfg.OpTimeout, 60*time.Second)
	switch {
	case cfg.Retries == 0:
		cfg.Retries = 2
	case cfg.Retries < 0:
		cfg.Retries = 0
	}

	tr, err := minio.DefaultTransport(cfg.UseSSL)
	if err != nil {
		return nil, fmt.Errorf("s3 storage: %w", err)
	}
	tr.DialContext = (&net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}).DialContext
	tr.ResponseHeaderTimeout = cfg.ResponseTimeout
	tr.TLSHandshakeTimeout = cfg.DialTimeout
	tr.ExpectContinueTimeout = time.Second

	lookup := minio.BucketLookupAuto
	if cfg.PathStyle {
		lookup = minio.BucketLookupPath
	}
	client, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:        credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure:       cfg.UseSSL,
		Region:       cfg.Region,
		Transport:    tr,
		BucketLookup: lookup,
		MaxRetries:   cfg.Retries + 1, // minio-go counts attempts
	})
	if err != nil {
		return nil, fmt.Errorf("s3 storage: %w", err)
	}
	return &Store{cfg: cfg, client: client}, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Client returns the underlying minio client (for tests and tooling).
func (s *Store) Client() *minio.Client { return s.client }

// dirKey is the key prefix of a space, ending in "/".
func (s *Store) dirKey(space string) (string, error) {
	if err := storage.ValidateSpace(space); err != nil {
		return "", err
	}
	if s.cfg.Prefix == "" {
		return space + "/", nil
	}
	return s.cfg.Prefix + "/" + space + "/", nil
}

func (s *Store) objectKey(space, c string) (key, canonical string, err error) {
	dir, err := s.dirKey(space)
	if err != nil {
		return "", "", err
	}
	canonical, err = storage.CanonicalCID(c)
	if err != nil {
		return "", "", err
	}
	return dir + canonical, canonical, nil
}

// Put implements storage.Store.
func (s *Store) Put(ctx context.Context, space string, r io.Reader) (storage.Object, error) {
	dir, err := s.dirKey(space)
	if err != nil {
		return storage.Object{}, err
	}
	tmp, err := os.CreateTemp(s.cfg.TempDir, "agentplane-s3-put-*")
	if err != nil {
		return storage.Object{}, storage.Unavailable("put: spool", err)
	}
	defer func() {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
	}()

	src := storage.NewSourceReader(ctx, r)
	c, n, err := cid.Compute(io.TeeReader(src, tmp))
	if err != nil {
		return storage.Object{}, src.SourceError("put: spool", err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return storage.Object{}, storage.Unavailable("put: spool", err)
	}
	if err := ctx.Err(); err != nil {
		return storage.Object{}, err
	}
	obj := storage.Object{CID: c.String(), Size: n}
	key := dir + obj.CID

	// Idempotence without a second upload: same key means same bytes.
	if got, err := s.stat(ctx, space, key, obj.CID); err == nil && got.Size == n {
		return obj, nil
	} else if err != nil && !errors.Is(err, storage.ErrNotFound) {
		return storage.Object{}, err
	}
	_, err = s.client.PutObject(ctx, s.cfg.Bucket, key, tmp, n, minio.PutObjectOptions{
		ContentType: "application/octet-stream",
	})
	if err != nil {
		return storage.Object{}, s.mapErr(ctx, "put", space, obj.CID, err)
	}
	return obj, nil
}

// Get implements storage.Store. Read errors of the returned body (the
// connection dropping mid-way) match storage.ErrUnavailable.
func (s *Store) Get(ctx context.Context, space, c string) (io.ReadCloser, storage.Object, error) {
	key, canonical, err := s.objectKey(space, c)
	if err != nil {
		return nil, storage.Object{}, err
	}
	// The request starts lazily; Stat sends it and waits for the headers.
	o, err := s.client.GetObject(ctx, s.cfg.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return nil, storage.Object{}, s.mapErr(ctx, "get", space, canonical, err)
	}
	info, err := statWithin(ctx, s.cfg.OpTimeout, o)
	if err != nil {
		_ = o.Close()
		return nil, storage.Object{}, s.mapErr(ctx, "get", space, canonical, err)
	}
	return &body{o: o, ctx: ctx}, storage.Object{CID: canonical, Size: info.Size}, nil
}

// statWithin runs o.Stat, giving up after d (the object keeps the caller's
// context, which must stay alive while the body is read).
func statWithin(ctx context.Context, d time.Duration, o *minio.Object) (minio.ObjectInfo, error) {
	type result struct {
		info minio.ObjectInfo
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		info, err := o.Stat()
		ch <- result{info, err}
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.info, r.err
	case <-t.C:
		return minio.ObjectInfo{}, fmt.Errorf("no answer within %v: %w", d, context.DeadlineExceeded)
	case <-ctx.Done():
		return minio.ObjectInfo{}, ctx.Err()
	}
}

// body maps read errors of a Get to storage.ErrUnavailable.
type body struct {
	o   *minio.Object
	ctx context.Context
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.o.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		if cerr := b.ctx.Err(); cerr != nil {
			return n, cerr
		}
		return n, storage.Unavailable("get: read", err)
	}
	return n, err
}

func (b *body) Close() error { return b.o.Close() }

// Stat implements storage.Store.
func (s *Store) Stat(ctx context.Context, space, c string) (storage.Object, error) {
	key, canonical, err := s.objectKey(space, c)
	if err != nil {
		return storage.Object{}, err
	}
	return s.stat(ctx, space, key, canonical)
}

func (s *Store) stat(ctx context.Context, space, key, canonical string) (storage.Object, error) {
	opCtx, cancel := context.WithTimeout(ctx, s.cfg.OpTimeout)
	defer cancel()
	info, err := s.client.StatObject(opCtx, s.cfg.Bucket, key, minio.StatObjectOptions{})
	if err != nil {
		return storage.Object{}, s.mapErr(ctx, "stat", space, canonical, err)
	}
	return storage.Object{CID: canonical, Size: info.Size}, nil
}

// Delete implements storage.Store.
func (s *Store) Delete(ctx context.Context, space, c string) error {
	key, canonical, err := s.objectKey(space, c)
	if err != nil {
		return err
	}
	opCtx, cancel := context.WithTimeout(ctx, s.cfg.OpTimeout)
	defer cancel()
	err = s.client.RemoveObject(opCtx, s.cfg.Bucket, key, minio.RemoveObjectOptions{})
	if err = s.mapErr(ctx, "delete", space, canonical, err); errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	return err
}

// List implements storage.Store.
func (s *Store) List(ctx context.Context, space string) ([]storage.Object, error) {
	dir, err := s.dirKey(space)
	if err != nil {
		return nil, err
	}
	opCtx, cancel := context.WithTimeout(ctx, s.cfg.OpTimeout)
	defer cancel() // also stops the listing goroutine on early return
	objs := []storage.Object{}
	for o := range s.client.ListObjects(opCtx, s.cfg.Bucket, minio.ListObjectsOptions{Prefix: dir}) {
		if o.Err != nil {
			return nil, s.mapErr(ctx, "list", space, "", o.Err)
		}
		name := strings.TrimPrefix(o.Key, dir)
		if strings.Contains(name, "/") || !cid.Valid(name) {
			continue // a nested space or a stray key
		}
		objs = append(objs, storage.Object{CID: name, Size: o.Size})
	}
	slices.SortFunc(objs, func(a, b storage.Object) int { return strings.Compare(a.CID, b.CID) })
	return objs, nil
}

// mapErr classifies an error of the S3 client.
func (s *Store) mapErr(ctx context.Context, op, space, c string, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		// The caller gave up; that is not the backend's fault.
		return fmt.Errorf("storage: s3 %s: %w", op, cerr)
	}
	var er minio.ErrorResponse
	if errors.As(err, &er) {
		switch {
		case er.Code == minio.NoSuchKey || er.Code == "NotFound":
			return storage.NotFound(space, c, err)
		case er.StatusCode >= 500 || er.StatusCode == http.StatusTooManyRequests:
			return storage.Unavailable("s3 "+op, err)
		case er.Code == minio.NoSuchBucket:
			// Misconfigured or not yet created: the service cannot work.
			return storage.Unavailable("s3 "+op+": bucket "+s.cfg.Bucket, err)
		case er.StatusCode == 0 && er.Code == "":
			// No HTTP answer at all.
			return storage.Unavailable("s3 "+op, err)
		}
		return fmt.Errorf("storage: s3 %s: %w", op, err)
	}
	// Anything else is the transport failing: refused or reset connections,
	// DNS, timeouts, truncated answers.
	return storage.Unavailable("s3 "+op, err)
}

// Backend names the store's kind in metrics.
func (s *Store) Backend() string { return "s3" }
