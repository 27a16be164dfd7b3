package cli

import (
	"encoding/json"
	"sort"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/pond-htc/pond/planner"
	"github.com/pond-htc/pond/planner/config"
	"github.com/pond-htc/pond/state"
)

// jsonFormatVersion is the version of the JSON documents plan -json and
// show -json print.
const jsonFormatVersion = "1.2"

type jsonPlan struct {
	FormatVersion   string                 `json:"format_version"`
	PondVersion     string                 `json:"pond_version"`
	ResourceChanges []jsonResourceChange   `json:"resource_changes"`
	ResourceDrift   []jsonResourceChange   `json:"resource_drift,omitempty"`
	OutputChanges   map[string]*jsonChange `json:"output_changes,omitempty"`
	Errored         bool                   `json:"errored"`
	Summary         jsonSummary            `json:"summary"`
	// Checks are the check blocks' statuses as the plan evaluated them,
	// unknown where they depend on what only the apply knows.
	Checks []jsonCheck `json:"checks,omitempty"`
	// Diagnostics are the warnings of plan -json.
	Diagnostics []config.JSONDiagnostic `json:"diagnostics,omitempty"`
}

type jsonSummary struct {
	Add     int `json:"add"`
	Change  int `json:"change"`
	Destroy int `json:"remove"`
	Forget  int `json:"forget,omitempty"`
	Move    int `json:"move,omitempty"`
	Import  int `json:"import,omitempty"`
}

type jsonResourceChange struct {
	Address string `json:"address"`
	// PreviousAddress is the instance's address in the stored state when a
	// moved block moves it.
	PreviousAddress string      `json:"previous_address,omitempty"`
	Mode            string      `json:"mode"`
	Type            string      `json:"type"`
	Name            string      `json:"name"`
	Index           any         `json:"index,omitempty"`
	ProviderName    string      `json:"provider_name"`
	Change          *jsonChange `json:"change"`
	ActionReason    string      `json:"action_reason,omitempty"`
	// Cost is the provider's cost estimate of the instance, if any.
	Cost *jsonCost `json:"cost,omitempty"`
}

type jsonChange struct {
	Actions         []string `json:"actions"`
	Before          any      `json:"before"`
	After           any      `json:"after"`
	AfterUnknown    any      `json:"after_unknown"`
	ReplacePaths    [][]any  `json:"replace_paths,omitempty"`
	BeforeSensitive any      `json:"before_sensitive,omitempty"`
	AfterSensitive  any      `json:"after_sensitive,omitempty"`
	Sensitive       bool     `json:"sensitive,omitempty"`
	// Importing is set when an import block adopts the object.
	Importing *jsonImporting `json:"importing,omitempty"`
}

type jsonImporting struct {
	ID string `json:"id"`
}

func planJSON(p *planner.Plan) *jsonPlan {
	out := &jsonPlan{FormatVersion: jsonFormatVersion, PondVersion: Version, Errored: !p.Complete, ResourceChanges: []jsonResourceChange{}}
	for _, c := range p.Changes {
		out.ResourceChanges = append(out.ResourceChanges, resourceChangeJSON(c))
	}
	for _, c := range p.Drift {
		out.ResourceDrift = append(out.ResourceDrift, resourceChangeJSON(c))
	}
	if len(p.OutputChanges) > 0 {
		out.OutputChanges = map[string]*jsonChange{}
		for _, o := range p.OutputChanges {
			jc := &jsonChange{Actions: o.Action.JSONActions(), Before: valueJSON(o.Before), After: valueJSON(o.After), AfterUnknown: unknownJSON(o.After), Sensitive: o.Sensitive}
			if o.Sensitive {
				jc.Before, jc.After = nil, nil
			}
			out.OutputChanges[o.Name] = jc
		}
	}
	out.Summary.Add, out.Summary.Change, out.Summary.Destroy = p.Counts()
	out.Summary.Forget, out.Summary.Move = p.Forgets(), len(p.Moves)
	out.Summary.Import = p.Imports()
	out.Checks = planChecksJSON(p)
	return out
}

func resourceChangeJSON(c *planner.ResourceChange) jsonResourceChange {
	before, after := c.Marked()
	jc := &jsonChange{
		Actions:      c.Action.JSONActions(),
		Before:       valueJSON(before),
		After:        valueJSON(after),
		AfterUnknown: unknownJSON(c.After),
	}
	if c.Importing != nil {
		jc.Importing = &jsonImporting{ID: c.Importing.ID}
	}
	if len(c.SensitivePaths) > 0 {
		jc.BeforeSensitive, jc.AfterSensitive = sensitiveJSON(before), sensitiveJSON(after)
	}
	for _, p := range c.RequiresReplace {
		var steps []any
		for _, s := range p {
			switch s := s.(type) {
			case cty.GetAttrStep:
				steps = append(steps, s.Name)
			case cty.IndexStep:
				steps = append(steps, valueJSON(s.Key))
			}
		}
		jc.ReplacePaths = append(jc.ReplacePaths, steps)
	}
	if len(c.Sensitive) > 0 {
		m := map[string]bool{}
		for _, s := range c.Sensitive {
			m[s] = true
		}
		if jc.BeforeSensitive == nil {
			jc.BeforeSensitive, jc.AfterSensitive = m, m
		} else {
			for _, t := range []any{jc.BeforeSensitive, jc.AfterSensitive} {
				if obj, ok := t.(map[string]any); ok {
					for s := range m {
						obj[s] = true
					}
				}
			}
		}
		redact := func(v any) any {
			if obj, ok := v.(map[string]any); ok {
				for s := range m {
					if _, ok := obj[s]; ok {
						obj[s] = nil
					}
				}
			}
			return v
		}
		jc.Before, jc.After = redact(jc.Before), redact(jc.After)
	}
	var prev string
	if c.Moved() {
		prev = c.PrevAddr.String()
	}
	return jsonResourceChange{
		PreviousAddress: prev,
		Address:         c.Addr.String(),
		Mode:            c.Addr.ResourceAddress().Mode,
		Type:            c.Addr.Type,
		Name:            c.Addr.Name,
		Index:           c.Addr.Key,
		ProviderName:    "provider." + c.ProviderKey,
		Change:          jc,
		ActionReason:    c.Reason,
		Cost:            costJSON(c.Cost),
	}
}

// sensitiveText stands for a sensitive value, in text and in JSON.
const sensitiveText = "(sensitive value)"

// valueJSON converts a value to plain JSON data; unknown values become null
// and sensitive ones (sensitive value).
func valueJSON(v cty.Value) any {
	if v == cty.NilVal {
		return nil
	}
	if v.IsMarked() {
		return sensitiveText
	}
	if v.IsNull() || !v.IsKnown() {
		return nil
	}
	ty := v.Type()
	switch {
	case ty.IsListType() || ty.IsSetType() || ty.IsTupleType():
		out := []any{}
		for it := v.ElementIterator(); it.Next(); {
			_, ev := it.Element()
			out = append(out, valueJSON(ev))
		}
		return out
	case ty.IsMapType() || ty.IsObjectType():
		out := map[string]any{}
		for it := v.ElementIterator(); it.Next(); {
			k, ev := it.Element()
			out[k.AsString()] = valueJSON(ev)
		}
		return out
	}
	b, err := ctyjson.Marshal(v, ty)
	if err != nil {
		return nil
	}
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// unknownJSON mirrors v's structure with true where a value is unknown, as
// Terraform's after_unknown does.
func unknownJSON(v cty.Value) any {
	return mirrorJSON(v, func(v cty.Value) bool { return !v.IsKnown() })
}

// sensitiveJSON mirrors v's structure with true where a value is
// sensitive, as Terraform's before_sensitive and after_sensitive do.
func sensitiveJSON(v cty.Value) any { return mirrorJSON(v, cty.Value.IsMarked) }

// mirrorJSON mirrors v's structure with true where hit holds of a value
// and false for a value with no hit below it (a collection without one
// is false as a whole).
func mirrorJSON(v cty.Value, hit func(cty.Value) bool) any {
	if v == cty.NilVal {
		return false
	}
	if hit(v) {
		return true
	}
	if v.IsNull() || !v.IsKnown() {
		return false
	}
	ty := v.Type()
	switch {
	case ty.IsListType() || ty.IsTupleType() || ty.IsSetType():
		out := []any{}
		any := false
		for it := v.ElementIterator(); it.Next(); {
			_, ev := it.Element()
			m := mirrorJSON(ev, hit)
			out = append(out, m)
			if m != false {
				any = true
			}
		}
		if !any {
			return false
		}
		return out
	case ty.IsMapType() || ty.IsObjectType():
		out := map[string]any{}
		for it := v.ElementIterator(); it.Next(); {
			k, ev := it.Element()
			if m := mirrorJSON(ev, hit); m != false {
				out[k.AsString()] = m
			}
		}
		return out
	}
	return false
}

// stateJSON is show -json of a state: values of outputs and resources, and
// the checks' outcomes at the last apply.
func stateJSON(s *state.State, decode func(r *state.Resource, inst *state.Instance) any) map[string]any {
	outputs := map[string]any{}
	for name, o := range s.Outputs {
		var v any
		if !o.Sensitive {
			_ = json.Unmarshal(o.Value, &v)
		}
		var ty any
		_ = json.Unmarshal(o.Type, &ty)
		outputs[name] = map[string]any{"value": v, "type": ty, "sensitive": o.Sensitive}
	}
	resources := []any{}
	for _, r := range s.Resources {
		for _, inst := range r.Instances {
			addr := state.Address{Mode: r.Mode, Type: r.Type, Name: r.Name, Key: inst.IndexKey}
			entry := map[string]any{
				"address":        addr.String(),
				"mode":           r.Mode,
				"type":           r.Type,
				"name":           r.Name,
				"provider_name":  r.Provider,
				"schema_version": inst.SchemaVersion,
				"values":         decode(r, inst),
			}
			if inst.IndexKey != nil {
				entry["index"] = inst.IndexKey
			}
			if len(inst.Dependencies) > 0 {
				entry["depends_on"] = inst.Dependencies
			}
			if inst.Status == "tainted" {
				entry["tainted"] = true
			}
			resources = append(resources, entry)
		}
	}
	sort.Slice(resources, func(i, j int) bool {
		return resources[i].(map[string]any)["address"].(string) < resources[j].(map[string]any)["address"].(string)
	})
	out := map[string]any{
		"format_version": jsonFormatVersion,
		"pond_version":   Version,
		"values": map[string]any{
			"outputs":     outputs,
			"root_module": map[string]any{"resources": resources},
		},
	}
	// The checks' outcomes at the last apply, as the state keeps them.
	if checks := checksJSON(s.CheckResults); len(checks) > 0 {
		out["checks"] = checks
	}
	return out
}
