package cli

import (
	"strings"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/pond-htc/pond/planner"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/state"
)

// schemaFor returns the schema of a resource recorded in state. Provider
// schemas are built once per command.
func (m *meta) schemaFor(r *state.Resource) *providers.Schema {
	name := strings.TrimPrefix(r.Provider, "provider.")
	name, _, _ = strings.Cut(name, ".")
	if m.schemas == nil {
		m.schemas = map[string]*providers.ProviderSchema{}
	}
	s, ok := m.schemas[name]
	if !ok {
		if f, found := providerRegistry()[name]; found {
			p := f()
			s = p.Schema()
			_ = p.Close()
		}
		m.schemas[name] = s
	}
	if s == nil {
		return nil
	}
	if r.Mode == state.ModeData {
		return s.DataSources[r.Type]
	}
	return s.Resources[r.Type]
}

// instanceValue decodes an instance's attributes with its schema, falling
// back to the JSON as it is; its sensitive values (stored as null) are
// marked, to show as (sensitive value).
func (m *meta) instanceValue(r *state.Resource, inst *state.Instance) cty.Value {
	if s := m.schemaFor(r); s != nil {
		if v, err := ctyjson.Unmarshal(inst.Attributes, s.ImpliedType()); err == nil {
			return planner.MarkStored(v, inst.SensitiveValues)
		}
	}
	var sv ctyjson.SimpleJSONValue
	if err := sv.UnmarshalJSON(inst.Attributes); err == nil {
		return planner.MarkStored(sv.Value, inst.SensitiveValues)
	}
	return cty.NullVal(cty.DynamicPseudoType)
}

func decodeOutputValue(o *state.Output) (cty.Value, error) {
	ty, err := ctyjson.UnmarshalType(o.Type)
	if err != nil {
		return cty.NilVal, err
	}
	return ctyjson.Unmarshal(o.Value, ty)
}
