package main

import "github.com/agentplane/agentplane/hack/bench/internal/report"

// jsonRows collects the run's metrics for -json (hack/bench/internal/report).
var jsonRows []report.Result
