package providers

import (
	"sort"
	"sync"

	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/zclconf/go-cty/cty"
)

// ProviderSchema is everything a provider declares.
type ProviderSchema struct {
	// Provider is the schema of the provider block itself.
	Provider *Schema
	// Resources maps managed resource type names (pool, pond, flock) to
	// their schemas.
	Resources map[string]*Schema
	// DataSources maps data source type names to their schemas.
	DataSources map[string]*Schema
}

// Schema describes the arguments of one block. A Schema must not be
// changed once ImpliedType has been called.
type Schema struct {
	Version     int
	Description string
	Attributes  map[string]*Attribute
	BlockTypes  map[string]*NestedBlock

	impliedOnce sync.Once
	implied     cty.Type
}

// Attribute describes one argument or computed attribute.
type Attribute struct {
	Type        cty.Type
	Description string
	Required    bool
	Optional    bool
	Computed    bool
	Sensitive   bool
	// ForceNew marks attributes whose change replaces the resource.
	ForceNew bool
}

// Nesting says how many instances of a nested block may appear.
type Nesting int

// Nesting modes.
const (
	NestingSingle Nesting = iota
	NestingList
)

// NestedBlock describes a nested block type.
type NestedBlock struct {
	Nesting  Nesting
	Block    Schema
	MinItems int
	MaxItems int
}

// ImpliedType is the cty object type of a value conforming to s. It is
// computed once.
func (s *Schema) ImpliedType() cty.Type {
	if s == nil {
		return cty.EmptyObject
	}
	s.impliedOnce.Do(func() { s.implied = s.impliedType() })
	return s.implied
}

func (s *Schema) impliedType() cty.Type {
	atys := make(map[string]cty.Type, len(s.Attributes)+len(s.BlockTypes))
	for n, a := range s.Attributes {
		atys[n] = a.Type
	}
	for n, b := range s.BlockTypes {
		et := b.Block.ImpliedType()
		switch b.Nesting {
		case NestingSingle:
			atys[n] = et
		default:
			atys[n] = cty.List(et)
		}
	}
	return cty.Object(atys)
}

// DecoderSpec is the hcldec specification that decodes a configuration body
// against s. Computed-only attributes are not accepted in configuration.
func (s *Schema) DecoderSpec() hcldec.Spec {
	spec := hcldec.ObjectSpec{}
	if s == nil {
		return spec
	}
	for n, a := range s.Attributes {
		if a.Computed && !a.Optional && !a.Required {
			continue
		}
		spec[n] = &hcldec.AttrSpec{Name: n, Type: a.Type, Required: a.Required}
	}
	for n, b := range s.BlockTypes {
		inner := b.Block.DecoderSpec()
		switch b.Nesting {
		case NestingSingle:
			spec[n] = &hcldec.BlockSpec{TypeName: n, Nested: inner, Required: b.MinItems > 0}
		default:
			spec[n] = &hcldec.BlockListSpec{TypeName: n, Nested: inner, MinItems: b.MinItems, MaxItems: b.MaxItems}
		}
	}
	return spec
}

// AttributeNames returns the attribute names of s in sorted order.
func (s *Schema) AttributeNames() []string {
	names := make([]string, 0, len(s.Attributes))
	for n := range s.Attributes {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
