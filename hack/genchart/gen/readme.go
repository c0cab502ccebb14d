package gen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
)

// addReadme renders the chart's README.md: static/README.md.tmpl and a table of every value
// of values.yaml with the comment above it.
func (c chart) addReadme() error {
	var root yamlv3.Node
	if err := yamlv3.Unmarshal(c["values.yaml"], &root); err != nil {
		return err
	}
	var rows []string
	if err := valueRows(root.Content[0], "", &rows); err != nil {
		return err
	}
	out, err := execTemplate("static/README.md.tmpl", map[string]string{
		"Values": "| value | default | meaning |\n|---|---|---|\n" + strings.Join(rows, "\n") + "\n",
	})
	c["README.md"] = out
	return err
}

// valueRows appends a row per leaf value (and per empty map or list) of a mapping node; every
// one must carry a comment.
func valueRows(n *yamlv3.Node, prefix string, rows *[]string) error {
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		path := prefix + k.Value
		if v.Kind == yamlv3.MappingNode && len(v.Content) > 0 && path != "resources" {
			if err := valueRows(v, path+".", rows); err != nil {
				return err
			}
			continue
		}
		comment := commentText(k.HeadComment)
		if comment == "" {
			return fmt.Errorf("values.yaml: %s has no comment", path)
		}
		var def any
		if err := v.Decode(&def); err != nil {
			return err
		}
		js, err := json.Marshal(def)
		if err != nil {
			return err
		}
		*rows = append(*rows, fmt.Sprintf("| `%s` | `%s` | %s |", path, strings.ReplaceAll(string(js), "|", `\|`), strings.ReplaceAll(comment, "|", `\|`)))
	}
	return nil
}

// commentText is the last paragraph of a head comment as one line.
func commentText(c string) string {
	paras := strings.Split(strings.TrimSpace(c), "\n\n")
	var b bytes.Buffer
	for _, l := range strings.Split(paras[len(paras)-1], "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "#"))
		if b.Len() > 0 && l != "" {
			b.WriteByte(' ')
		}
		b.WriteString(l)
	}
	return b.String()
}
