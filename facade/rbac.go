package facade

// RBAC of the REST facade: it runs in the manager process and turns calls into operations on
// these objects (controller-gen collects the markers into config/rbac/role.yaml).
//
// +kubebuilder:rbac:groups=agentplane.io,resources=workspaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=list
// +kubebuilder:rbac:groups=agentplane.io,resources=workspaces/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agentplane.io,resources=apikeys,verbs=get;list;watch
// +kubebuilder:rbac:groups=agentplane.io,resources=agents;agentsecrets;skills;channels;domains;snapshots;files,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=agentplane.io,resources=agents/status;agentsecrets/status;domains/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=agentplane.io,resources=agenttemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;create
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;delete
