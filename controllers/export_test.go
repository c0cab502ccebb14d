package controllers

import (
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	agentsv1 "github.com/agentplane/agentplane/api/v1alpha1"
)

// The index-based mappers, for the envtest suite.
var (
	ChannelsOfAgent  = agentRefMapper[agentsv1.ChannelList]
	DomainsOfAgent   = agentRefMapper[agentsv1.DomainList]
	SnapshotsOfAgent = agentRefMapper[agentsv1.SnapshotList]
)

// SkillsOfAgent is the Skill controller's mapper over c.
func SkillsOfAgent(c client.Client) handler.MapFunc {
	return (&SkillReconciler{Client: c}).skillsOfAgent
}
