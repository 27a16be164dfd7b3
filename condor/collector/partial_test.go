package collector

import (
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/wire"
)

// TestPartialUpdate checks a partial update's semantics: the ads it
// carries replace the source's ads of the same Name, with their private
// attributes and a new lifetime, the source's other ads are kept as they
// were, Removed drops ads of the source alone, a full update still
// replaces all of them, and a node's identity updates only its own ads.
func TestPartialUpdate(t *testing.T) {
	q := func(s string) string { return `"` + s + `"` }
	slot := func(name, mem string) wire.Ad {
		return wire.Ad{"Name": q(name), "Machine": q(strings.SplitN(name, "@", 2)[1]), "Memory": mem}
	}
	nodeA := &auth.Claims{Subject: "node/a", Scopes: []auth.Scope{auth.Daemon}}
	t0 := time.Unix(1_800_000_000, 0)
	tests := []struct {
		name    string
		cl      *auth.Claims
		updates []wire.UpdateRequest // at t0+30s, with a lifetime of 60s unless set
		wantErr error
		// want is every live ad at t0+30s after the updates, as
		// "Name Memory ClaimId"; later those still live at t0+75s, once
		// the seeded startd@a ads (at t0, 60s) expired.
		want, later []string
	}{
		{name: "replaces by name and keeps the others",
			updates: []wire.UpdateRequest{{Source: "startd@a", Partial: true, Ads: []wire.Ad{slot("slot2@a", "9")},
				Private: map[string]wire.Ad{"slot2@a": {"ClaimId": q("n2")}}}},
			want:  []string{`slot1@a 1 "c1"`, `slot1@b 5 "b1"`, `slot2@a 9 "n2"`, `slot3@a 3 "c3"`},
			later: []string{"slot1@b", "slot2@a"}},
		{name: "adds a new name",
			updates: []wire.UpdateRequest{{Source: "startd@a", Partial: true, Ads: []wire.Ad{slot("slot1_1@a", "4")}}},
			want:    []string{`slot1@a 1 "c1"`, `slot1@b 5 "b1"`, `slot1_1@a 4 `, `slot2@a 2 "c2"`, `slot3@a 3 "c3"`},
			later:   []string{"slot1@b", "slot1_1@a"}},
		{name: "removes by name",
			updates: []wire.UpdateRequest{{Source: "startd@a", Partial: true, Removed: []string{"slot3@a"}}},
			want:    []string{`slot1@a 1 "c1"`, `slot1@b 5 "b1"`, `slot2@a 2 "c2"`},
			later:   []string{"slot1@b"}},
		{name: "a full update after a partial one removes the vanished slots",
			updates: []wire.UpdateRequest{
				{Source: "startd@a", Partial: true, Ads: []wire.Ad{slot("slot2@a", "9")}},
				{Source: "startd@a", Ads: []wire.Ad{slot("slot1@a", "1"), slot("slot2@a", "8")}},
			},
			want:  []string{`slot1@a 1 `, `slot1@b 5 "b1"`, `slot2@a 8 `},
			later: []string{"slot1@a", "slot1@b", "slot2@a"}},
		{name: "a slot sent without its claim id loses it, and no other slot's changes",
			updates: []wire.UpdateRequest{{Source: "startd@a", Partial: true, Ads: []wire.Ad{slot("slot1@a", "1")},
				Private: map[string]wire.Ad{"slot3@a": {"ClaimId": q("stolen")}, "slot1@b": {"ClaimId": q("stolen")}}}},
			want:  []string{`slot1@a 1 `, `slot1@b 5 "b1"`, `slot2@a 2 "c2"`, `slot3@a 3 "c3"`},
			later: []string{"slot1@a", "slot1@b"}},
		{name: "a later ad of a name replaces an earlier one",
			updates: []wire.UpdateRequest{{Source: "startd@a", Partial: true, Ads: []wire.Ad{slot("slot2@a", "7"), slot("slot2@a", "6")}}},
			want:    []string{`slot1@a 1 "c1"`, `slot1@b 5 "b1"`, `slot2@a 6 `, `slot3@a 3 "c3"`},
			later:   []string{"slot1@b", "slot2@a"}},
		{name: "a node's partial update of its own slots", cl: nodeA,
			updates: []wire.UpdateRequest{{Source: "startd@a", Partial: true, Ads: []wire.Ad{slot("slot2@a", "9")},
				Private: map[string]wire.Ad{"slot2@a": {"ClaimId": q("n2")}}}},
			want:  []string{`slot1@a 1 "c1"`, `slot1@b 5 "b1"`, `slot2@a 9 "n2"`, `slot3@a 3 "c3"`},
			later: []string{"slot1@b", "slot2@a"}},
		{name: "a node removes only its source's ads", cl: nodeA,
			updates: []wire.UpdateRequest{{Source: "startd@a", Partial: true, Ads: []wire.Ad{slot("slot2@a", "9")}, Removed: []string{"slot1@b", "slot3@a"}}},
			want:    []string{`slot1@a 1 "c1"`, `slot1@b 5 "b1"`, `slot2@a 9 `},
			later:   []string{"slot1@b", "slot2@a"}},
		{name: "a node may not send another node's slot", cl: nodeA,
			updates: []wire.UpdateRequest{{Source: "startd@a", Partial: true, Ads: []wire.Ad{slot("slot1@b", "9")}}},
			wantErr: wire.ErrForbidden},
		{name: "a node may not update another node's source", cl: nodeA,
			updates: []wire.UpdateRequest{{Source: "startd@b", Partial: true, Removed: []string{"slot1@b"}}},
			wantErr: wire.ErrForbidden},
		{name: "an ad without a name",
			updates: []wire.UpdateRequest{{Source: "startd@a", Partial: true, Ads: []wire.Ad{{"Memory": "1"}}}},
			wantErr: wire.ErrBadRequest},
		{name: "removal in a full update",
			updates: []wire.UpdateRequest{{Source: "startd@a", Ads: []wire.Ad{slot("slot1@a", "1")}, Removed: []string{"slot2@a"}}},
			wantErr: wire.ErrBadRequest},
		{name: "a source the collector holds nothing of wants a full update",
			updates: []wire.UpdateRequest{{Source: "startd@c", Partial: true, Ads: []wire.Ad{slot("slot1@c", "1")}}},
			wantErr: wire.ErrConflict},
	}
	seeded := []string{`slot1@a 1 "c1"`, `slot1@b 5 "b1"`, `slot2@a 2 "c2"`, `slot3@a 3 "c3"`}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ck := &clock{t: t0}
			c := New(Options{Lifetime: time.Hour, Now: ck.now})
			seed := []wire.UpdateRequest{
				{Source: "startd@a", Lifetime: 60, Ads: []wire.Ad{slot("slot1@a", "1"), slot("slot2@a", "2"), slot("slot3@a", "3")},
					Private: map[string]wire.Ad{"slot1@a": {"ClaimId": q("c1")}, "slot2@a": {"ClaimId": q("c2")}, "slot3@a": {"ClaimId": q("c3")}}},
				{Source: "startd@b", Lifetime: 300, Ads: []wire.Ad{slot("slot1@b", "5")}, Private: map[string]wire.Ad{"slot1@b": {"ClaimId": q("b1")}}},
			}
			for _, u := range seed {
				u.Type = wire.TypeMachine
				if err := c.update(nil, &u); err != nil {
					t.Fatal(err)
				}
			}
			ck.t = t0.Add(30 * time.Second)
			var err error
			for _, u := range tt.updates {
				u.Type = wire.TypeMachine
				if u.Lifetime == 0 {
					u.Lifetime = 60
				}
				if err = c.update(tt.cl, &u); err != nil {
					break
				}
			}
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("got error %v, want %v", err, tt.wantErr)
				}
				if diff := cmp.Diff(seeded, live(c, true)); diff != "" {
					t.Errorf("a refused update changed the ads (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, live(c, true)); diff != "" {
				t.Errorf("ads (-want +got):\n%s", diff)
			}
			ck.t = t0.Add(75 * time.Second)
			if diff := cmp.Diff(tt.later, live(c, false)); diff != "" {
				t.Errorf("ads still live at 75s (-want +got):\n%s", diff)
			}
		})
	}
}

// live lists the collector's live machine ads by name, with their Memory
// and private ClaimId when long.
func live(c *Collector, long bool) []string {
	out := []string{}
	for _, e := range c.entries(wire.TypeMachine, func(*classad.Ad) bool { return true }) {
		if long {
			out = append(out, e.name+" "+e.wire["Memory"]+" "+e.private["ClaimId"])
		} else {
			out = append(out, e.name)
		}
	}
	sort.Strings(out)
	return out
}
