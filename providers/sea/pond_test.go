package sea

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/submit"
	"github.com/pond-htc/pond/condor/tools"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/providers/providertest"
)

// TestPondDrainArguments checks the pond's drain and drain_timeout: what a
// release asks of the members, and the errors for values that are not.
func TestPondDrainArguments(t *testing.T) {
	base := map[string]cty.Value{
		"central_manager": cty.StringVal("127.0.0.1:9618"),
		"requirements":    cty.StringVal("true"),
	}
	for _, tc := range []struct {
		name  string
		attrs map[string]cty.Value
		want  api.Drain
		err   string
	}{
		{name: "default waits", want: api.Drain{Mode: api.DrainWait}},
		{name: "wait with a timeout", attrs: map[string]cty.Value{"drain": cty.StringVal("wait"), "drain_timeout": cty.StringVal("90s")},
			want: api.Drain{Mode: api.DrainWait, Timeout: 90 * time.Second}},
		{name: "evict", attrs: map[string]cty.Value{"drain": cty.StringVal("evict")}, want: api.Drain{Mode: api.DrainEvict}},
		{name: "unknown mode", attrs: map[string]cty.Value{"drain": cty.StringVal("graceful")}, err: `drain: drain mode "graceful": want "wait" or "evict"`},
		{name: "bad timeout", attrs: map[string]cty.Value{"drain_timeout": cty.StringVal("soon")}, err: `drain_timeout: "soon" is not a positive duration`},
		{name: "zero timeout", attrs: map[string]cty.Value{"drain_timeout": cty.StringVal("0s")}, err: `drain_timeout: "0s" is not a positive duration`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attrs := map[string]cty.Value{}
			for k, v := range base {
				attrs[k] = v
			}
			for k, v := range tc.attrs {
				attrs[k] = v
			}
			cfg, err := providertest.Object(pondSchema, attrs)
			if err != nil {
				t.Fatal(err)
			}
			verr := providers.Err(New().ValidateResourceConfig(context.Background(), providers.ValidateRequest{TypeName: "pond", Config: cfg}).Diagnostics)
			if tc.err != "" {
				if verr == nil || !strings.Contains(verr.Error(), tc.err) {
					t.Fatalf("error = %v, want one containing %q", verr, tc.err)
				}
				return
			}
			if verr != nil {
				t.Fatal(verr)
			}
			if got := drainOf(cfg); got != tc.want {
				t.Fatalf("drain = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The pond the tests apply.
const pondAddr = "pond.burst"

// pondConfig is a pond at sea's central manager cm of the nodes with a
// Score, best Score first, with attrs over that.
func pondConfig(t *testing.T, s *testSea, attrs map[string]cty.Value) cty.Value {
	t.Helper()
	all := map[string]cty.Value{
		"central_manager": cty.StringVal(s.api("cm")),
		"requirements":    cty.StringVal("Score > 0"),
		"rank":            cty.StringVal("Score"),
	}
	for k, v := range attrs {
		all[k] = v
	}
	return object(t, pondSchema, all)
}

// plan plans cfg over prior, as pondctl plan does.
func plan(t *testing.T, p providers.Provider, prior, cfg cty.Value) providers.PlanResponse {
	t.Helper()
	if prior == cty.NilVal {
		prior = cty.NullVal(pondSchema.ImpliedType())
	}
	return p.PlanResourceChange(t.Context(), providers.PlanRequest{TypeName: "pond", Address: pondAddr,
		Prior: prior, Config: cfg, ProposedNew: providertest.ProposedNew(pondSchema, prior, cfg)})
}

// planWhole plans cfg over prior as plan does, again while the plan warns
// that part of the sea did not answer its query (a loaded machine may
// keep an agent from answering in time), up to five times.
func planWhole(t *testing.T, p providers.Provider, prior, cfg cty.Value) providers.PlanResponse {
	t.Helper()
	for i := 1; ; i++ {
		pr := plan(t, p, prior, cfg)
		if i == 5 || !strings.Contains(fmt.Sprint(pr.Diagnostics), "may be missing") {
			return pr
		}
		t.Logf("plan %d: %v; planning again", i, pr.Diagnostics)
	}
}

// applied is what planning and applying a pond made.
type applied struct {
	planned  cty.Value
	new      cty.Value
	diags    hcl.Diagnostics
	progress []string
}

// progressText is the progress notes, one per line.
func (a applied) progressText() string { return strings.Join(a.progress, "\n") }

// planApply plans cfg over prior and applies the plan (a null cfg: the
// deletion of prior), as pondctl apply does, and checks that the applied
// state keeps every value the plan knew.
func planApply(t *testing.T, p providers.Provider, prior, cfg cty.Value) applied {
	t.Helper()
	if prior == cty.NilVal {
		prior = cty.NullVal(pondSchema.ImpliedType())
	}
	var a applied
	a.planned = cty.NullVal(pondSchema.ImpliedType())
	if !cfg.IsNull() {
		pr := plan(t, p, prior, cfg)
		if err := providers.Err(pr.Diagnostics); err != nil {
			t.Fatalf("plan: %v", err)
		}
		a.planned = pr.Planned
	}
	var mu sync.Mutex
	resp := p.ApplyResourceChange(t.Context(), providers.ApplyRequest{TypeName: "pond", Address: pondAddr,
		Prior: prior, Planned: a.planned, Config: cfg, Progress: func(msg string) {
			mu.Lock()
			a.progress = append(a.progress, msg)
			mu.Unlock()
		}})
	a.new, a.diags = resp.New, resp.Diagnostics
	if a.new == cty.NilVal {
		t.Fatalf("apply returned no state (%v)", providers.Err(a.diags))
	}
	if a.planned.IsNull() || a.new.IsNull() {
		return a
	}
	for name := range pondSchema.Attributes {
		pv, nv := a.planned.GetAttr(name), a.new.GetAttr(name)
		if pv.IsWhollyKnown() && !pv.RawEquals(nv) {
			t.Errorf("%s was planned as %#v but applied as %#v", name, pv, nv)
		}
	}
	if !a.new.IsWhollyKnown() {
		t.Errorf("applied state has unknown values: %#v", a.new)
	}
	return a
}

// mustApply is planApply that fails the test on an error.
func mustApply(t *testing.T, p providers.Provider, prior, cfg cty.Value) applied {
	t.Helper()
	a := planApply(t, p, prior, cfg)
	if err := providers.Err(a.diags); err != nil {
		t.Fatalf("apply: %v\nprogress:\n%s", err, a.progressText())
	}
	return a
}

// read refreshes state.
func read(t *testing.T, p providers.Provider, state cty.Value) providers.ReadResponse {
	t.Helper()
	resp := p.ReadResource(t.Context(), providers.ReadRequest{TypeName: "pond", Address: pondAddr, Current: state})
	if err := providers.Err(resp.Diagnostics); err != nil {
		t.Fatalf("read: %v", err)
	}
	return resp
}

// wantMembers checks a pond's members, best first, with their API
// addresses and ranks, and that each says so through its own API.
func wantMembers(t *testing.T, s *testSea, state cty.Value, want ...string) {
	t.Helper()
	got := strs(state.GetAttr("members"))
	if joined(got) != joined(want) {
		t.Fatalf("members %v, want %v", got, want)
	}
	if d := names(state.GetAttr("member_details")); joined(d) != joined(want) {
		t.Fatalf("member_details %v, want %v", d, want)
	}
	id := state.GetAttr("id").AsString()
	cm := state.GetAttr("central_manager").AsString()
	for _, m := range state.GetAttr("member_details").AsValueSlice() {
		name := m.GetAttr("name").AsString()
		if a := m.GetAttr("api").AsString(); a != s.api(name) {
			t.Errorf("%s: api %s, want %s", name, a, s.api(name))
		}
		if r, _ := m.GetAttr("rank").AsBigFloat().Float64(); r != float64(s.score(name)) {
			t.Errorf("%s: rank %v, want its Score %d", name, r, s.score(name))
		}
		s.checkMember(t, name, pondAddr, id, cm)
	}
}

// TestPondPlan plans new ponds: the candidates a tree query finds, best
// first, leaving out the nodes of declared pools and the central manager;
// what the plan cannot know yet; and the warnings of a query that fails or
// does not reach the whole sea.
func TestPondPlan(t *testing.T) {
	s := querySea(t)
	p := configured(t, "")
	unknownMembers := func(t *testing.T, planned cty.Value) {
		t.Helper()
		for _, n := range []string{"id", "members", "member_details"} {
			if planned.GetAttr(n).IsKnown() {
				t.Errorf("%s is known before the pond exists: %#v", n, planned.GetAttr(n))
			}
		}
	}
	for _, tc := range []struct {
		name  string
		attrs map[string]cty.Value
		// candidates, best first; nil: not known at plan time.
		candidates []string
		size       int64
		warning    string
	}{
		// picky ranks above n4 but is a candidate all the same: only the
		// invitation tells that it declines.
		{name: "best by rank", attrs: map[string]cty.Value{"size": cty.NumberIntVal(2)}, candidates: []string{"picky", "n4"}, size: 2},
		{name: "size defaults to 1", candidates: []string{"picky"}, size: 1},
		{name: "no rank: by name", attrs: map[string]cty.Value{"rank": cty.NullVal(cty.String), "size": cty.NumberIntVal(3)},
			candidates: []string{"n1", "n2", "n3"}, size: 3},
		{name: "empty requirements match every free node", attrs: map[string]cty.Value{"requirements": cty.StringVal(""), "size": cty.NumberIntVal(10)},
			candidates: []string{"picky", "n4", "n3", "n2", "n1"}, size: 10},
		{name: "first-fit", attrs: map[string]cty.Value{"mode": cty.StringVal("first-fit"), "size": cty.NumberIntVal(2)}, size: 2},
		{name: "rooted elsewhere", attrs: map[string]cty.Value{"sea": cty.StringVal(s.api("n1")), "size": cty.NumberIntVal(2)}, candidates: []string{"picky", "n4"}, size: 2},
		{name: "central manager not known yet", attrs: map[string]cty.Value{"central_manager": cty.UnknownVal(cty.String)}, size: 1},
		{name: "requirements not known yet", attrs: map[string]cty.Value{"requirements": cty.UnknownVal(cty.String)}, size: 1},
		{name: "central manager gone", attrs: map[string]cty.Value{"central_manager": cty.StringVal("127.0.0.1:1")}, size: 1,
			warning: "No candidates for " + pondAddr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := pondConfig(t, s, tc.attrs)
			resp := plan(t, p, cty.NilVal, cfg)
			if err := providers.Err(resp.Diagnostics); err != nil {
				t.Fatal(err)
			}
			if w := warnings(resp.Diagnostics); tc.warning == "" && len(w) > 0 || tc.warning != "" && (len(w) != 1 || w[0] != tc.warning) {
				t.Fatalf("warnings %v, want %q", w, tc.warning)
			}
			planned := resp.Planned
			unknownMembers(t, planned)
			if got := planned.GetAttr("size"); !got.RawEquals(cty.NumberIntVal(tc.size)) {
				t.Errorf("size %#v, want %d", got, tc.size)
			}
			// The arguments are planned as written.
			for name, a := range pondSchema.Attributes {
				if c := cfg.GetAttr(name); !a.Computed && !c.IsNull() && !c.RawEquals(planned.GetAttr(name)) {
					t.Errorf("%s planned as %#v, configured %#v", name, planned.GetAttr(name), c)
				}
			}
			cands := planned.GetAttr("candidates")
			switch {
			case tc.name == "first-fit":
				if got := names(cands); len(got) != 2 || slices.Contains(got, "campus") || slices.Contains(got, "cm") {
					t.Errorf("candidates %v, want two free nodes", got)
				}
			case tc.candidates == nil:
				if cands.IsKnown() {
					t.Errorf("candidates %#v, want unknown", cands)
				}
			default:
				if got := names(cands); joined(got) != joined(tc.candidates) {
					t.Errorf("candidates %v, want %v", got, tc.candidates)
				}
				for _, c := range cands.AsValueSlice() {
					name := c.GetAttr("name").AsString()
					if a := c.GetAttr("api").AsString(); a != s.api(name) {
						t.Errorf("%s: api %s, want %s", name, a, s.api(name))
					}
					if r, _ := c.GetAttr("rank").AsBigFloat().Float64(); tc.attrs["rank"] == cty.NilVal && r != float64(s.score(name)) {
						t.Errorf("%s: rank %v, want %d", name, r, s.score(name))
					}
				}
			}
		})
	}

	t.Run("incomplete", func(t *testing.T) {
		breakTree(t, s, "n4")
		resp := plan(t, p, cty.NilVal, pondConfig(t, s, map[string]cty.Value{"size": cty.NumberIntVal(2)}))
		if err := providers.Err(resp.Diagnostics); err != nil {
			t.Fatal(err)
		}
		if w := warnings(resp.Diagnostics); len(w) != 1 || w[0] != "Candidates of "+pondAddr+" may be missing" {
			t.Fatalf("warnings %v", w)
		}
		if got := names(resp.Planned.GetAttr("candidates")); joined(got) != joined([]string{"picky", "n3"}) {
			t.Fatalf("candidates %v, want those that answered: picky n3", got)
		}
	})
}

// TestPond takes a pond through its life over a sea of in-process agents:
// created (a node that declines replaced by the next candidate, members
// pointed at the central manager and stamped), read, planned again,
// renewed, grown, refilled after a member left it, shrunk and destroyed.
func TestPond(t *testing.T) {
	s := querySea(t)
	p := configured(t, "")
	lease := func(t *testing.T, name string, want time.Duration) {
		t.Helper()
		m := s.membership(name)
		if m == nil {
			t.Fatalf("%s is no member", name)
		}
		if d := time.Until(m.Expires); d > want || d < want-time.Minute {
			t.Errorf("%s: lease expires in %s, want %s", name, d.Round(time.Second), want)
		}
	}
	cfg := pondConfig(t, s, map[string]cty.Value{
		"size":       cty.NumberIntVal(2),
		"lease":      cty.StringVal("1h"),
		"attributes": cty.MapVal(map[string]cty.Value{"Project": cty.StringVal(`"burst"`)}),
	})

	a := mustApply(t, p, cty.NilVal, cfg)
	state := a.new
	// picky ranks first but declines; n3 takes its place.
	wantMembers(t, s, state, "n4", "n3")
	if !strings.Contains(a.progressText(), "2 of 2 members joined: n4, n3") {
		t.Errorf("progress does not name who joined:\n%s", a.progressText())
	}
	id := state.GetAttr("id").AsString()
	if len(id) != 36 {
		t.Errorf("id %q is not a UUID", id)
	}
	if ch, cm := state.GetAttr("condor_host"), state.GetAttr("central_manager"); !ch.RawEquals(cm) {
		t.Errorf("condor_host %#v, want the central manager %#v", ch, cm)
	}
	if got := names(state.GetAttr("candidates")); joined(got) != joined([]string{"picky", "n4"}) {
		t.Errorf("candidates %v, want what the plan showed", got)
	}
	for _, n := range []string{"picky", "n2", "n1"} {
		s.checkFree(t, n)
	}
	if self := s.self("campus"); self.Pond != "" || self.Pool != "campus" {
		t.Errorf("campus: pond %q pool %q", self.Pond, self.Pool)
	}
	lease(t, "n4", time.Hour)
	// The pond's attributes are stamped on its members' machine ads.
	q := readQuery(t, configured(t, s.api("cm")), map[string]cty.Value{"requirements": cty.StringVal(`Project == "burst"`), "rank": cty.StringVal("Score"),
		"attrs": cty.ListVal([]cty.Value{cty.StringVal("PondName"), cty.StringVal("PondID")})})
	if got := names(q.Value.GetAttr("matches")); joined(got) != "[n4 n3]" {
		t.Errorf("nodes stamped Project: %v", got)
	}
	for _, m := range q.Value.GetAttr("matches").AsValueSlice() {
		if at := m.GetAttr("attributes"); at.Index(cty.StringVal("PondName")).AsString() != pondAddr || at.Index(cty.StringVal("PondID")).AsString() != id {
			t.Errorf("%s: stamped %#v", m.GetAttr("name").AsString(), at)
		}
	}

	t.Run("read", func(t *testing.T) {
		rr := read(t, p, state)
		if !rr.New.RawEquals(state) || len(rr.Diagnostics) > 0 {
			t.Fatalf("read %#v (%v), want the applied state", rr.New, rr.Diagnostics)
		}
		pr := plan(t, p, state, cfg)
		if !pr.Planned.RawEquals(state) || len(pr.Diagnostics) > 0 {
			t.Fatalf("planning the same configuration again: %#v (%v), want no change", pr.Planned, pr.Diagnostics)
		}
	})

	t.Run("lease renewed, attributes changed", func(t *testing.T) {
		cfg = pondConfig(t, s, map[string]cty.Value{
			"size":       cty.NumberIntVal(2),
			"lease":      cty.StringVal("2h"),
			"attributes": cty.MapVal(map[string]cty.Value{"Project": cty.StringVal(`"chemistry"`)}),
		})
		state = mustApply(t, p, state, cfg).new
		wantMembers(t, s, state, "n4", "n3")
		lease(t, "n4", 2*time.Hour)
		lease(t, "n3", 2*time.Hour)
		for _, n := range []string{"n4", "n3"} {
			cur, err := s.client(n).Membership(t.Context())
			if err != nil || cur == nil || cur.Attributes["Project"] != `"chemistry"` {
				t.Errorf("%s: membership %+v, %v; want Project = \"chemistry\"", n, cur, err)
			}
		}
	})

	t.Run("grown", func(t *testing.T) {
		cfg = pondConfig(t, s, map[string]cty.Value{"size": cty.NumberIntVal(3), "lease": cty.StringVal("2h")})
		pr := planWhole(t, p, state, cfg)
		if pr.Planned.GetAttr("members").IsKnown() || !pr.Planned.GetAttr("id").RawEquals(cty.StringVal(id)) {
			t.Errorf("plan: members %#v id %#v, want members unknown and the id kept", pr.Planned.GetAttr("members"), pr.Planned.GetAttr("id"))
		}
		// Members of the pond itself are candidates again.
		if got := names(pr.Planned.GetAttr("candidates")); joined(got) != "[picky n4 n3]" {
			t.Errorf("plan: candidates %v (%v)", got, pr.Diagnostics)
		}
		state = mustApply(t, p, state, cfg).new
		wantMembers(t, s, state, "n4", "n3", "n2")
		if !state.GetAttr("id").RawEquals(cty.StringVal(id)) {
			t.Errorf("id %#v, want %s kept", state.GetAttr("id"), id)
		}
	})

	t.Run("a released member is dropped and replaced", func(t *testing.T) {
		if r, err := s.client("n3").Release(t.Context(), id, api.Drain{Mode: api.DrainEvict}); err != nil || !r.Released {
			t.Fatalf("release: %+v, %v", r, err)
		}
		rr := read(t, p, state)
		wantMembers(t, s, rr.New, "n4", "n2")
		pr := plan(t, p, rr.New, cfg)
		if pr.Planned.GetAttr("members").IsKnown() {
			t.Errorf("the plan does not refill the pond: %#v", pr.Planned)
		}
		state = mustApply(t, p, rr.New, cfg).new
		wantMembers(t, s, state, "n4", "n3", "n2")
	})

	t.Run("shrunk", func(t *testing.T) {
		cfg = pondConfig(t, s, map[string]cty.Value{"size": cty.NumberIntVal(1), "lease": cty.StringVal("2h")})
		a := mustApply(t, p, state, cfg)
		state = a.new
		// The lowest ranks leave.
		wantMembers(t, s, state, "n4")
		for _, n := range []string{"n3", "n2"} {
			s.checkFree(t, n)
			if !strings.Contains(a.progressText(), n+" back in the sea (no job running)") {
				t.Errorf("progress does not say %s is back in the sea:\n%s", n, a.progressText())
			}
		}
	})

	// central_manager is ForceNew: the planner replaces the pond, and the
	// plan shows a new one, with a new id and members to come.
	t.Run("a new central manager", func(t *testing.T) {
		moved := pondConfig(t, s, map[string]cty.Value{"size": cty.NumberIntVal(1), "lease": cty.StringVal("2h"), "central_manager": cty.StringVal(s.api("n1"))})
		pr := plan(t, p, state, moved)
		if err := providers.Err(pr.Diagnostics); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"id", "members", "member_details"} {
			if pr.Planned.GetAttr(n).IsKnown() {
				t.Errorf("%s planned as %#v, want unknown", n, pr.Planned.GetAttr(n))
			}
		}
		// n4 is a member of the pond being replaced, so no candidate of
		// the new one.
		if got := names(pr.Planned.GetAttr("candidates")); joined(got) != "[picky]" {
			t.Errorf("candidates %v", got)
		}
	})

	t.Run("destroyed", func(t *testing.T) {
		a := mustApply(t, p, state, cty.NullVal(pondSchema.ImpliedType()))
		if !a.new.IsNull() {
			t.Fatalf("state after destroy: %#v", a.new)
		}
		s.checkFree(t, "n4")
		for _, want := range []string{"releasing 1 member(s), letting running jobs finish, up to 10m0s", "n4 back in the sea (no job running)"} {
			if !strings.Contains(a.progressText(), want) {
				t.Errorf("progress does not say %q:\n%s", want, a.progressText())
			}
		}
		// Nothing of the pond is left: read finds it gone.
		if rr := read(t, p, state); !rr.New.IsNull() {
			t.Fatalf("read after destroy: %#v, want null", rr.New)
		}
	})
}

// TestPondMinSize fills a pond from a sea with fewer nodes that accept
// than it asks for: it keeps what it found when that is min_size or more,
// and fails, keeping the members in the state and naming who declined,
// when it is not.
func TestPondMinSize(t *testing.T) {
	s := querySea(t)
	p := configured(t, "")
	for _, tc := range []struct {
		name    string
		minSize cty.Value
		err     string
	}{
		{name: "met", minSize: cty.NumberIntVal(3)},
		{name: "not met", minSize: cty.NullVal(cty.Number),
			err: "pond has 4 of the 5 members it needs: the sea has no more matching nodes that accept; declined: picky (declined by the join policy false)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := planApply(t, p, cty.NilVal, pondConfig(t, s, map[string]cty.Value{"size": cty.NumberIntVal(5), "min_size": tc.minSize}))
			if a.new.IsNull() {
				t.Fatalf("no state: %v", providers.Err(a.diags))
			}
			defer func() {
				if d := planApply(t, p, a.new, cty.NullVal(pondSchema.ImpliedType())); providers.Err(d.diags) != nil {
					t.Errorf("destroy: %v", providers.Err(d.diags))
				}
			}()
			err := providers.Err(a.diags)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("apply: %v, want %q", err, tc.err)
			}
			wantMembers(t, s, a.new, "n4", "n3", "n2", "n1")
			if !strings.Contains(a.progressText(), "4 of 5 members joined: n4, n3, n2, n1") {
				t.Errorf("progress:\n%s", a.progressText())
			}
			s.checkFree(t, "picky")
		})
	}
}

// TestPondMembersGone reads ponds whose members left the sea, and ponds
// whose central manager is gone: members withdraw from those on their own,
// and a pond no node holds any more reads as gone when the sea can vouch
// for it.
func TestPondMembersGone(t *testing.T) {
	free := "POND_ORPHAN_TIMEOUT = 1s\n"
	cm := "DAEMON_LIST = MASTER COLLECTOR NEGOTIATOR SCHEDD\n"
	s := startSea(t,
		node{name: "cm", role: "cm", pool: "manager", config: cm},
		node{name: "cm2", role: "cm", pool: "manager2", config: cm},
		node{name: "cm3", role: "cm", pool: "manager3", config: cm},
		node{name: "a", score: 1, config: free},
		node{name: "b", score: 2, config: free},
		node{name: "c", score: 3, config: free},
		node{name: "d", score: 4, config: free})
	p := configured(t, "")

	t.Run("members left the sea", func(t *testing.T) {
		state := mustApply(t, p, cty.NilVal, pondConfig(t, s, map[string]cty.Value{"size": cty.NumberIntVal(2)})).new
		wantMembers(t, s, state, "d", "c")
		s.stop("c")
		rr := read(t, p, state)
		if len(rr.Diagnostics) > 0 {
			t.Errorf("diagnostics: %v", rr.Diagnostics)
		}
		wantMembers(t, s, rr.New, "d")
		s.stop("d")
		// Until the central manager has heard of d's leave, its query
		// cannot vouch for the whole sea, and the pond reads as present
		// with no member; once it has, the pond is gone.
		last := rr.New
		eventually(t, 15*time.Second, "the pond to read as gone", func() error {
			rr := read(t, p, last)
			if rr.New.IsNull() {
				return nil
			}
			if got := strs(rr.New.GetAttr("members")); len(got) > 0 {
				t.Fatalf("members %v after all left", got)
			}
			return fmt.Errorf("a pond whose members all left reads as %#v, want null (gone)", rr.New)
		})
	})

	// The pond at cm2 queries the sea through its central manager; the
	// one at cm3 through cm.
	withCM := func(name string, attrs map[string]cty.Value) cty.Value {
		attrs["central_manager"] = cty.StringVal(s.api(name))
		attrs["size"] = cty.NumberIntVal(1)
		return pondConfig(t, s, attrs)
	}
	at2 := mustApply(t, p, cty.NilVal, withCM("cm2", map[string]cty.Value{})).new
	wantMembers(t, s, at2, "b")
	at3 := mustApply(t, p, cty.NilVal, withCM("cm3", map[string]cty.Value{"sea": cty.StringVal(s.api("cm"))})).new
	wantMembers(t, s, at3, "a")
	s.stop("cm2")
	s.stop("cm3")

	t.Run("central manager gone, sea queried through it", func(t *testing.T) {
		// Until it withdraws, the member still says it belongs to the
		// pond; the read warns that only it could be asked.
		eventually(t, 15*time.Second, "b to withdraw", func() error {
			resp := p.ReadResource(t.Context(), providers.ReadRequest{TypeName: "pond", Address: pondAddr, Current: at2})
			if err := providers.Err(resp.Diagnostics); err != nil {
				t.Fatal(err)
			}
			if w := warnings(resp.Diagnostics); len(w) != 1 || w[0] != "Members of "+pondAddr+" not found by a sea query" {
				t.Fatalf("warnings %v", w)
			}
			if resp.New.IsNull() {
				t.Fatal("the pond reads as gone, though the sea could not be asked")
			}
			if got := strs(resp.New.GetAttr("members")); len(got) > 0 {
				return fmt.Errorf("members %v", got)
			}
			return nil
		})
		s.checkFree(t, "b")
		d := planApply(t, p, at2, cty.NullVal(pondSchema.ImpliedType()))
		if err := providers.Err(d.diags); err != nil || !d.new.IsNull() {
			t.Fatalf("destroy: %#v, %v", d.new, err)
		}
	})

	t.Run("central manager gone, sea queried elsewhere", func(t *testing.T) {
		eventually(t, 15*time.Second, "a to withdraw", func() error {
			rr := read(t, p, at3)
			if len(rr.Diagnostics) > 0 {
				t.Fatalf("diagnostics: %v", rr.Diagnostics)
			}
			if !rr.New.IsNull() {
				return fmt.Errorf("members %v", strs(rr.New.GetAttr("members")))
			}
			return nil
		})
		s.checkFree(t, "a")
	})
}

// TestPondDrain destroys ponds whose member runs a job, submitted to the
// pond's central manager: drain "wait" lets it finish, "evict" hands it
// back to the schedd at once.
func TestPondDrain(t *testing.T) {
	s := startSea(t,
		node{name: "cm", role: "cm", pool: "manager", config: "DAEMON_LIST = MASTER COLLECTOR NEGOTIATOR SCHEDD\n"},
		node{name: "w", score: 1})
	p := configured(t, "")
	condor := wire.NewClient(s.api("cm"), "")
	for _, tc := range []struct {
		drain    string
		sleep    string
		progress []string
		// status is the job's status once the pond is gone, in the queue
		// or in the history.
		status jobqueue.Status
	}{
		{drain: "wait", sleep: "5", status: jobqueue.Completed,
			progress: []string{"releasing 1 member(s), letting running jobs finish, up to 1m0s", "w back in the sea (1 job(s) finished, 0 evicted"}},
		{drain: "evict", sleep: "600", status: jobqueue.Idle,
			progress: []string{"releasing 1 member(s), evicting running jobs", "w back in the sea (0 job(s) finished, 1 evicted"}},
	} {
		t.Run(tc.drain, func(t *testing.T) {
			state := mustApply(t, p, cty.NilVal, pondConfig(t, s, map[string]cty.Value{
				"drain": cty.StringVal(tc.drain), "drain_timeout": cty.StringVal("1m")})).new
			wantMembers(t, s, state, "w")
			id := state.GetAttr("id").AsString()
			dir := t.TempDir()
			os.Chmod(dir, 0o755)
			f, err := submit.Parse(filepath.Join(dir, "job.sub"), fmt.Appendf(nil,
				"executable = /bin/sleep\narguments = %s\ntransfer_executable = false\nrequest_memory = 16\nrequirements = TARGET.PondID == %q\nqueue\n", tc.sleep, id))
			if err != nil {
				t.Fatal(err)
			}
			sub, err := tools.SubmitFile(t.Context(), condor.Schedd(), f, submit.Options{Owner: owner(t), SubmitDir: dir, Env: []string{"USER=" + owner(t)}})
			if err != nil {
				t.Fatal(err)
			}
			job := fmt.Sprintf("ClusterId == %d", sub.Cluster)
			t.Cleanup(func() {
				condor.Schedd().Act(context.Background(), &wire.ActRequest{Action: wire.ActRemove, Constraint: job})
			})
			// Running on the member, as its slot in the central manager's
			// collector says.
			eventually(t, 30*time.Second, "the job to run on the member", func() error {
				ads, err := condor.Collector().Query(t.Context(), &wire.QueryAdsRequest{Type: wire.TypeMachine,
					Constraint: fmt.Sprintf("PondID == %q && Activity == \"Busy\"", id)})
				if err != nil || len(ads) == 0 {
					return fmt.Errorf("no busy slot of the pond (%v)", err)
				}
				return nil
			})
			d := mustApply(t, p, state, cty.NullVal(pondSchema.ImpliedType()))
			for _, want := range tc.progress {
				if !strings.Contains(d.progressText(), want) {
					t.Errorf("progress does not say %q:\n%s", want, d.progressText())
				}
			}
			s.checkFree(t, "w")
			eventually(t, 10*time.Second, "the job's status", func() error {
				jobs, err := condor.Schedd().Queue(t.Context(), &wire.QueryJobsRequest{Constraint: job})
				if err == nil && len(jobs) == 0 {
					jobs, err = condor.Schedd().History(t.Context(), &wire.QueryJobsRequest{Constraint: job})
				}
				if err != nil || len(jobs) != 1 {
					return fmt.Errorf("%d jobs (%v)", len(jobs), err)
				}
				if st := jobs[0].Ad["JobStatus"]; st != fmt.Sprint(int(tc.status)) {
					return fmt.Errorf("JobStatus %s, want %d", st, tc.status)
				}
				return nil
			})
		})
	}
}

// TestGuardedSea forms a pond from a sea whose agents answer only tokens of
// the working directory's authority: the provider of that directory
// presents one of its own and forms the pond; one of another directory has
// none, and its plan says the sea refused the query.
func TestGuardedSea(t *testing.T) {
	wd := t.TempDir()
	a, err := auth.OpenAuthority(filepath.Join(wd, filepath.FromSlash(auth.AuthorityDir)))
	if err != nil {
		t.Fatal(err)
	}
	s := startGuardedSea(t, a, node{name: "cm", role: "cm", pool: "campus"}, node{name: "w", score: 5})
	p := configuredIn(t, wd, s.api("cm"))
	state := mustApply(t, p, cty.NilVal, pondConfig(t, s, nil)).new
	wantMembers(t, s, state, "w")

	strangerPlan := func() string {
		stranger := configuredIn(t, t.TempDir(), s.api("cm"))
		pr := plan(t, stranger, cty.NilVal, pondConfig(t, s, nil))
		var detail []string
		for _, d := range pr.Diagnostics {
			detail = append(detail, d.Summary+": "+d.Detail)
		}
		return strings.Join(detail, "\n")
	}
	// Without the sea's CA it does not even ask.
	if w := strangerPlan(); !strings.Contains(w, "No candidates") || !strings.Contains(w, "speaks TLS") {
		t.Fatalf("a plan without the sea's CA: %s", w)
	}
	t.Setenv("POND_TLS_CA", a.CAFile())
	if w := strangerPlan(); !strings.Contains(w, "No candidates") || !strings.Contains(w, "401") {
		t.Fatalf("a plan without a token: %s", w)
	}
	if _, err := api.NewClient(s.api("w")).WithTLS(s.tls).Invite(t.Context(), api.Invitation{Pond: "x", PondID: "x-1", CentralManager: s.api("cm")}); err == nil {
		t.Fatal("an invitation without a token was taken")
	}
}

// owner is the owner of the tests' jobs: the test's own user, whose files
// a schedd running as root reads and writes as it.
func owner(t *testing.T) string {
	t.Helper()
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	return u.Username
}
