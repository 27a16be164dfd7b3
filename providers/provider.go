// Package providers defines the interface between the planner and the
// providers that create, read, update and delete pond's resources, together
// with the schema language in which providers describe their arguments.
package providers

import (
	"context"
	"log/slog"

	"github.com/zclconf/go-cty/cty"
)

// Provider is an in-process provider. One Provider value serves one provider
// configuration block; its methods may be called concurrently once Configure
// has returned.
type Provider interface {
	// Schema describes the provider's own configuration and the resource and
	// data source types it implements.
	Schema() *ProviderSchema
	// Configure is called once, before any other call but Schema and
	// ValidateResourceConfig.
	Configure(ctx context.Context, req ConfigureRequest) error
	// ValidateResourceConfig checks a resource configuration beyond what the
	// schema says (ranges, mutually exclusive arguments). Unknown values must
	// be accepted. The error should name the attribute at fault.
	ValidateResourceConfig(ctx context.Context, typeName string, config cty.Value) error
	// PlanResourceChange proposes the new state of a managed resource.
	PlanResourceChange(ctx context.Context, req PlanRequest) (*PlanResponse, error)
	// ApplyResourceChange creates (Prior is null), updates, or deletes
	// (Planned is null) a managed resource.
	ApplyResourceChange(ctx context.Context, req ApplyRequest) (*ApplyResponse, error)
	// ReadResource refreshes a managed resource from what is observed. A
	// null New means the resource no longer exists.
	ReadResource(ctx context.Context, req ReadRequest) (*ReadResponse, error)
	// ImportResource reads an existing object, named by id, into state.
	ImportResource(ctx context.Context, typeName, id string) (cty.Value, error)
	// ReadDataSource evaluates a data source.
	ReadDataSource(ctx context.Context, req ReadDataRequest) (cty.Value, error)
	// Close releases what the provider holds. It does not stop what the
	// provider created.
	Close() error
}

// Factory makes a new, unconfigured provider.
type Factory func() Provider

// ConfigureRequest carries a provider block's configuration and the context
// of the run.
type ConfigureRequest struct {
	// Config is the provider block decoded against Schema().Provider.
	Config cty.Value
	// WorkDir is the working directory of the configuration. Providers keep
	// what they own under WorkDir/.pond.
	WorkDir string
	// SeaAddr is the API address of an agent in the sea, from the pond { sea
	// {} } block, -sea or POND_SEA_ADDR; empty when none was given.
	SeaAddr string
	// Logger receives the provider's log records.
	Logger *slog.Logger
}

// PlanRequest asks for the planned state of one resource instance.
type PlanRequest struct {
	TypeName string
	// Address is the instance address, such as pool.campus or pool.w["a"].
	Address string
	// Prior is the current state, or null when the instance is to be created.
	Prior cty.Value
	// Config is the configuration as written, possibly with unknown values.
	Config cty.Value
	// ProposedNew is Config with computed attributes that the configuration
	// leaves null taken from Prior.
	ProposedNew cty.Value
}

// PlanResponse is the planned new state. Values the provider cannot know
// before apply are unknown.
type PlanResponse struct {
	Planned cty.Value
	// RequiresReplace lists attributes whose change cannot be made in place,
	// beyond those marked ForceNew in the schema.
	RequiresReplace []cty.Path
}

// ApplyRequest asks a provider to make a planned change.
type ApplyRequest struct {
	TypeName string
	Address  string
	Prior    cty.Value
	Planned  cty.Value
	Config   cty.Value
	// Progress, when not nil, receives short human-readable progress notes.
	Progress func(msg string)
}

// ApplyResponse is the new state after apply. On error, a non-null New
// records what was partly created so that it is not lost.
type ApplyResponse struct {
	New cty.Value
}

// ReadRequest asks for the observed state of an instance.
type ReadRequest struct {
	TypeName string
	Address  string
	Current  cty.Value
}

// ReadResponse is the observed state; a null New means it is gone.
type ReadResponse struct {
	New cty.Value
}

// ReadDataRequest asks a data source for its value.
type ReadDataRequest struct {
	TypeName string
	Address  string
	Config   cty.Value
}
