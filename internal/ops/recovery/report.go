package recovery

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteTable writes the report as a table, one finding a row, and a line of what was compared.
func (r *Report) WriteTable(w io.Writer) error {
	c := r.Checked
	summary := fmt.Sprintf("compared %d workspaces, %d agents, %d homes, %d snapshots, %d archives", c.Workspaces, c.Agents, c.Homes, c.Snapshots, c.Archives)
	if r.Agree() {
		_, err := fmt.Fprintf(w, "%s: all agree\n", summary)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAMESPACE\tNAME\tDETAIL\tREPAIR")
	for _, f := range r.Findings {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", f.Kind, f.Namespace, f.Name, f.Detail, f.Repair)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%s: %d disagree\n", summary, len(r.Findings))
	return err
}

// WriteJSON writes the report as one JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
