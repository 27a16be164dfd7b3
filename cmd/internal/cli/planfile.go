package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/pond-htc/pond/planner"
)

// planFileFormat is the format version of saved plan files.
const planFileFormat = 1

// savedPlan is what plan -out writes: enough to check that the plan still
// holds and to make exactly its changes.
type savedPlan struct {
	FormatVersion int                 `json:"pond_plan_format"`
	PondVersion   string              `json:"pond_version"`
	Lineage       string              `json:"lineage"`
	Serial        uint64              `json:"serial"`
	ConfigHash    string              `json:"config_hash"`
	Mode          planner.Mode        `json:"mode"`
	Targets       []string            `json:"targets,omitempty"`
	Replace       []string            `json:"replace,omitempty"`
	Refresh       bool                `json:"refresh"`
	Variables     map[string]savedVar `json:"variables,omitempty"`
	Actions       map[string]string   `json:"actions"`
	Rendered      string              `json:"rendered"`
	Plan          json.RawMessage     `json:"plan"`
	Sea           string              `json:"sea,omitempty"`
}

type savedVar struct {
	Value json.RawMessage `json:"value"`
	Type  json.RawMessage `json:"type"`
}

func planActions(p *planner.Plan) map[string]string {
	m := map[string]string{}
	for _, c := range p.Changes {
		if c.Action != planner.NoOp {
			m[c.Addr.String()] = c.Action.String()
		}
	}
	for _, c := range p.Drift {
		if p.Mode == planner.RefreshOnlyMode {
			m["drift "+c.Addr.String()] = c.Action.String()
		}
	}
	return m
}

func writePlanFile(path string, p *planner.Plan, vars map[string]cty.Value, hash, sea string) error {
	sp := savedPlan{
		FormatVersion: planFileFormat,
		PondVersion:   Version,
		Lineage:       p.Prior.Lineage,
		Serial:        p.Prior.Serial,
		ConfigHash:    hash,
		Mode:          p.Mode,
		Targets:       p.Options.Targets,
		Replace:       p.Options.Replace,
		Refresh:       p.Options.Refresh,
		Actions:       planActions(p),
		Sea:           sea,
		Variables:     map[string]savedVar{},
	}
	for name, v := range vars {
		tb, err := ctyjson.MarshalType(v.Type())
		if err != nil {
			return fmt.Errorf("variable %s: %w", name, err)
		}
		vb, err := ctyjson.Marshal(v, v.Type())
		if err != nil {
			return fmt.Errorf("variable %s: %w", name, err)
		}
		sp.Variables[name] = savedVar{Value: vb, Type: tb}
	}
	var buf bytes.Buffer
	renderPlan(&buf, p, colorizer{})
	sp.Rendered = buf.String()
	pj, err := json.Marshal(planJSON(p))
	if err != nil {
		return err
	}
	sp.Plan = pj
	data, err := json.MarshalIndent(sp, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func readPlanFile(path string) (*savedPlan, map[string]cty.Value, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var sp savedPlan
	if err := json.Unmarshal(data, &sp); err != nil || sp.FormatVersion == 0 {
		return nil, nil, fmt.Errorf("%s is not a pond plan file", path)
	}
	if sp.FormatVersion > planFileFormat {
		return nil, nil, fmt.Errorf("%s was written by a newer pond (plan format %d)", path, sp.FormatVersion)
	}
	vars := map[string]cty.Value{}
	for name, sv := range sp.Variables {
		ty, err := ctyjson.UnmarshalType(sv.Type)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: variable %s: %w", path, name, err)
		}
		v, err := ctyjson.Unmarshal(sv.Value, ty)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: variable %s: %w", path, name, err)
		}
		vars[name] = v
	}
	return &sp, vars, nil
}

// diffActions describes how two action sets differ, for a stale-plan error.
func diffActions(want, got map[string]string) string {
	var lines []string
	for a, w := range want {
		if g, ok := got[a]; !ok {
			lines = append(lines, fmt.Sprintf("  %s: planned %s, now nothing to do", a, w))
		} else if g != w {
			lines = append(lines, fmt.Sprintf("  %s: planned %s, now %s", a, w, g))
		}
	}
	for a, g := range got {
		if _, ok := want[a]; !ok {
			lines = append(lines, fmt.Sprintf("  %s: not planned, now %s", a, g))
		}
	}
	sort.Strings(lines)
	var b bytes.Buffer
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	return b.String()
}
