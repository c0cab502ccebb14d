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
	// CostMicrosPerDay caps the day's spend by the platform's model price table (the
	// manager's --model-prices), in millionths of its currency (5000000: 5.00). While it
	// applies, a model the table has no price for is refused.
	// +kubebuilder:validation:Minimum=0
	// +optional
	CostMicrosPerDay int64 `json:"costMicrosPerDay,omitempty"`
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
	// CostMicros is what the day's requests cost by the platform's model price table, in
	// millionths of Currency. Requests of a model the table has no price for add nothing to
	// it (UnpricedRequests counts them); without a table it stays unset.
	// +optional
	CostMicros int64 `json:"costMicros,omitempty"`
	// Currency is the price table's currency (ISO 4217), set by a write under one.
	// +optional
	Currency string `json:"currency,omitempty"`
	// UnpricedRequests counts the day's model requests the price table had no price for.
	// +optional
	UnpricedRequests int64 `json:"unpricedRequests,omitempty"`
	// Models is the day's usage per model (as the requests named it), the costliest first:
	// at most MaxUsageModels entries, the rest added up under the model "(other)".
	// +optional
	// +listType=map
	// +listMapKey=model
	// +kubebuilder:validation:MaxItems=16
	Models []ModelTally `json:"models,omitempty"`
	// UpdatedAt is the last write.
	// +optional
	UpdatedAt *metav1.Time `json:"updatedAt,omitempty"`
}

// MaxUsageModels bounds ModelUsage.Models; OtherModels names the entry the rest add up to,
// UnnamedModel the requests that named no model.
const (
	MaxUsageModels = 16
	OtherModels    = "(other)"
	UnnamedModel   = "(unnamed)"
)

// ModelTally is one model's share of a day's usage.
type ModelTally struct {
	// Model is the model as the requests named it (UnnamedModel when they named none).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=200
	Model string `json:"model"`
	// +optional
	Requests int64 `json:"requests,omitempty"`
	// +optional
	InputTokens int64 `json:"inputTokens,omitempty"`
	// +optional
	OutputTokens int64 `json:"outputTokens,omitempty"`
	// CostMicros is its cost in millionths of the usage's currency (0: unpriced or free).
	// +optional
	CostMicros int64 `json:"costMicros,omitempty"`
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
