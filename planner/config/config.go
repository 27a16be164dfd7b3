// Package config loads a pond configuration: every *.pond.hcl and
// *.pond.json file of a directory, decoded into blocks whose expressions are
// kept for the planner to evaluate.
//
// The entry points are LoadDir (or LoadFiles) to decode a configuration,
// (*Config).Validate to check its references, ParseRef and
// ResourceReferences for the planner's dependency graph, CollectVariables
// for the values of input variables, WriteDiagnostics and DiagnosticsJSON
// to report problems, and Format and FormatPath for pondctl fmt.
package config

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/zclconf/go-cty/cty"
)

// Config is a whole configuration directory.
type Config struct {
	// Dir is the directory the configuration was loaded from.
	Dir string
	// Files maps file names to parsed files, for diagnostic snippets.
	Files map[string]*hcl.File
	// Pond is the pond block, or nil.
	Pond *Pond
	// Variables, Locals, Outputs are keyed by name.
	Variables map[string]*Variable
	Locals    map[string]*Local
	Outputs   map[string]*Output
	// Providers is keyed by "name" or "name.alias".
	Providers map[string]*Provider
	// Resources is keyed by address: "pool.campus" for a managed resource,
	// "data.sea_query.big" for a data resource.
	Resources map[string]*Resource
	// Moved and Removed are the moved and removed blocks, in file order.
	Moved   []*Moved
	Removed []*Removed
	// Imports and Checks are the import and check blocks, in file order.
	Imports []*Import
	Checks  []*Check
}

// Pond is the top-level pond block: where state lives and where the sea is.
type Pond struct {
	Backend   *Backend
	Sea       *Sea
	DeclRange hcl.Range
}

// Backend is a backend "type" { ... } block.
type Backend struct {
	Type      string
	Config    hcl.Body
	DeclRange hcl.Range
}

// Sea is the sea { address = "..." } block.
type Sea struct {
	Address string
	// AddressRange is the range of the address argument's value.
	AddressRange hcl.Range
	DeclRange    hcl.Range
}

// Variable is a variable block.
type Variable struct {
	Name        string
	Description string
	// Type is the type constraint; cty.DynamicPseudoType when not given.
	Type cty.Type
	// TypeRange is the range of the type argument; zero when there is
	// none.
	TypeRange hcl.Range
	// TypeDefaults holds the defaults of optional object attributes in
	// Type, or nil; ConvertValue applies them.
	TypeDefaults *typeexpr.Defaults
	// Default is cty.NilVal when there is no default. It is already
	// converted to Type.
	Default cty.Value
	// DefaultRange is the source range of the default expression.
	DefaultRange hcl.Range
	// Nullable is true unless the block says nullable = false.
	Nullable    bool
	Sensitive   bool
	Validations []*Validation
	DeclRange   hcl.Range
}

// Validation is a validation block of a variable.
type Validation struct {
	Condition    hcl.Expression
	ErrorMessage hcl.Expression
	DeclRange    hcl.Range
}

// Local is one named value of a locals block.
type Local struct {
	Name      string
	Expr      hcl.Expression
	DeclRange hcl.Range
}

// Output is an output block.
type Output struct {
	Name        string
	Description string
	Expr        hcl.Expression
	Sensitive   bool
	DependsOn   []hcl.Traversal
	DeclRange   hcl.Range
}

// Provider is a provider block.
type Provider struct {
	Name      string
	Alias     string
	Config    hcl.Body
	DeclRange hcl.Range
}

// Key is the provider's key in Config.Providers.
func (p *Provider) Key() string {
	if p.Alias == "" {
		return p.Name
	}
	return p.Name + "." + p.Alias
}

// Mode says whether a resource is managed or a data source.
type Mode int

// Resource modes.
const (
	ManagedResource Mode = iota
	DataResource
)

// Resource is a managed resource block (pool, pond, flock) or a data block.
type Resource struct {
	Mode Mode
	Type string
	Name string
	// Config is the body with the meta-arguments removed, decoded by the
	// planner against the provider's schema.
	Config hcl.Body
	// Count and ForEach are nil when absent.
	Count   hcl.Expression
	ForEach hcl.Expression
	// ProviderRef is nil when the resource uses its type's default provider.
	ProviderRef *ProviderRef
	DependsOn   []hcl.Traversal
	Lifecycle   Lifecycle
	DeclRange   hcl.Range
	TypeRange   hcl.Range
}

// Addr is the resource's address without an instance key.
func (r *Resource) Addr() string {
	if r.Mode == DataResource {
		return "data." + r.Type + "." + r.Name
	}
	return r.Type + "." + r.Name
}

// ProviderRef is the value of a provider meta-argument: provider.NAME or
// provider.NAME.ALIAS.
type ProviderRef struct {
	Name  string
	Alias string
	Range hcl.Range
}

// Key is the referenced provider's key in Config.Providers.
func (p *ProviderRef) Key() string {
	if p.Alias == "" {
		return p.Name
	}
	return p.Name + "." + p.Alias
}

// Lifecycle is a resource's lifecycle block.
type Lifecycle struct {
	PreventDestroy      bool
	CreateBeforeDestroy bool
	IgnoreChanges       []hcl.Traversal
	IgnoreAllChanges    bool
}

// String returns a short description, for debugging.
func (r *Resource) String() string { return fmt.Sprintf("%s (%s)", r.Addr(), r.DeclRange) }
