package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/pond-htc/pond/planner"
	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/providers"
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
	Excludes      []string            `json:"excludes,omitempty"`
	Replace       []string            `json:"replace,omitempty"`
	Refresh       bool                `json:"refresh"`
	Variables     map[string]savedVar `json:"variables,omitempty"`
	Actions       map[string]string   `json:"actions"`
	Rendered      string              `json:"rendered"`
	Plan          json.RawMessage     `json:"plan"`
	Sea           string              `json:"sea,omitempty"`
}

// savedVar is a variable's value in a plan file. A sensitive variable's
// value is not saved: only its keyed hash, to check that apply is given the
// same value again.
type savedVar struct {
	Value     json.RawMessage `json:"value,omitempty"`
	Type      json.RawMessage `json:"type,omitempty"`
	Sensitive bool            `json:"sensitive,omitempty"`
	Hash      string          `json:"hash,omitempty"`
}

func planActions(p *planner.Plan) map[string]string {
	m := map[string]string{}
	for _, c := range p.Changes {
		if c.Action != planner.NoOp {
			m[c.Addr.String()] = c.Action.String()
		}
		if c.Importing != nil {
			m["import "+c.Addr.String()] = c.Importing.ID
		}
	}
	// The moves are part of the plan: apply makes exactly these.
	for _, mv := range p.Moves {
		m["move "+mv.From.String()] = "to " + mv.To.String()
	}
	for _, c := range p.Drift {
		if p.Mode == planner.RefreshOnlyMode {
			m["drift "+c.Addr.String()] = c.Action.String()
		}
	}
	return m
}

func writePlanFile(path string, p *planner.Plan, cfg *config.Config, vars map[string]cty.Value, hash, sea string, key func() ([]byte, error)) error {
	sp := savedPlan{
		FormatVersion: planFileFormat,
		PondVersion:   Version,
		Lineage:       p.Prior.Lineage,
		Serial:        p.Prior.Serial,
		ConfigHash:    hash,
		Mode:          p.Mode,
		Targets:       p.Options.Targets,
		Excludes:      p.Options.Excludes,
		Replace:       p.Options.Replace,
		Refresh:       p.Options.Refresh,
		Actions:       planActions(p),
		Sea:           sea,
		Variables:     map[string]savedVar{},
	}
	for name, v := range vars {
		if d, ok := cfg.Variables[name]; ok && d.Sensitive {
			k, err := key()
			if err != nil {
				return fmt.Errorf("variable %s: %w", name, err)
			}
			h, err := providers.Hash(k, "var."+name, v)
			if err != nil {
				return fmt.Errorf("variable %s: %w", name, err)
			}
			sp.Variables[name] = savedVar{Sensitive: true, Hash: h}
			continue
		}
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
		if sv.Sensitive {
			continue
		}
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

// sensitiveVars completes the variables of a saved plan with its sensitive
// ones, which the plan file does not hold: apply takes them as plan did
// (-var, -var-file, POND_VAR_name, *.auto.pondvars, defaults), and each
// must be the value the plan was made with.
func (m *meta) sensitiveVars(cfg *config.Config, sp *savedPlan, planPath string, vars map[string]cty.Value, vf *varFlags, input bool) bool {
	var names []string
	for name, sv := range sp.Variables {
		if sv.Sensitive {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return true
	}
	sort.Strings(names)
	given, ok := m.collectVars(cfg, vf, input)
	if !ok {
		fmt.Fprintf(m.stderr, "%s does not hold the values of the sensitive variables %s: give them to apply as to plan.\n", planPath, strings.Join(names, ", "))
		return false
	}
	key := m.hashKey(cfg)
	for _, name := range names {
		v, ok := given[name]
		if !ok {
			m.errorf("Saved plan needs var.%s: %s does not hold sensitive values; give it to apply as to plan (-var, -var-file or POND_VAR_%s)", name, planPath, name)
			return false
		}
		k, err := key()
		if err != nil {
			m.fail("Cannot check var."+name, err)
			return false
		}
		if h, err := providers.Hash(k, "var."+name, v); err != nil || h != sp.Variables[name].Hash {
			m.errorf("Saved plan is stale: var.%s is not the value %s was made with; give apply the same value, or run \"pondctl plan\" again", name, planPath)
			return false
		}
		vars[name] = v
	}
	return true
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
