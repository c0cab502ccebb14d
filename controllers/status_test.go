package controllers

import (
	"encoding/json"
	"testing"
)

// TestOwnStatusFields: the controllers' status patch keeps their own fields and the metadata
// (the optimistic lock's resourceVersion), and drops the fields of the quota and the usage
// recorder; a patch left with none of the controllers' fields is not sent.
func TestOwnStatusFields(t *testing.T) {
	for _, tc := range []struct {
		name, kind, patch string
		want              string // "": nothing to send
	}{
		{"own fields stay", "Agent", `{"metadata":{"resourceVersion":"7"},"status":{"phase":"running","holdsSlot":true}}`,
			`{"metadata":{"resourceVersion":"7"},"status":{"holdsSlot":true,"phase":"running"}}`},
		{"the quota's and the recorder's go", "Agent", `{"metadata":{"resourceVersion":"7"},"status":{"phase":"running","domainReservations":null,"usage":{"day":"x"}}}`,
			`{"metadata":{"resourceVersion":"7"},"status":{"phase":"running"}}`},
		{"a Workspace's slots, storage and usage go", "Workspace", `{"status":{"agents":2,"agentSlots":{"used":2},"storage":{},"usage":null}}`,
			`{"status":{"agents":2}}`},
		{"only others' fields: nothing to send", "Workspace", `{"metadata":{"resourceVersion":"7"},"status":{"agentSlots":{"used":2}}}`, ""},
		{"a kind of one writer keeps all", "Domain", `{"status":{"usage":1,"phase":"active"}}`, `{"status":{"phase":"active","usage":1}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ours, err := ownStatusFields([]byte(tc.patch), tc.kind)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if ours {
					t.Fatalf("got %s, want nothing to send", got)
				}
				return
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatal(err)
			}
			_ = json.Unmarshal([]byte(tc.want), &w)
			gb, _ := json.Marshal(g)
			wb, _ := json.Marshal(w)
			if !ours || string(gb) != string(wb) {
				t.Fatalf("got %s (ours %v), want %s", gb, ours, wb)
			}
		})
	}
}
