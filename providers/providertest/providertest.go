// Package providertest checks that a provider keeps the providers.Provider
// contract: a well-formed schema, and a full resource life cycle of plan,
// create, refresh, no-op plan, in-place update, import and delete, run
// against the provider's real back end.
package providertest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/providers"
)

// Case is one life-cycle run of a resource type.
type Case struct {
	// TypeName is the resource type, such as "pool".
	TypeName string
	// Address is the instance address (default TYPENAME.test).
	Address string
	// ProviderConfig is the provider block; null means every argument unset.
	ProviderConfig cty.Value
	// WorkDir is ConfigureRequest.WorkDir (default: a fresh t.TempDir()).
	WorkDir string
	// SeaAddr is ConfigureRequest.SeaAddr.
	SeaAddr string
	// Config is the resource configuration to create. Attributes it leaves
	// out are null.
	Config cty.Value
	// Updated, when not null, is a configuration the resource must be
	// updated to in place.
	Updated cty.Value
	// ImportID, when set, returns the import ID of a created resource; the
	// imported object must then agree with the state on ImportVerify.
	ImportID func(state cty.Value) string
	// ImportVerify lists attributes an import must reproduce (default: id).
	ImportVerify []string
	// Check, when set, makes extra assertions on each applied state.
	Check func(t *testing.T, state cty.Value)
	// Timeout bounds the whole run (default 2 minutes).
	Timeout time.Duration
}

// CheckSchema reports what is wrong with a provider schema: attributes
// without a type, attributes that are neither required, optional nor
// computed, both required and computed, or ForceNew on a computed-only
// attribute.
func CheckSchema(s *providers.ProviderSchema) error {
	if s == nil {
		return errors.New("schema is nil")
	}
	var errs []error
	var check func(where string, sc *providers.Schema)
	check = func(where string, sc *providers.Schema) {
		if sc == nil {
			errs = append(errs, fmt.Errorf("%s: schema is nil", where))
			return
		}
		for name, a := range sc.Attributes {
			at := where + "." + name
			switch {
			case a == nil:
				errs = append(errs, fmt.Errorf("%s: nil attribute", at))
				continue
			case a.Type == cty.NilType:
				errs = append(errs, fmt.Errorf("%s: no type", at))
			}
			if !a.Required && !a.Optional && !a.Computed {
				errs = append(errs, fmt.Errorf("%s: neither required, optional nor computed", at))
			}
			if a.Required && (a.Optional || a.Computed) {
				errs = append(errs, fmt.Errorf("%s: required cannot be optional or computed too", at))
			}
			if a.ForceNew && a.Computed && !a.Optional && !a.Required {
				errs = append(errs, fmt.Errorf("%s: ForceNew on a computed-only attribute", at))
			}
		}
		for name, b := range sc.BlockTypes {
			if b == nil {
				errs = append(errs, fmt.Errorf("%s.%s: nil block", where, name))
				continue
			}
			check(where+"."+name, &b.Block)
		}
	}
	check("provider", s.Provider)
	for n, r := range s.Resources {
		check("resource "+n, r)
	}
	for n, d := range s.DataSources {
		check("data "+n, d)
	}
	return errors.Join(errs...)
}

// Object completes attrs to a value of sc's implied type, with null for
// every attribute attrs leaves out.
func Object(sc *providers.Schema, attrs map[string]cty.Value) (cty.Value, error) {
	ty := sc.ImpliedType()
	m := map[string]cty.Value{}
	for n, at := range ty.AttributeTypes() {
		v, ok := attrs[n]
		if !ok {
			m[n] = cty.NullVal(at)
			continue
		}
		if at == cty.DynamicPseudoType {
			m[n] = v
			continue
		}
		cv, err := convert(v, at)
		if err != nil {
			return cty.NilVal, fmt.Errorf("%s: %w", n, err)
		}
		m[n] = cv
	}
	for n := range attrs {
		if !ty.HasAttribute(n) {
			return cty.NilVal, fmt.Errorf("%s: no such attribute", n)
		}
	}
	return cty.ObjectVal(m), nil
}

// ProposedNew computes what the planner proposes: the configuration, with
// computed attributes the configuration leaves null taken from prior.
func ProposedNew(sc *providers.Schema, prior, config cty.Value) cty.Value {
	if config.IsNull() {
		return config
	}
	m := config.AsValueMap()
	for n, a := range sc.Attributes {
		if a.Computed && m[n].IsNull() && !prior.IsNull() {
			m[n] = prior.GetAttr(n)
		}
	}
	return cty.ObjectVal(m)
}

// Run drives one resource through its life cycle against a fresh provider
// from factory, failing t on any breach of the contract.
func Run(t *testing.T, factory providers.Factory, c Case) {
	t.Helper()
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	p := factory()
	schema := p.Schema()
	if err := CheckSchema(schema); err != nil {
		t.Fatalf("schema: %v", err)
	}
	rs := schema.Resources[c.TypeName]
	if rs == nil {
		t.Fatalf("schema has no resource type %q", c.TypeName)
	}
	addr := c.Address
	if addr == "" {
		addr = c.TypeName + ".test"
	}
	wd := c.WorkDir
	if wd == "" {
		wd = t.TempDir()
	}
	pc := c.ProviderConfig
	if pc == cty.NilVal || pc.IsNull() {
		var err error
		if pc, err = Object(schema.Provider, nil); err != nil {
			t.Fatal(err)
		}
	}
	cresp := p.Configure(ctx, providers.ConfigureRequest{Config: pc, WorkDir: wd, SeaAddr: c.SeaAddr,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err := check(t, "Configure", cresp.Diagnostics); err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	var state cty.Value
	cleanup := func() {
		if state == cty.NilVal || state.IsNull() {
			return
		}
		resp := p.ApplyResourceChange(context.Background(), providers.ApplyRequest{
			TypeName: c.TypeName, Address: addr, Prior: state, Planned: cty.NullVal(state.Type()), Config: cty.NullVal(state.Type())})
		if err := check(t, "cleanup delete", resp.Diagnostics); err != nil {
			t.Error(err)
		}
	}
	defer cleanup()

	vresp := p.ValidateResourceConfig(ctx, providers.ValidateRequest{TypeName: c.TypeName, Config: c.Config})
	if err := check(t, "ValidateResourceConfig", vresp.Diagnostics); err != nil {
		t.Fatal(err)
	}
	state = apply(ctx, t, p, rs, c, addr, cty.NullVal(rs.ImpliedType()), c.Config, "create")
	state = refreshAndNoop(ctx, t, p, rs, c, addr, state, c.Config, "create")

	if c.Updated != cty.NilVal && !c.Updated.IsNull() {
		vresp := p.ValidateResourceConfig(ctx, providers.ValidateRequest{TypeName: c.TypeName, Config: c.Updated})
		if err := check(t, "ValidateResourceConfig(updated)", vresp.Diagnostics); err != nil {
			t.Fatal(err)
		}
		state = apply(ctx, t, p, rs, c, addr, state, c.Updated, "update")
		state = refreshAndNoop(ctx, t, p, rs, c, addr, state, c.Updated, "update")
	}

	if c.ImportID != nil {
		id := c.ImportID(state)
		iresp := p.ImportResource(ctx, providers.ImportRequest{TypeName: c.TypeName, ID: id})
		if err := check(t, fmt.Sprintf("ImportResource(%q)", id), iresp.Diagnostics); err != nil {
			t.Fatal(err)
		}
		rr := p.ReadResource(ctx, providers.ReadRequest{TypeName: c.TypeName, Address: addr, Current: iresp.Imported})
		if err := check(t, "ReadResource(imported)", rr.Diagnostics); err != nil {
			t.Fatal(err)
		}
		if rr.New.IsNull() {
			t.Fatalf("ReadResource(imported) returned null")
		}
		verify := c.ImportVerify
		if len(verify) == 0 {
			verify = []string{"id"}
		}
		for _, n := range verify {
			if got, want := rr.New.GetAttr(n), state.GetAttr(n); !got.RawEquals(want) {
				t.Errorf("import %q: %s = %#v, state has %#v", id, n, got, want)
			}
		}
	}

	resp := p.ApplyResourceChange(ctx, providers.ApplyRequest{TypeName: c.TypeName, Address: addr,
		Prior: state, Planned: cty.NullVal(state.Type()), Config: cty.NullVal(state.Type())})
	if err := check(t, "delete", resp.Diagnostics); err != nil {
		t.Fatal(err)
	}
	if resp.New == cty.NilVal || !resp.New.IsNull() {
		t.Fatalf("delete: new state is not null")
	}
	gone := state
	state = cty.NilVal
	rr := p.ReadResource(ctx, providers.ReadRequest{TypeName: c.TypeName, Address: addr, Current: gone})
	if err := check(t, "ReadResource after delete", rr.Diagnostics); err != nil {
		t.Fatal(err)
	}
	if !rr.New.IsNull() {
		t.Fatalf("ReadResource after delete: got %#v, want null", rr.New)
	}
}

// apply plans config against prior, checks the plan, applies it and checks
// the result.
func apply(ctx context.Context, t *testing.T, p providers.Provider, rs *providers.Schema, c Case, addr string, prior, config cty.Value, step string) cty.Value {
	t.Helper()
	proposed := ProposedNew(rs, prior, config)
	plan := p.PlanResourceChange(ctx, providers.PlanRequest{TypeName: c.TypeName, Address: addr,
		Prior: prior, Config: config, ProposedNew: proposed})
	if err := check(t, step+": PlanResourceChange", plan.Diagnostics); err != nil {
		t.Fatal(err)
	}
	if !prior.IsNull() && len(plan.RequiresReplace) > 0 {
		t.Fatalf("%s: plan requires replacement (%d paths); an update case must be in place", step, len(plan.RequiresReplace))
	}
	checkPlanned(t, rs, config, plan.Planned, step)
	resp := p.ApplyResourceChange(ctx, providers.ApplyRequest{TypeName: c.TypeName, Address: addr,
		Prior: prior, Planned: plan.Planned, Config: config, Progress: func(msg string) { t.Logf("%s: %s", step, msg) }})
	if err := check(t, step+": ApplyResourceChange", resp.Diagnostics); err != nil {
		if resp.New != cty.NilVal && !resp.New.IsNull() {
			// Delete what was partly made.
			del := context.Background()
			p.ApplyResourceChange(del, providers.ApplyRequest{TypeName: c.TypeName, Address: addr,
				Prior: resp.New, Planned: cty.NullVal(resp.New.Type()), Config: cty.NullVal(resp.New.Type())})
		}
		t.Fatal(err)
	}
	if resp.New == cty.NilVal || resp.New.IsNull() {
		t.Fatalf("%s: ApplyResourceChange returned a null state", step)
	}
	if !resp.New.IsWhollyKnown() {
		t.Fatalf("%s: applied state has unknown values: %#v", step, resp.New)
	}
	if !resp.New.Type().Equals(rs.ImpliedType()) && !conforms(resp.New, rs) {
		t.Fatalf("%s: applied state type %s does not match the schema", step, resp.New.Type().FriendlyName())
	}
	for n := range rs.Attributes {
		pv, nv := plan.Planned.GetAttr(n), resp.New.GetAttr(n)
		if pv.IsWhollyKnown() && !pv.RawEquals(nv) {
			t.Errorf("%s: %s was planned as %#v but applied as %#v", step, n, pv, nv)
		}
	}
	if c.Check != nil {
		c.Check(t, resp.New)
	}
	return resp.New
}

func conforms(v cty.Value, rs *providers.Schema) bool {
	for n, a := range rs.Attributes {
		if !v.Type().HasAttribute(n) {
			return false
		}
		if a.Type != cty.DynamicPseudoType && !v.GetAttr(n).Type().Equals(a.Type) {
			return false
		}
	}
	return true
}

// checkPlanned checks that unknown values appear only in computed
// attributes and that arguments set in config are planned as written.
func checkPlanned(t *testing.T, rs *providers.Schema, config, planned cty.Value, step string) {
	t.Helper()
	if planned.IsNull() {
		t.Fatalf("%s: planned state is null", step)
	}
	for n, a := range rs.Attributes {
		pv := planned.GetAttr(n)
		if !pv.IsWhollyKnown() && !a.Computed {
			t.Errorf("%s: non-computed attribute %s is unknown in the plan", step, n)
		}
		cv := config.GetAttr(n)
		if !cv.IsNull() && cv.IsWhollyKnown() && pv.IsWhollyKnown() && !cv.RawEquals(pv) {
			t.Errorf("%s: %s is %#v in configuration but planned as %#v", step, n, cv, pv)
		}
	}
}

// refreshAndNoop reads the resource, which must equal state, and plans the
// same configuration again, which must change nothing.
func refreshAndNoop(ctx context.Context, t *testing.T, p providers.Provider, rs *providers.Schema, c Case, addr string, state, config cty.Value, step string) cty.Value {
	t.Helper()
	rr := p.ReadResource(ctx, providers.ReadRequest{TypeName: c.TypeName, Address: addr, Current: state})
	if err := check(t, step+": ReadResource", rr.Diagnostics); err != nil {
		t.Fatal(err)
	}
	if !rr.New.RawEquals(state) {
		t.Fatalf("%s: ReadResource differs from the applied state:\nread:    %#v\napplied: %#v", step, rr.New, state)
	}
	plan := p.PlanResourceChange(ctx, providers.PlanRequest{TypeName: c.TypeName, Address: addr,
		Prior: rr.New, Config: config, ProposedNew: ProposedNew(rs, rr.New, config)})
	if err := check(t, step+": second PlanResourceChange", plan.Diagnostics); err != nil {
		t.Fatal(err)
	}
	if len(plan.RequiresReplace) > 0 || !plan.Planned.RawEquals(rr.New) {
		t.Fatalf("%s: planning the same configuration again is not a no-op:\nplanned: %#v\nstate:   %#v", step, plan.Planned, rr.New)
	}
	return rr.New
}

// check returns the errors of a call's diagnostics, prefixed with what was
// called, and logs its warnings. A nil diagnostic and a warning without a
// summary break the contract and are errors too.
func check(t *testing.T, call string, diags hcl.Diagnostics) error {
	t.Helper()
	for _, d := range diags {
		switch {
		case d == nil:
			return fmt.Errorf("%s: a diagnostic is nil", call)
		case d.Severity == hcl.DiagWarning && d.Summary == "":
			return fmt.Errorf("%s: a warning has no summary (detail %q)", call, d.Detail)
		case d.Severity == hcl.DiagWarning:
			t.Logf("%s: warning: %s: %s", call, d.Summary, d.Detail)
		}
	}
	if err := providers.Err(diags); err != nil {
		return fmt.Errorf("%s: %w", call, err)
	}
	return nil
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
