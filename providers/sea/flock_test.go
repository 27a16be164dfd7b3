package sea

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/providers"
)

const fastFlock = "POND_FLOCK_INTERVAL = 200ms\nPOND_FLOCK_TTL = 2s\n"

// flocksAt names the flocks the central manager at addr keeps, with
// what they are there: NAME:out, NAME:in(POOLS), NAME:out+in(POOLS).
func flocksAt(t *testing.T, c *api.Client) []string {
	t.Helper()
	st, err := c.Flock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range st.Flocks {
		var parts []string
		if f.Out != nil {
			parts = append(parts, "out")
		}
		if f.In != nil {
			parts = append(parts, "in("+strings.Join(f.In.From, ",")+")")
		}
		out = append(out, f.Name+":"+strings.Join(parts, "+"))
	}
	return out
}

// TestFlockLifecycle applies a flock between the central managers of a
// real sea: create sets an out policy on the source and an in policy on
// the destination, and the willing list it returns (and refresh reads)
// names the destination; an update that moves the destination removes the
// flock from the old one; a flock whose source is no central manager is
// refused at the argument; destroy removes it everywhere.
func TestFlockLifecycle(t *testing.T) {
	s := startSea(t,
		node{name: "busy-0", role: "cm", pool: "busy", config: fastFlock},
		node{name: "spare-0", role: "cm", pool: "spare", config: fastFlock},
		node{name: "other-0", role: "cm", pool: "other", config: fastFlock},
		node{name: "free", config: fastFlock})
	p := configured(t, s.api("busy-0"))
	ctx := t.Context()
	list := func(addrs ...string) cty.Value {
		var vs []cty.Value
		for _, a := range addrs {
			vs = append(vs, cty.StringVal(a))
		}
		return cty.ListVal(vs)
	}
	apply := func(prior, planned cty.Value) providers.ApplyResponse {
		t.Helper()
		return p.ApplyResourceChange(ctx, providers.ApplyRequest{TypeName: "flock", Address: "flock.overflow", Prior: prior, Planned: planned, Config: planned})
	}
	willing := func(v cty.Value) []string {
		var out []string
		for _, w := range v.GetAttr("willing").AsValueSlice() {
			out = append(out, w.GetAttr("from").AsString()+"->"+w.GetAttr("pool").AsString())
		}
		return out
	}
	// Every announcement reaches busy before the flock is set.
	eventually(t, 20*time.Second, "the announcements at busy", func() error {
		st, err := s.client("busy-0").Flock(ctx)
		if err != nil || len(st.Sea) != 3 {
			return fmt.Errorf("%v %+v", err, st)
		}
		for _, a := range st.Sea {
			if a.IdleSlots == 0 {
				return fmt.Errorf("no idle slot announced yet: %+v", a)
			}
		}
		return nil
	})

	cfg := object(t, flockSchema, map[string]cty.Value{"from": list(s.api("busy-0")), "to": list(s.api("spare-0")), "max_jobs": cty.NumberIntVal(4)})
	resp := apply(cty.NullVal(cfg.Type()), cfg)
	if err := providers.Err(resp.Diagnostics); err != nil {
		t.Fatal(err)
	}
	created := resp.New
	if created.GetAttr("id").AsString() != "flock.overflow" || !slices.Equal(willing(created), []string{"busy->spare"}) {
		t.Fatalf("created: id %s, willing %v", created.GetAttr("id").AsString(), willing(created))
	}
	if got := flocksAt(t, s.client("busy-0")); !slices.Equal(got, []string{"flock.overflow:out"}) {
		t.Errorf("busy keeps %v", got)
	}
	if got := flocksAt(t, s.client("spare-0")); !slices.Equal(got, []string{"flock.overflow:in(busy)"}) {
		t.Errorf("spare keeps %v", got)
	}
	read := p.ReadResource(ctx, providers.ReadRequest{TypeName: "flock", Address: "flock.overflow", Current: created})
	if err := providers.Err(read.Diagnostics); err != nil || !slices.Equal(willing(read.New), []string{"busy->spare"}) {
		t.Fatalf("read: %v, willing %v", err, willing(read.New))
	}

	// Plan: the same configuration plans no change; a new destination
	// makes the willing list unknown.
	same := p.PlanResourceChange(ctx, providers.PlanRequest{TypeName: "flock", Address: "flock.overflow", Prior: read.New, Config: cfg, ProposedNew: read.New})
	if !same.Planned.RawEquals(read.New) {
		t.Errorf("planned %#v, want the prior state", same.Planned)
	}
	moved := object(t, flockSchema, map[string]cty.Value{"from": list(s.api("busy-0")), "to": list(s.api("other-0")),
		"max_jobs": cty.NumberIntVal(4), "id": cty.StringVal("flock.overflow"), "willing": read.New.GetAttr("willing")})
	plan := p.PlanResourceChange(ctx, providers.PlanRequest{TypeName: "flock", Address: "flock.overflow", Prior: read.New, Config: moved, ProposedNew: moved})
	if plan.Planned.GetAttr("willing").IsKnown() {
		t.Errorf("a new destination keeps the willing list known")
	}
	resp = apply(read.New, plan.Planned)
	if err := providers.Err(resp.Diagnostics); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(willing(resp.New), []string{"busy->other"}) {
		st, _ := s.client("busy-0").Flock(ctx)
		t.Errorf("after the move: willing %v; busy now %+v", willing(resp.New), st)
	}
	if got := flocksAt(t, s.client("spare-0")); len(got) != 0 {
		t.Errorf("spare still keeps %v", got)
	}
	if got := flocksAt(t, s.client("other-0")); !slices.Equal(got, []string{"flock.overflow:in(busy)"}) {
		t.Errorf("other keeps %v", got)
	}

	// A source that is no central manager: refused at from, nothing set.
	bad := object(t, flockSchema, map[string]cty.Value{"from": list(s.api("free"))})
	r := p.ApplyResourceChange(ctx, providers.ApplyRequest{TypeName: "flock", Address: "flock.bad", Prior: cty.NullVal(bad.Type()), Planned: bad, Config: bad})
	if err := providers.Err(r.Diagnostics); err == nil || !strings.Contains(err.Error(), "not a pool's central manager") ||
		r.Diagnostics[0].Extra != providers.AttributeRef("from") {
		t.Errorf("a flock from a free node: %v", err)
	}
	// A pool flocking to itself.
	self := object(t, flockSchema, map[string]cty.Value{"from": list(s.api("busy-0")), "to": list(s.api("busy-0"))})
	r = p.ApplyResourceChange(ctx, providers.ApplyRequest{TypeName: "flock", Address: "flock.self", Prior: cty.NullVal(self.Type()), Planned: self, Config: self})
	if err := providers.Err(r.Diagnostics); err == nil || !strings.Contains(err.Error(), "does not flock to itself") {
		t.Errorf("a flock of busy to itself: %v", err)
	}

	// Destroy: gone everywhere, and a read then finds nothing.
	final := resp.New
	resp = apply(final, cty.NullVal(final.Type()))
	if err := providers.Err(resp.Diagnostics); err != nil || !resp.New.IsNull() {
		t.Fatalf("destroy: %v %#v", err, resp.New)
	}
	for _, n := range []string{"busy-0", "other-0"} {
		if got := flocksAt(t, s.client(n)); len(got) != 0 {
			t.Errorf("%s still keeps %v", n, got)
		}
	}
	if read := p.ReadResource(ctx, providers.ReadRequest{TypeName: "flock", Address: "flock.overflow", Current: final}); !read.New.IsNull() {
		t.Errorf("read after destroy: %#v", read.New)
	}
}

// TestFlockFollowsTheActingManager applies a flock from busy to spare,
// whose manager keeps one replica, and stops spare's manager: the replica
// takes over with the flock, refresh shows spare willing at the
// replica's address (the flock names its destination by pool), an apply
// that still names the old manager's address sets the flock on the
// replica, and destroy removes it there.
func TestFlockFollowsTheActingManager(t *testing.T) {
	const replicated = fastFlock + "POND_CM_REPLICAS = 1\nPOND_CM_REPLICATE_INTERVAL = 200ms\n"
	s := startSea(t,
		node{name: "busy-0", role: "cm", pool: "busy", config: fastFlock},
		node{name: "spare-0", role: "cm", pool: "spare", config: replicated},
		node{name: "spare-1", pool: "spare", config: replicated, cm: "spare-0"})
	p := configured(t, s.api("busy-0"))
	ctx := t.Context()
	from, to := cty.ListVal([]cty.Value{cty.StringVal(s.api("busy-0"))}), cty.ListVal([]cty.Value{cty.StringVal(s.api("spare-0"))})
	cfg := object(t, flockSchema, map[string]cty.Value{"from": from, "to": to})
	willingAt := func(v cty.Value) []string {
		var out []string
		for _, w := range v.GetAttr("willing").AsValueSlice() {
			out = append(out, w.GetAttr("pool").AsString()+"@"+w.GetAttr("api").AsString())
		}
		return out
	}
	var created cty.Value
	eventually(t, 30*time.Second, "the flock applied with spare willing", func() error {
		resp := p.ApplyResourceChange(ctx, providers.ApplyRequest{TypeName: "flock", Address: "flock.f", Prior: cty.NullVal(cfg.Type()), Planned: cfg, Config: cfg})
		if err := providers.Err(resp.Diagnostics); err != nil {
			return err
		}
		created = resp.New
		if w := willingAt(created); len(w) != 1 {
			return fmt.Errorf("willing %v", w)
		}
		return nil
	})
	eventually(t, 20*time.Second, "spare-1 to hold the flock", func() error {
		st, err := s.client("spare-1").Failover(ctx)
		if err != nil || st.State == nil || !strings.Contains(string(st.State.Flocks), "flock.f") {
			return fmt.Errorf("spare-1's state %+v (%v)", st, err)
		}
		return nil
	})

	s.stop("spare-0")
	want := []string{"spare@" + s.api("spare-1")}
	eventually(t, 30*time.Second, "refresh to show spare at the replica", func() error {
		read := p.ReadResource(ctx, providers.ReadRequest{TypeName: "flock", Address: "flock.f", Current: created})
		if err := providers.Err(read.Diagnostics); err != nil {
			return err
		}
		if w := willingAt(read.New); !slices.Equal(w, want) {
			return fmt.Errorf("willing %v, want %v", w, want)
		}
		return nil
	})
	if got := flocksAt(t, s.client("spare-1")); !slices.Equal(got, []string{"flock.f:in(busy)"}) {
		t.Errorf("the acting replica keeps %v", got)
	}
	// An apply that names the old manager: set on the replica.
	changed := object(t, flockSchema, map[string]cty.Value{"from": from, "to": to, "max_jobs": cty.NumberIntVal(3)})
	resp := p.ApplyResourceChange(ctx, providers.ApplyRequest{TypeName: "flock", Address: "flock.f", Prior: created, Planned: changed, Config: changed})
	if err := providers.Err(resp.Diagnostics); err != nil {
		t.Fatalf("apply naming the stopped manager: %v", err)
	}
	if w := willingAt(resp.New); !slices.Equal(w, want) {
		t.Errorf("willing after the apply %v, want %v", w, want)
	}
	// Destroy removes it from the replica.
	resp = p.ApplyResourceChange(ctx, providers.ApplyRequest{TypeName: "flock", Address: "flock.f", Prior: resp.New, Planned: cty.NullVal(cfg.Type())})
	if err := providers.Err(resp.Diagnostics); err != nil {
		t.Fatal(err)
	}
	if got := flocksAt(t, s.client("spare-1")); len(got) != 0 {
		t.Errorf("the acting replica keeps %v after destroy", got)
	}
}
