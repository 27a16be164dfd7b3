package state

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func mustAddr(t *testing.T, s string) Address {
	t.Helper()
	a, err := ParseAddress(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func addrStrings(as []Address) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.String()
	}
	return out
}

func TestAddresses(t *testing.T) {
	s := sample()
	want := []string{
		"data.sea_query.big",
		`pond.burst["a"]`, `pond.burst["b"]`,
		"pool.campus",
		"pool.w[2]", "pool.w[10]",
	}
	if diff := cmp.Diff(want, addrStrings(s.Addresses())); diff != "" {
		t.Fatalf("Addresses (-want +got):\n%s", diff)
	}
}

func TestFilter(t *testing.T) {
	tests := []struct {
		filter []string
		want   []string
	}{
		{nil, []string{"data.sea_query.big", `pond.burst["a"]`, `pond.burst["b"]`, "pool.campus", "pool.w[2]", "pool.w[10]"}},
		{[]string{"pool.w"}, []string{"pool.w[2]", "pool.w[10]"}},
		{[]string{"pool.w[10]"}, []string{"pool.w[10]"}},
		{[]string{"pool.w[3]"}, nil},
		{[]string{`pond.burst["b"]`, "pool.campus"}, []string{`pond.burst["b"]`, "pool.campus"}},
		{[]string{"data.sea_query.big"}, []string{"data.sea_query.big"}},
		{[]string{"sea_query.big"}, nil},
		{[]string{"pool.nothing"}, nil},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.filter, ","), func(t *testing.T) {
			var f []Address
			for _, a := range tt.filter {
				f = append(f, mustAddr(t, a))
			}
			got := addrStrings(sample().Filter(f))
			if len(got) == 0 {
				got = nil
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("Filter (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLookup(t *testing.T) {
	s := sample()
	x := NewIndex(s)
	tests := []struct {
		addr     string
		resource bool
		attrs    string // "" when no instance
	}{
		{"pool.w", true, ""},
		{"pool.w[10]", true, `{"id":"w10"}`},
		{"pool.w[3]", true, ""},
		{"pool.campus", true, `{"id":"c"}`},
		{`pond.burst["a"]`, true, `{}`},
		{"data.sea_query.big", true, `{"requirements":"Memory >= 1024 && Cpus > 1"}`},
		{"sea_query.big", false, ""},
		{"pool.nothing[0]", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			a := mustAddr(t, tt.addr)
			for name, look := range map[string]struct {
				r func(Address) *Resource
				i func(Address) *Instance
			}{"State": {s.Resource, s.Instance}, "Index": {x.Resource, x.Instance}} {
				if got := look.r(a) != nil; got != tt.resource {
					t.Errorf("%s.Resource found = %v, want %v", name, got, tt.resource)
				}
				inst := look.i(a)
				if (inst != nil) != (tt.attrs != "") || inst != nil && string(inst.Attributes) != tt.attrs {
					t.Errorf("%s.Instance = %+v, want attributes %s", name, inst, tt.attrs)
				}
			}
		})
	}
}

func TestSetRemoveInstance(t *testing.T) {
	s := New()
	a := mustAddr(t, "pool.w[1]")
	s.SetInstance(a, "provider.local", &Instance{Attributes: json.RawMessage(`{"v":1}`)})
	s.SetInstance(mustAddr(t, "pool.w[0]"), "", &Instance{Attributes: json.RawMessage(`{"v":0}`)})
	s.SetInstance(a, "", &Instance{Attributes: json.RawMessage(`{"v":2}`)})
	if got := addrStrings(s.Addresses()); !slices.Equal(got, []string{"pool.w[0]", "pool.w[1]"}) {
		t.Fatalf("Addresses = %v", got)
	}
	if inst := s.Instance(a); string(inst.Attributes) != `{"v":2}` || inst.IndexKey != 1 {
		t.Fatalf("Instance(%s) = %+v, want the replacement", a, inst)
	}
	if r := s.Resource(a); r.Provider != "provider.local" || r.Mode != ModeManaged {
		t.Fatalf("Resource = %+v", r)
	}
	if !s.RemoveInstance(a) || s.RemoveInstance(a) {
		t.Fatal("RemoveInstance should succeed once")
	}
	if !s.RemoveInstance(mustAddr(t, "pool.w[0]")) {
		t.Fatal("RemoveInstance(pool.w[0]) failed")
	}
	if len(s.Resources) != 0 {
		t.Fatalf("empty resource left behind: %+v", s.Resources)
	}
}

func TestMove(t *testing.T) {
	tests := []struct {
		name     string
		src, dst string
		want     []string // addresses after the move
		err      string
		deps     []string // dependencies of pool.w[2] after the move
	}{
		{name: "rename resource", src: "pool.w", dst: "pool.workers",
			want: []string{"data.sea_query.big", `pond.burst["a"]`, `pond.burst["b"]`, "pool.campus", "pool.workers[2]", "pool.workers[10]"}},
		{name: "rename resource followed by dependencies", src: "pool.campus", dst: "pool.main",
			want: []string{"data.sea_query.big", `pond.burst["a"]`, `pond.burst["b"]`, "pool.main", "pool.w[2]", "pool.w[10]"},
			deps: []string{"data.sea_query.big", "pool.main"}},
		{name: "rename data resource", src: "data.sea_query.big", dst: "data.sea_query.small",
			want: []string{"data.sea_query.small", `pond.burst["a"]`, `pond.burst["b"]`, "pool.campus", "pool.w[2]", "pool.w[10]"},
			deps: []string{"data.sea_query.small", "pool.campus"}},
		{name: "instance to new key", src: "pool.w[10]", dst: "pool.w[3]",
			want: []string{"data.sea_query.big", `pond.burst["a"]`, `pond.burst["b"]`, "pool.campus", "pool.w[2]", "pool.w[3]"}},
		{name: "instance to another resource", src: "pool.w[10]", dst: "pool.x[0]",
			want: []string{"data.sea_query.big", `pond.burst["a"]`, `pond.burst["b"]`, "pool.campus", "pool.w[2]", "pool.x[0]"}},
		{name: "unkeyed instance to keyed", src: "pool.campus", dst: "pool.w[0]",
			want: []string{"data.sea_query.big", `pond.burst["a"]`, `pond.burst["b"]`, "pool.w[0]", "pool.w[2]", "pool.w[10]"},
			deps: []string{"data.sea_query.big", "pool.w"}},
		{name: "unkeyed into count in place", src: "pool.campus", dst: "pool.campus[0]",
			want: []string{"data.sea_query.big", `pond.burst["a"]`, `pond.burst["b"]`, "pool.campus[0]", "pool.w[2]", "pool.w[10]"}},
		{name: "keyed instance to unkeyed", src: `pond.burst["a"]`, dst: "pond.solo",
			want: []string{"data.sea_query.big", `pond.burst["b"]`, "pond.solo", "pool.campus", "pool.w[2]", "pool.w[10]"}},
		{name: "same address", src: "pool.w", dst: "pool.w", err: "cannot move pool.w to pool.w: source and destination are the same"},
		{name: "existing resource", src: "pool.w", dst: "pool.campus", err: "pool.campus already exists in the state"},
		{name: "existing instance", src: "pool.w[2]", dst: "pool.w[10]", err: "pool.w[10] already exists in the state"},
		{name: "missing resource", src: "pool.nope", dst: "pool.other", err: "no resource pool.nope in the state"},
		{name: "missing instance", src: "pool.w[5]", dst: "pool.w[6]", err: "no instance pool.w[5] in the state"},
		{name: "resource with keys to instance", src: "pool.w", dst: "pool.x[0]", err: "pool.w has no unkeyed instance (it has 2 keyed ones): give one instance, such as pool.w[2]"},
		{name: "type change", src: "pool.w", dst: "pond.w", err: "the resource type cannot change (pool to pond)"},
		{name: "mode change", src: "data.sea_query.big", dst: "sea_query.big", err: "a data resource cannot become a managed resource"},
		{name: "mixing key kinds", src: "pool.w[2]", dst: `pool.w["x"]`, err: "pool.w has count instances, and a resource cannot also have for_each ones"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := sample()
			before := s.DeepCopy()
			err := s.Move(mustAddr(t, tt.src), mustAddr(t, tt.dst))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Move error = %v, want one containing %q", err, tt.err)
				}
				if diff := cmp.Diff(before, s); diff != "" {
					t.Fatalf("failed Move changed the state (-before +after):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("Move: %v", err)
			}
			if diff := cmp.Diff(tt.want, addrStrings(s.Addresses())); diff != "" {
				t.Fatalf("after Move (-want +got):\n%s", diff)
			}
			if tt.deps != nil {
				var deps []string
				for _, r := range s.Resources {
					for _, inst := range r.Instances {
						if len(inst.Dependencies) > 0 {
							deps = inst.Dependencies
						}
					}
				}
				if diff := cmp.Diff(tt.deps, deps); diff != "" {
					t.Fatalf("dependencies (-want +got):\n%s", diff)
				}
			}
			// The moved instance keeps its attributes and the result encodes.
			if _, err := Encode(s); err != nil {
				t.Fatalf("Encode after Move: %v", err)
			}
			if n, m := len(before.Addresses()), len(s.Addresses()); n != m {
				t.Fatalf("Move changed the number of instances from %d to %d", n, m)
			}
		})
	}
}

func TestMoveKeepsAttributes(t *testing.T) {
	s := sample()
	if err := s.Move(mustAddr(t, "pool.w[10]"), mustAddr(t, "pool.x[0]")); err != nil {
		t.Fatal(err)
	}
	inst := s.Instance(mustAddr(t, "pool.x[0]"))
	if inst == nil || string(inst.Attributes) != `{"id":"w10"}` || inst.IndexKey != 0 {
		t.Fatalf("moved instance = %+v", inst)
	}
	if r := s.Resource(mustAddr(t, "pool.x")); r.Provider != "provider.local" {
		t.Fatalf("new resource provider = %q, want the source's", r.Provider)
	}
}

func TestRemove(t *testing.T) {
	tests := []struct {
		addr    string
		removed []string
		left    int
		err     string
	}{
		{addr: "pool.w", removed: []string{"pool.w[2]", "pool.w[10]"}, left: 4},
		{addr: "pool.w[10]", removed: []string{"pool.w[10]"}, left: 5},
		{addr: "pool.campus", removed: []string{"pool.campus"}, left: 5},
		{addr: "data.sea_query.big", removed: []string{"data.sea_query.big"}, left: 5},
		{addr: `pond.burst["a"]`, removed: []string{`pond.burst["a"]`}, left: 5},
		{addr: "pool.nope", err: "cannot remove pool.nope: no such resource in the state"},
		{addr: "pool.w[7]", err: "cannot remove pool.w[7]: no such instance in the state"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			s := sample()
			removed, err := s.Remove(mustAddr(t, tt.addr))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Remove error = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.removed, addrStrings(removed)); diff != "" {
				t.Fatalf("removed (-want +got):\n%s", diff)
			}
			if n := len(s.Addresses()); n != tt.left {
				t.Fatalf("%d instances left, want %d", n, tt.left)
			}
			for _, a := range removed {
				if s.Instance(a) != nil {
					t.Fatalf("%s still present", a)
				}
			}
		})
	}
}
