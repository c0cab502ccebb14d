// Package words plants a violation of the word rule on an agent's files.
package words

// Home is the path of the agents' workspaces. // want: agents' workspaces
const Home = "/home"

// Tenant is a workspace: it holds agents.
const Tenant = "workspace"
