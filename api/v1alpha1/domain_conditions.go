package v1alpha1

// DomainFinalizer lets the Domain controller release the host claim and the routing objects
// before the Domain goes away.
const DomainFinalizer = "agentplane.io/domain"

// Domain condition types.
const (
	// DomainVerified is True once ownership is proven (always True for subdomains).
	DomainVerified = "Verified"
	// DomainRouted is True once traffic for the host reaches the agent.
	DomainRouted = "Routed"
)

// Reasons of the Verified and Routed conditions (and ReasonAgentNotFound).
const (
	ReasonDomainVerified     = "Verified"
	ReasonNotRequired        = "NotRequired"
	ReasonNotChecked         = "NotChecked"
	ReasonAwaitingOwnership  = "AwaitingOwnership"
	ReasonRouted             = "Routed"
	ReasonRouteFailed        = "RouteFailed"
	ReasonRouting            = "Routing"
	ReasonDomainLimitReached = "DomainLimitReached"
	ReasonBannedName         = "BannedName"
	ReasonHostTaken          = "HostTaken"
)

// Labels and annotations of domains and their host claims.
const (
	// LabelDomain is the Domain a routing object (Service, Ingress) serves.
	LabelDomain = "agentplane.io/domain"
	// AnnotationVerifyRequested asks the Domain controller to check ownership now: its value is
	// the request's time (RFC 3339, nanoseconds), answered once (status.verifyRequestAnswered).
	AnnotationVerifyRequested = "agentplane.io/verify-requested-at"
	// LabelClaim marks a host claim (a Lease named after the host).
	LabelClaim = "agentplane.io/claim"
	// Annotations of a host claim: the host, and the workspace and Domain holding it, and when.
	AnnotationClaimHost      = "agentplane.io/host"
	AnnotationClaimWorkspace = "agentplane.io/workspace"
	AnnotationClaimDomain    = "agentplane.io/domain"
	AnnotationClaimedAt      = "agentplane.io/claimed-at"
)
