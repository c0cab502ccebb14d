package main

import (
	"encoding/json"
	"os"
)

// jsonRow is one metric of a run as -json writes it: the shape the benchmark report generator
// reads (one object per metric).
type jsonRow struct {
	Bench         string  `json:"bench"`
	Row           string  `json:"row"`
	Metric        string  `json:"metric"`
	Value         float64 `json:"value"`
	Unit          string  `json:"unit"`
	Baseline      string  `json:"baseline,omitempty"`
	BaselineValue float64 `json:"baseline_value,omitempty"`
	Ratio         float64 `json:"ratio,omitempty"`
}

// jsonRows collects the run's metrics for -json.
var jsonRows []jsonRow

// writeJSON writes the run's metrics to file as a JSON array ("": nothing written).
func writeJSON(file string) error {
	if file == "" {
		return nil
	}
	rows := jsonRows
	if rows == nil {
		rows = []jsonRow{}
	}
	raw, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, append(raw, '\n'), 0o644)
}
