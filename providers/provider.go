// Package providers defines the interface between the planner and the
// providers that create, read, update and delete pond's resources, together
// with the schema language in which providers describe their arguments.
package providers

import (
	"context"
	"log/slog"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Provider is an in-process provider. One Provider value serves one provider
// configuration block; its methods may be called concurrently once Configure
// has returned.
//
// Every call but Schema and Close answers with Diagnostics: errors, which
// fail the operation, and warnings, which pondctl shows the user after the
// plan or apply. The planner completes what a provider leaves out: an error
// without a Summary gets one naming the operation and the instance ("Failed
// to create pool.campus"), and a diagnostic without a Subject points at the
// resource's block (or the provider's) in the configuration.
type Provider interface {
	// Schema describes the provider's own configuration and the resource and
	// data source types it implements.
	Schema() *ProviderSchema
	// Configure is called once, before any other call but Schema and
	// ValidateResourceConfig.
	Configure(ctx context.Context, req ConfigureRequest) ConfigureResponse
	// ValidateResourceConfig checks a managed resource's configuration
	// beyond what the schema says (ranges, mutually exclusive arguments). It
	// may be called before Configure. Unknown values must be accepted. A
	// diagnostic should name the attribute at fault.
	ValidateResourceConfig(ctx context.Context, req ValidateRequest) ValidateResponse
	// PlanResourceChange proposes the new state of a managed resource.
	PlanResourceChange(ctx context.Context, req PlanRequest) PlanResponse
	// ApplyResourceChange creates (Prior is null), updates, or deletes
	// (Planned is null) a managed resource.
	ApplyResourceChange(ctx context.Context, req ApplyRequest) ApplyResponse
	// ReadResource refreshes a managed resource from what is observed. A
	// null New means the resource no longer exists.
	ReadResource(ctx context.Context, req ReadRequest) ReadResponse
	// ImportResource reads an existing object, named by an id, into state.
	ImportResource(ctx context.Context, req ImportRequest) ImportResponse
	// ReadDataSource evaluates a data source.
	ReadDataSource(ctx context.Context, req ReadDataRequest) ReadDataResponse
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
	// HashKey, when not nil, gives the working directory's key for keyed
	// hashes of sensitive values (see HashKey and Hash), for a provider
	// that records something derived from them.
	HashKey func() ([]byte, error)
	// FactoryPools names the pools of the configuration whose central
	// manager runs a pilot factory that a resource gives entries to (a
	// glidein resource with a factory block, whose pool argument refers
	// to pool.NAME): a provider that starts those central managers gives
	// them what the factory signs and certifies its glideins with.
	FactoryPools []string
}

// ConfigureResponse says whether the provider could be configured.
type ConfigureResponse struct {
	Diagnostics hcl.Diagnostics
}

// ValidateRequest asks whether a managed resource's configuration is valid.
type ValidateRequest struct {
	TypeName string
	// Config is the configuration as written, possibly with unknown values.
	Config cty.Value
}

// ValidateResponse is what is wrong with a configuration, or worth a
// warning.
type ValidateResponse struct {
	Diagnostics hcl.Diagnostics
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
	// Lineage is the lineage of the state the instance is recorded in (see
	// state.State), so that a provider can label what it creates with the
	// state and Address that own it.
	Lineage string
	// Sensitive are the paths of Config's values that come from sensitive
	// ones (a sensitive variable): the provider must not show them in its
	// diagnostics or logs, nor write them but where they are needed.
	Sensitive []cty.Path
}

// PlanResponse is the planned new state. Values the provider cannot know
// before apply are unknown.
type PlanResponse struct {
	Planned cty.Value
	// RequiresReplace lists attributes whose change cannot be made in place,
	// beyond those marked ForceNew in the schema.
	RequiresReplace []cty.Path
	Diagnostics     hcl.Diagnostics
	// Cost, when not nil, is what the planned instance costs to run, which
	// the plan shows under the instance.
	Cost *CostEstimate
}

// ApplyRequest asks a provider to make a planned change.
type ApplyRequest struct {
	TypeName string
	Address  string
	// Lineage is the lineage of the state the instance is recorded in: a
	// provider that labels what it creates (cloud tags) names it there
	// with Address, and leaves alone what another lineage labelled.
	Lineage string
	Prior   cty.Value
	Planned cty.Value
	Config  cty.Value
	// Sensitive are the paths of Config's (and Planned's) values that come
	// from sensitive ones: the provider must not show them in its
	// diagnostics, progress or logs, nor write them but where they are
	// needed (a node's private configuration file). The state keeps only a
	// keyed hash of them.
	Sensitive []cty.Path
	// Progress, when not nil, receives short human-readable progress notes.
	Progress func(msg string)
}

// ApplyResponse is the new state after apply. With errors, a non-null New
// records what was partly created so that it is not lost.
type ApplyResponse struct {
	New         cty.Value
	Diagnostics hcl.Diagnostics
}

// ReadRequest asks for the observed state of an instance.
type ReadRequest struct {
	TypeName string
	Address  string
	// Lineage is the lineage of the state the instance is recorded in (see
	// ApplyRequest).
	Lineage string
	Current cty.Value
}

// ReadResponse is the observed state; a null New means it is gone.
type ReadResponse struct {
	New         cty.Value
	Diagnostics hcl.Diagnostics
}

// ImportRequest asks for an existing object's state.
type ImportRequest struct {
	TypeName string
	// ID names the object, as the resource type documents.
	ID string
	// Address is the instance address the object is imported to, such as
	// glidein.hpc.
	Address string
	// Lineage is the lineage of the state the object is imported into
	// (see ApplyRequest.Lineage).
	Lineage string
	// Config is the instance's configuration, evaluated against the
	// state: attributes that refer to what the state lacks are unknown.
	// It is null when the configuration could not be evaluated. A
	// provider whose objects do not tell everything the configuration
	// said may take the rest from it, so that a plan after the import
	// shows no change.
	Config cty.Value
}

// ImportResponse is the imported object's state.
type ImportResponse struct {
	Imported    cty.Value
	Diagnostics hcl.Diagnostics
}

// ReadDataRequest asks a data source for its value.
type ReadDataRequest struct {
	TypeName string
	Address  string
	Config   cty.Value
}

// ReadDataResponse is a data source's value.
type ReadDataResponse struct {
	Value       cty.Value
	Diagnostics hcl.Diagnostics
}

// PlanChecker is implemented by a provider that checks a plan as a whole,
// once every resource of it is planned: limits on what all its resources
// together would run. The planner calls CheckPlan after planning, with
// every planned instance of the provider (no-ops included).
type PlanChecker interface {
	CheckPlan(ctx context.Context, req CheckPlanRequest) CheckPlanResponse
}

// CheckPlanRequest holds a plan's instances of one provider.
type CheckPlanRequest struct {
	Instances []PlannedInstance
}

// PlannedInstance is one managed instance of a plan.
type PlannedInstance struct {
	TypeName string
	// Address is the instance address, such as pool.campus.
	Address string
	// Prior is the instance's value now (null when it is to be created),
	// Planned its value after the plan (null when it is to be deleted).
	Prior   cty.Value
	Planned cty.Value
}

// CheckPlanResponse is what is wrong with a plan as a whole. A diagnostic
// whose Extra is an InstanceAttributeRef is shown at that instance's
// argument.
type CheckPlanResponse struct {
	Diagnostics hcl.Diagnostics
}

// InstanceAttributeRef, as the Extra of a CheckPlan diagnostic, names the
// instance and the argument of its configuration the diagnostic is about.
type InstanceAttributeRef struct {
	Address string
	Name    string
}
