// Package clawhub talks to a ClawHub skill registry (https://clawhub.ai or a compatible one)
// and checks the skill bundles it serves.
//
// The client uses two endpoints of the registry's v1 API, the ones `openclaw skills install`
// uses with an explicit version:
//
//	GET /api/v1/skills/{slug}                  detail: {"skill":{...}|null,"latestVersion":{"version":"1.0.0"}}
//	GET /api/v1/download?slug=&version=        the bundle, a zip with SKILL.md at its root
//
// Errors wrap ErrNotFound (unknown slug or version), ErrUnavailable (the registry did not
// answer, timed out or failed with 5xx/429), ErrTooLarge (a download over the cap, as a
// *TooLargeError), ErrInvalidSlug or ErrRegistry (any other unexpected answer).
package clawhub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Defaults of a Client.
const (
	// DefaultURL is the public registry (also openclaw's default).
	DefaultURL = "https://clawhub.ai"
	// DefaultMaxDownloadBytes caps a bundle download.
	DefaultMaxDownloadBytes = 20 << 20
	// DefaultTimeout bounds one registry request, body included.
	DefaultTimeout = 60 * time.Second
	// maxDetailBytes caps the JSON of a skill detail.
	maxDetailBytes = 1 << 20
	// maxVersionLen is the longest version accepted (Skill.spec.version allows 64).
	maxVersionLen = 64
)

var (
	// ErrNotFound: the registry has no such skill (or no such version of it).
	ErrNotFound = errors.New("clawhub: skill not found")
	// ErrUnavailable: the registry could not be reached, timed out or failed (5xx, 429).
	ErrUnavailable = errors.New("clawhub: registry unavailable")
	// ErrTooLarge: a download exceeded the size cap (see TooLargeError).
	ErrTooLarge = errors.New("clawhub: download too large")
	// ErrInvalidSlug: the slug is not one a registry can hold.
	ErrInvalidSlug = errors.New("clawhub: invalid slug")
	// ErrRegistry: the registry answered something this client does not understand.
	ErrRegistry = errors.New("clawhub: unexpected registry answer")
)

// TooLargeError is returned when a download exceeds Limit bytes. It matches ErrTooLarge.
type TooLargeError struct {
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("clawhub: download exceeds %d bytes", e.Limit)
}

// Is makes errors.Is(err, ErrTooLarge) true.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

var (
	slugRe    = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$`)
	versionRe = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z.+_-]*$`)
)

// ValidSlug reports whether slug is a well-formed skill slug (the Skill CRD's pattern, at most
// 128 characters).
func ValidSlug(slug string) bool { return len(slug) <= 128 && slugRe.MatchString(slug) }

// ValidVersion reports whether v is a well-formed version string (at most 64 characters of
// letters, digits, '.', '+', '_' and '-', starting with a letter or digit).
func ValidVersion(v string) bool { return len(v) <= maxVersionLen && versionRe.MatchString(v) }

// Client is a ClawHub registry client. The zero value is not usable; use New.
type Client struct {
	// BaseURL is the registry's root, e.g. https://clawhub.ai.
	BaseURL string
	// HTTP sends the requests (default: a client on a shared transport).
	HTTP *http.Client
	// Token, when set, is sent as a Bearer token.
	Token string
	// Timeout bounds each request, body included (DefaultTimeout).
	Timeout time.Duration
	// MaxDownloadBytes caps a bundle (DefaultMaxDownloadBytes).
	MaxDownloadBytes int64
}

// sharedHTTP keeps connections to the registry alive across Clients.
var sharedHTTP = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}

// New returns a client of the registry at baseURL ("" means DefaultURL).
func New(baseURL string) *Client {
	if baseURL == "" {
		baseURL = DefaultURL
	}
	return &Client{BaseURL: strings.TrimRight(baseURL, "/"), HTTP: sharedHTTP,
		Timeout: DefaultTimeout, MaxDownloadBytes: DefaultMaxDownloadBytes}
}

// Skill is what the registry says about a skill.
type Skill struct {
	// Slug as requested.
	Slug string
	// DisplayName is skill.displayName ("" when absent).
	DisplayName string
	// LatestVersion is latestVersion.version ("" when the registry names none).
	LatestVersion string
}

// detail is the registry's skill detail document.
type detail struct {
	Skill *struct {
		Slug        string `json:"slug"`
		DisplayName string `json:"displayName"`
	} `json:"skill"`
	LatestVersion *struct {
		Version string `json:"version"`
	} `json:"latestVersion"`
}

// Skill fetches the detail of slug. A 404 (or a null skill) is ErrNotFound.
func (c *Client) Skill(ctx context.Context, slug string) (Skill, error) {
	if !ValidSlug(slug) {
		return Skill{}, fmt.Errorf("%w: %q", ErrInvalidSlug, slug)
	}
	body, err := c.get(ctx, "/api/v1/skills/"+url.PathEscape(slug), nil, maxDetailBytes, false)
	if err != nil {
		return Skill{}, err
	}
	var d detail
	if err := json.Unmarshal(body, &d); err != nil {
		return Skill{}, fmt.Errorf("%w: skill detail is not JSON: %v", ErrRegistry, err)
	}
	if d.Skill == nil {
		return Skill{}, fmt.Errorf("%w: %s", ErrNotFound, slug)
	}
	out := Skill{Slug: slug, DisplayName: d.Skill.DisplayName}
	if d.LatestVersion != nil {
		out.LatestVersion = d.LatestVersion.Version
	}
	if out.LatestVersion != "" && !ValidVersion(out.LatestVersion) {
		return Skill{}, fmt.Errorf("%w: malformed latest version %q", ErrRegistry, out.LatestVersion)
	}
	return out, nil
}

// Download fetches the bundle (zip bytes) of slug at version. The body is streamed through a
// limit: more than MaxDownloadBytes is a *TooLargeError and nothing is returned.
func (c *Client) Download(ctx context.Context, slug, version string) ([]byte, error) {
	if !ValidSlug(slug) {
		return nil, fmt.Errorf("%w: %q", ErrInvalidSlug, slug)
	}
	q := url.Values{"slug": {slug}, "version": {version}}
	return c.get(ctx, "/api/v1/download", q, c.maxDownload(), true)
}

func (c *Client) maxDownload() int64 {
	if c.MaxDownloadBytes > 0 {
		return c.MaxDownloadBytes
	}
	return DefaultMaxDownloadBytes
}

// get sends one GET and returns the body of a 200, read up to limit bytes. Over the limit is
// a *TooLargeError when tooLarge is set, ErrRegistry otherwise.
func (c *Client) get(ctx context.Context, path string, q url.Values, limit int64, tooLarge bool) ([]byte, error) {
	u, err := url.Parse(c.BaseURL + path)
	if err != nil {
		return nil, fmt.Errorf("%w: bad registry URL: %v", ErrRegistry, err)
	}
	u.RawQuery = q.Encode()
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRegistry, err)
	}
	req.Header.Set("Accept", "application/json, application/zip")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = sharedHTTP
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, c.transportError(ctx, err)
	}
	defer resp.Body.Close()
	if err := statusError(resp.StatusCode, path); err != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil, err
	}
	overLimit := func() error {
		if tooLarge {
			return &TooLargeError{Limit: limit}
		}
		return fmt.Errorf("%w: answer over %d bytes", ErrRegistry, limit)
	}
	if resp.ContentLength > limit {
		return nil, overLimit()
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, c.transportError(ctx, err)
	}
	if int64(len(body)) > limit {
		return nil, overLimit()
	}
	return body, nil
}

// transportError classifies a failed exchange: the caller giving up is its own error,
// everything else (refused, reset, timed out) means the registry is unavailable.
func (c *Client) transportError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// statusError maps a non-200 status.
func statusError(code int, path string) error {
	switch {
	case code == http.StatusOK:
		return nil
	case code == http.StatusNotFound || code == http.StatusGone:
		return fmt.Errorf("%w: %s answered %d", ErrNotFound, path, code)
	case code >= 500 || code == http.StatusTooManyRequests || code == http.StatusRequestTimeout:
		return fmt.Errorf("%w: %s answered %d", ErrUnavailable, path, code)
	default:
		return fmt.Errorf("%w: %s answered %d", ErrRegistry, path, code)
	}
}
