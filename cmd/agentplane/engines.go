package main

import (
	"github.com/agentplane/agentplane/internal/adapters/storage/local"
	"github.com/agentplane/agentplane/internal/platform"
)

// engineVersions asks each engine dir's bin/openclaw for its version.
var engineVersions = platform.EngineVersions

func localStorage(dir string) (*local.Store, error) { return local.New(dir) }
