package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// ModelBudget limits what an agent (or all agents of a workspace together) may spend through
// the platform's model proxy. Unset or zero fields are unlimited. Over a budget the proxy
// answers the provider's own 429 shape with a message naming the budget.
type ModelBudget struct {
	// RequestsPerMinute caps model requests per clock minute.
	// +kubebuilder:validation:Minimum=0
	// +optional
	RequestsPerMinute int64 `json:"requestsPerMinute,omitempty"`
	// TokensPerDay caps input plus output tokens per UTC day, as the providers report them
	// in their answers' usage fields.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TokensPerDay int64 `json:"tokensPerDay,omitempty"`
}

// ModelUsage is what went through the model proxy on one UTC day. Its one writer is the
// proxy's usage recorder (every facade replica adds its own counts at a bounded rate, under
// optimistic concurrency); no controller writes it.
type ModelUsage struct {
	// Day is the UTC day counted, as 2006-01-02. A new day starts from zero.
	Day string `json:"day"`
	// Requests counts model requests (answered or refused by the provider).
	// +optional
	Requests int64 `json:"requests,omitempty"`
	// InputTokens and OutputTokens add the providers' usage fields.
	// +optional
	InputTokens int64 `json:"inputTokens,omitempty"`
	// +optional
	OutputTokens int64 `json:"outputTokens,omitempty"`
	// UpdatedAt is the last write.
	// +optional
	UpdatedAt *metav1.Time `json:"updatedAt,omitempty"`
}

// Tokens is input plus output tokens.
func (u *ModelUsage) Tokens() int64 {
	if u == nil {
		return 0
	}
	return u.InputTokens + u.OutputTokens
}

// ModelCredentialPrefix starts every agent's model-proxy credential (the apiKey the platform
// renders into the agent's engine config for a proxied provider). The render recognises the
// entries it owns by it.
const ModelCredentialPrefix = "apx1."
