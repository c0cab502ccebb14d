// Package admission holds the rules an object must pass before it runs, shared by the two
// doors of the platform: the REST facade (before it creates the object) and the controllers
// (for objects applied with kubectl, which meet no facade). For agents: the workspace's agent
// limit, the engine version, and the expansion of spec.template. For domains: the agent's
// domain limit and the cluster-wide claim of the host.
//
// It is a package called by both doors, not an admission webhook: the platform runs without
// webhook TLS in local mode, and the REST facade needs the verdicts as errors it maps to its
// contract's answers (`Agent limit reached`, `Invalid version`, `Subdomain already taken`).
package admission

import (
	"context"
	"errors"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentplane/agentplane/internal/rules/quota"
)

// Verdicts. Callers map them: the facade to HTTP answers, the controllers to condition
// reasons.
var (
	// ErrLimitReached: every slot of the limit (agents per workspace, domains per agent) is
	// taken.
	ErrLimitReached = quota.ErrLimitReached
	// ErrInvalidVersion: the platform does not offer the engine version.
	ErrInvalidVersion = errors.New("engine version is not offered")
	// ErrTemplateNotFound: no published AgentTemplate has the id or slug.
	ErrTemplateNotFound = errors.New("template not found")
)

// Admitter applies the admission rules. One Admitter serves both doors of a platform.
type Admitter struct {
	// Client writes reservations and claims.
	Client client.Client
	// Reader reads templates, claims and slot holders from the API server (never a cache: a
	// claim must not be judged from one that lags). Nil: the Client.
	Reader client.Reader
	// Cache, when set, answers "the agent's slot is already reserved" without a round trip
	// (the controller's common case); a miss goes to the Limiter.
	Cache client.Reader
	// Limiter keeps the slots of the agent and domain limits.
	Limiter *quota.Limiter
	// Versions are the engine versions agents may run.
	Versions Versions
	// SnapshotExists reports whether storage holds a snapshot an agent of namespace may be
	// seeded with (nil: never; templates then seed no files).
	SnapshotExists func(ctx context.Context, namespace, cid string) bool
	// SystemNamespace holds the host claims.
	SystemNamespace string
}

func (a *Admitter) reader() client.Reader {
	if a.Reader != nil {
		return a.Reader
	}
	return a.Client
}

// Refused reports whether err is the API server's definite refusal of a write: the object was
// not written, so what was reserved or claimed for it can be given back at once. Any other
// error (an answer lost with the connection, a timeout, a cancelled request) leaves the write's
// outcome unknown: the object may exist, so its slot and claim stay, and the Recounter frees
// them if it never appears. Giving them back then would let a second object take the name or
// the slot of one that exists.
func Refused(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	// A 4xx, except a request timeout or throttling: then the server may still be writing.
	code := status.Status().Code
	if code == http.StatusServiceUnavailable {
		// The API server answers 503 only before it handles a request (shutting down, a kind
		// whose schema is still loading after its restart, admission not ready); another
		// actor's 503 (a proxy's page, not a Status) may come after the request went through.
		return !apierrors.IsUnexpectedServerError(err)
	}
	return code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests
}
