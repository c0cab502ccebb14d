package openapi

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// Markers of the generated route table in a README.
const (
	RoutesBegin = "<!-- routes:begin -->"
	RoutesEnd   = "<!-- routes:end -->"
)

// Markdown is the route table of routes, each described by the operation of its key in operations, after
// intro: method, path, scope, role permission, gateway and the route's error strings but
// the API's generic ones. It fails when a route has no operation or an operation no route.
func Markdown(api *API, intro string, routes []Route, operations map[string]*Operation) (string, error) {
	matched, err := Match(routes, operations)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(intro)
	b.WriteString("| Method | Path | Scope | Role | Gateway | Errors |\n|---|---|---|---|---|---|\n")
	for i, r := range routes {
		scope, role, gateway := "—", "—", "—"
		if r.Public {
			scope = "public"
		} else {
			if r.Scope != "" {
				scope = "`" + r.Scope + "`"
			}
			role = r.Permission
			if r.Gateway {
				gateway = "yes"
			}
		}
		var errs []string
		for _, f := range api.Fails(r, matched[i]) {
			var msgs []string
			for _, m := range f.Msgs {
				if api.Generic == nil || !api.Generic(f.Status, m) {
					msgs = append(msgs, "`"+m+"`")
				}
			}
			if len(msgs) > 0 {
				errs = append(errs, fmt.Sprintf("%d %s", f.Status, strings.Join(msgs, ", ")))
			}
		}
		errCell := strings.Join(errs, "<br>")
		if errCell == "" {
			errCell = "—"
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s | %s | %s |\n", r.Method, r.Path, scope, role, gateway, strings.ReplaceAll(errCell, "|", `\|`))
	}
	return b.String(), nil
}

// SpliceREADME replaces what lies between the route-table markers (RoutesBegin, RoutesEnd)
// of readme with table.
func SpliceREADME(readme []byte, table string) ([]byte, error) {
	begin := bytes.Index(readme, []byte(RoutesBegin))
	end := bytes.Index(readme, []byte(RoutesEnd))
	if begin < 0 || end < begin {
		return nil, errors.New("README.md has no " + RoutesBegin + " … " + RoutesEnd + " section")
	}
	var out bytes.Buffer
	out.Write(readme[:begin+len(RoutesBegin)])
	out.WriteString("\n" + table)
	out.Write(readme[end:])
	return out.Bytes(), nil
}
