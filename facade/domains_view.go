package facade

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
	"github.com/agentplane/agentplane/internal/ops"
)

// domainView is a domain as the REST API shows it.
type domainView struct {
	ID            string `json:"id"`
	AgentID       string `json:"agentId"`
	Subdomain     string `json:"subdomain,omitempty"`
	CustomDomain  string `json:"customDomain,omitempty"`
	Host          string `json:"host"`
	TargetPort    int32  `json:"targetPort"`
	Status        string `json:"status"`
	StatusReason  string `json:"statusReason,omitempty"`
	StatusMessage string `json:"statusMessage,omitempty"`
	Verified      bool   `json:"verified"`
	// Verification is the TXT record to create (custom domains).
	Verification *verificationView `json:"verification,omitempty"`
	LastChecked  *time.Time        `json:"lastChecked,omitempty"`
	NextCheck    *time.Time        `json:"nextCheck,omitempty"`
	Checks       int32             `json:"checks"`
	CreatedAt    time.Time         `json:"createdAt"`
}

// verificationView is the DNS record that proves ownership.
type verificationView struct {
	Type  string `json:"type"`
	Name  string `json:"name"`
	Value string `json:"value"`
}

// viewDomain shows d as the REST API does: its host and TXT record are the status's (the
// operations answer with those the controller writes, before its first pass too).
func viewDomain(d *agentsv1.Domain) domainView {
	v := domainView{
		ID: d.Name, AgentID: d.Spec.AgentRef.Name, Subdomain: d.Spec.Subdomain, CustomDomain: d.Spec.CustomDomain,
		Host: d.Status.Host, TargetPort: d.Spec.TargetPort, Status: string(d.Status.Phase),
		Verified: meta.IsStatusConditionTrue(d.Status.Conditions, agentsv1.DomainVerified),
		Checks:   d.Status.Checks, CreatedAt: d.CreationTimestamp.UTC(),
		LastChecked: timeOf(d.Status.LastChecked), NextCheck: timeOf(d.Status.NextCheck),
	}
	if v.TargetPort == 0 {
		v.TargetPort = ops.DefaultDomainPort
	}
	if ver := d.Status.Verification; ver != nil && d.Spec.CustomDomain != "" {
		v.Verification = &verificationView{Type: "TXT", Name: ver.RecordName, Value: ver.Token}
	}
	if v.Status == "" {
		v.Status = string(agentsv1.DomainPending)
		if d.Spec.CustomDomain != "" {
			v.Status = string(agentsv1.DomainPendingOwnership)
		}
	}
	// Why the domain is not active yet: the condition that holds it back.
	cond := agentsv1.DomainRouted
	if v.Status == string(agentsv1.DomainPendingOwnership) {
		cond = agentsv1.DomainVerified
	}
	if c := meta.FindStatusCondition(d.Status.Conditions, cond); c != nil && c.Status != metav1.ConditionTrue {
		v.StatusReason, v.StatusMessage = c.Reason, c.Message
	}
	return v
}

func timeOf(t *metav1.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
