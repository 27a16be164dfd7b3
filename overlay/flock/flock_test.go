package flock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/api"
)

var t0 = time.Unix(1_800_000_000, 0)

func cm(name, pool, api string, c api.FlockCapacity, exp time.Time, accept ...string) Member {
	tags := map[string]string{"role": "cm", "pool": pool, "api": api, TagSpare: EncodeSpare(c, exp)}
	if accept != nil {
		v, err := EncodeAccept(accept)
		if err != nil {
			panic(err)
		}
		tags[TagAccept] = v
	}
	return Member{Name: name, Status: "alive", Tags: tags}
}

func TestSpareRoundTrip(t *testing.T) {
	c := api.FlockCapacity{IdleSlots: 4, Cpus: 2, Memory: 2048, Gpus: 1}
	got, exp, err := DecodeSpare(EncodeSpare(c, t0))
	if err != nil || got != c || !exp.Equal(t0) {
		t.Fatalf("round trip: %+v %v %v", got, exp, err)
	}
	for _, bad := range []string{"", "1", "2:1:1:1:1:1", "1:a:1:1:1:1", "1:-1:1:1:1:1", "1:1:1:1:1", "1:1:1:1:1:1:1", "1:99999999999999:1:1:1:1"} {
		if _, _, err := DecodeSpare(bad); err == nil {
			t.Errorf("DecodeSpare(%q): no error", bad)
		}
	}
}

func FuzzDecodeSpare(f *testing.F) {
	f.Add(EncodeSpare(api.FlockCapacity{IdleSlots: 1, Cpus: 1, Memory: 512}, t0))
	f.Add("1:::::")
	f.Fuzz(func(t *testing.T, s string) {
		c, exp, err := DecodeSpare(s)
		if err != nil {
			return
		}
		c2, exp2, err := DecodeSpare(EncodeSpare(c, exp))
		if err != nil || c2 != c || !exp2.Equal(exp) {
			t.Fatalf("%q: re-encoding changed it: %+v %v %v", s, c2, exp2, err)
		}
	})
}

func TestParse(t *testing.T) {
	live := cm("spare-0", "spare", "127.0.0.1:1", api.FlockCapacity{IdleSlots: 2}, t0.Add(time.Minute))
	tests := []struct {
		name   string
		m      Member
		accept []string
		ok     bool
	}{
		{"live", live, nil, true},
		{"expired", cm("spare-0", "spare", "a:1", api.FlockCapacity{IdleSlots: 2}, t0), nil, false},
		{"failed", Member{Name: "x", Status: "failed", Tags: live.Tags}, nil, false},
		{"not a cm", Member{Name: "x", Status: "alive", Tags: map[string]string{"role": "node", "pool": "p", "api": "a:1", TagSpare: live.Tags[TagSpare]}}, nil, false},
		{"no spare tag", Member{Name: "x", Status: "alive", Tags: map[string]string{"role": "cm", "pool": "p", "api": "a:1"}}, nil, false},
		{"accept list", cm("s", "spare", "a:1", api.FlockCapacity{IdleSlots: 1}, t0.Add(time.Second), "busy", "other"), []string{"busy", "other"}, true},
		{"accept nobody", cm("s", "spare", "a:1", api.FlockCapacity{IdleSlots: 1}, t0.Add(time.Second), []string{}...), []string{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := Parse(tt.m, t0)
			if (err == nil) != tt.ok {
				t.Fatalf("Parse: %+v, %v; want ok=%v", a, err, tt.ok)
			}
			if !tt.ok {
				return
			}
			if strings.Join(a.Accept, ",") != strings.Join(tt.accept, ",") || (a.Accept == nil) != (tt.accept == nil) {
				t.Errorf("accept %q, want %q", a.Accept, tt.accept)
			}
		})
	}
	if a, _ := Parse(cm("s", "spare", "a:1", api.FlockCapacity{IdleSlots: 1}, t0.Add(time.Second), []string{}...), t0); a.Accepts("busy") {
		t.Error("an empty accept list accepts busy")
	}
}

func mustCompile(t testing.TB, c api.FlockConfig) *Policy {
	t.Helper()
	p, err := Compile(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestWilling(t *testing.T) {
	exp := t0.Add(time.Minute)
	anns := func(ms ...Member) []api.FlockAnnouncement {
		var out []api.FlockAnnouncement
		for _, m := range ms {
			a, err := Parse(m, t0)
			if err == nil {
				out = append(out, a)
			}
		}
		return out
	}
	near := cm("near-0", "near", "10.0.0.1:1", api.FlockCapacity{IdleSlots: 4, Cpus: 1, Memory: 1024}, exp)
	far := cm("far-0", "far", "10.0.0.2:1", api.FlockCapacity{IdleSlots: 8, Cpus: 8, Memory: 8192}, exp)
	full := cm("full-0", "full", "10.0.0.3:1", api.FlockCapacity{}, exp)
	closed := cm("closed-0", "closed", "10.0.0.4:1", api.FlockCapacity{IdleSlots: 4}, exp, "someone")
	open := cm("open-0", "open", "10.0.0.5:1", api.FlockCapacity{IdleSlots: 4}, exp, "busy")
	self := cm("busy-0", "busy", "10.0.0.9:1", api.FlockCapacity{IdleSlots: 1}, exp)
	unknown := cm("unknown-0", "unknown", "10.0.0.6:1", api.FlockCapacity{IdleSlots: 4}, exp)
	rtt := func(node string) (time.Duration, bool) {
		switch node {
		case "near-0":
			return 2 * time.Millisecond, true
		case "far-0":
			return 80 * time.Millisecond, true
		case "open-0":
			return 40 * time.Millisecond, true
		case "closed-0":
			return time.Millisecond, true
		}
		return 0, false
	}
	all := anns(near, far, full, closed, open, self, unknown)
	tests := []struct {
		name   string
		flocks []api.FlockConfig
		want   string
	}{
		{"no flock", nil, ""},
		{"any pool, nearest first, unknown RTT last", []api.FlockConfig{{Name: "f", Out: &api.FlockOut{}}}, "near open far unknown"},
		{"to names pools by address and name", []api.FlockConfig{{Name: "f", Out: &api.FlockOut{To: []string{"10.0.0.2:1", "near", "closed"}}}}, "near far"},
		{"deny", []api.FlockConfig{{Name: "f", Out: &api.FlockOut{Deny: `PoolName == "near" || RTT > 0.05`}}}, "open unknown"},
		{"allow on capacity", []api.FlockConfig{{Name: "f", Out: &api.FlockOut{Allow: `Cpus >= 8 && Memory >= 4096`}}}, "far"},
		{"allow on undefined RTT is not true", []api.FlockConfig{{Name: "f", Out: &api.FlockOut{Allow: `RTT < 1`}}}, "near open far"},
		{"incoming only flocks send nothing", []api.FlockConfig{{Name: "f", In: &api.FlockIn{From: []string{"x"}}}}, ""},
		{"union of flocks", []api.FlockConfig{{Name: "a", Out: &api.FlockOut{To: []string{"far"}}}, {Name: "b", Out: &api.FlockOut{To: []string{"unknown"}}}}, "far unknown"},
	}
	any := []*Policy{mustCompile(t, api.FlockConfig{Name: "f", Out: &api.FlockOut{}})}
	var admitted []string
	for _, c := range Admitted("busy", all, any, rtt) {
		admitted = append(admitted, c.Pool)
	}
	if got := strings.Join(admitted, " "); got != "near open far full unknown" {
		t.Errorf("admitted %q: want the full pool too", got)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ps []*Policy
			for _, c := range tt.flocks {
				ps = append(ps, mustCompile(t, c))
			}
			var names []string
			for _, c := range Willing("busy", all, ps, rtt) {
				names = append(names, c.Pool)
			}
			if got := strings.Join(names, " "); got != tt.want {
				t.Errorf("willing %q, want %q", got, tt.want)
			}
		})
	}
}

func TestWillingJobRequirementsAndLimits(t *testing.T) {
	a, err := Parse(cm("spare-0", "spare", "a:1", api.FlockCapacity{IdleSlots: 4}, t0.Add(time.Minute)), t0)
	if err != nil {
		t.Fatal(err)
	}
	ps := []*Policy{
		mustCompile(t, api.FlockConfig{Name: "a", Out: &api.FlockOut{JobRequirements: "WantFlocking =?= true", MaxJobs: 3}}),
		mustCompile(t, api.FlockConfig{Name: "b", Out: &api.FlockOut{JobRequirements: "Owner == \"alice\"", MaxJobs: 5}}),
	}
	c := Willing("busy", []api.FlockAnnouncement{a}, ps, nil)
	if len(c) != 1 || c[0].MaxJobs != 5 || len(c[0].JobRequirements) != 2 || c[0].AnyJob {
		t.Fatalf("%+v", c)
	}
	ps = append(ps, mustCompile(t, api.FlockConfig{Name: "c", Out: &api.FlockOut{}}))
	c = Willing("busy", []api.FlockAnnouncement{a}, ps, nil)
	if len(c) != 1 || c[0].MaxJobs != 0 || c[0].JobRequirements != nil || !c[0].AnyJob {
		t.Fatalf("with an unbounded flock for any job: %+v", c)
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		name string
		c    api.FlockConfig
		want string
	}{
		{"bad name", api.FlockConfig{Name: "a/b", Out: &api.FlockOut{}}, "flock name"},
		{"empty name", api.FlockConfig{Name: "", Out: &api.FlockOut{}}, "flock name"},
		{"control character", api.FlockConfig{Name: "a\nb", Out: &api.FlockOut{}}, "flock name"},
		{"no part", api.FlockConfig{Name: "a"}, "neither out nor in"},
		{"allow", api.FlockConfig{Name: "a", Out: &api.FlockOut{Allow: "Cpus >"}}, "allow:"},
		{"deny", api.FlockConfig{Name: "a", Out: &api.FlockOut{Deny: "(("}}, "deny:"},
		{"job requirements", api.FlockConfig{Name: "a", Out: &api.FlockOut{JobRequirements: "a ="}}, "job_requirements:"},
		{"max jobs", api.FlockConfig{Name: "a", Out: &api.FlockOut{MaxJobs: -1}}, "negative"},
		{"empty to", api.FlockConfig{Name: "a", Out: &api.FlockOut{To: []string{" "}}}, "empty destination"},
		{"bad from", api.FlockConfig{Name: "a", In: &api.FlockIn{From: []string{"a,b"}}}, "want a pool name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(tt.c)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Compile: %v, want %q", err, tt.want)
			}
		})
	}
	if _, err := Compile(api.FlockConfig{Name: `flock.x["a b"]`, Out: &api.FlockOut{}}); err != nil {
		t.Errorf("a for_each address: %v", err)
	}
	var ee *ExprError
	if _, err := Compile(api.FlockConfig{Name: "a", Out: &api.FlockOut{Allow: "Cpus >"}}); !errors.As(err, &ee) || ee.Arg != "allow" {
		t.Errorf("want an ExprError of allow: %v", err)
	}
}

// sea is a sea of members whose tags managers set, as serf's gossip would
// show them.
type sea struct {
	mu      sync.Mutex
	members map[string]Member
}

func (s *sea) setTags(name string) func(map[string]string) error {
	return func(update map[string]string) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		m := s.members[name]
		for k, v := range update {
			if v == "" {
				delete(m.Tags, k)
			} else {
				m.Tags[k] = v
			}
		}
		return nil
	}
}

func (s *sea) list() []Member {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Member
	for _, m := range s.members {
		tags := map[string]string{}
		for k, v := range m.Tags {
			tags[k] = v
		}
		out = append(out, Member{Name: m.Name, Status: m.Status, Tags: tags})
	}
	return out
}

func TestManagerAnnouncesAndExpires(t *testing.T) {
	var clock struct {
		sync.Mutex
		now time.Time
	}
	clock.now = t0
	now := func() time.Time { clock.Lock(); defer clock.Unlock(); return clock.now }
	s := &sea{members: map[string]Member{}}
	newManager := func(pool string, idle int, dir string) *Manager {
		node := pool + "-0"
		s.members[node] = Member{Name: node, Status: "alive", Tags: map[string]string{"role": "cm", "pool": pool, "api": node + ":1"}}
		m, err := NewManager(Options{Pool: pool, Node: node, DataDir: dir, Interval: time.Second, TTL: 3 * time.Second,
			Capacity: func(context.Context) (api.FlockCapacity, error) {
				return api.FlockCapacity{IdleSlots: idle, Cpus: 1, Memory: 512}, nil
			},
			SetTags: s.setTags(node), Members: s.list, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	dir := t.TempDir()
	busy := newManager("busy", 0, dir)
	spare := newManager("spare", 4, "")
	other := newManager("other", 2, "")
	ctx := context.Background()
	for _, m := range []*Manager{busy, spare, other} {
		if err := m.Announce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if w := busy.Willing(); len(w) != 0 {
		t.Fatalf("willing without a flock: %+v", w)
	}
	if err := busy.Set(api.FlockConfig{Name: "overflow", Out: &api.FlockOut{To: []string{"spare"}}}); err != nil {
		t.Fatal(err)
	}
	if w := busy.Willing(); len(w) != 1 || w[0].Pool != "spare" || w[0].IdleSlots != 4 {
		t.Fatalf("willing: %+v", w)
	}
	// spare accepts only "other" from now on: busy is no longer willing.
	if err := spare.Set(api.FlockConfig{Name: "in", In: &api.FlockIn{From: []string{"other"}}}); err != nil {
		t.Fatal(err)
	}
	if err := spare.Announce(ctx); err != nil {
		t.Fatal(err)
	}
	if w := busy.Willing(); len(w) != 0 {
		t.Fatalf("willing although spare accepts only other: %+v", w)
	}
	if _, err := spare.Remove("in"); err != nil {
		t.Fatal(err)
	}
	if err := spare.Announce(ctx); err != nil {
		t.Fatal(err)
	}
	if w := busy.Willing(); len(w) != 1 {
		t.Fatalf("willing after spare opened again: %+v", w)
	}
	// spare stops renewing: its announcement vanishes after the TTL.
	clock.Lock()
	clock.now = t0.Add(3 * time.Second)
	clock.Unlock()
	if err := other.Announce(ctx); err != nil {
		t.Fatal(err)
	}
	if st := busy.Status(); len(st.Willing) != 0 || len(st.Sea) != 1 || st.Sea[0].Pool != "other" {
		t.Fatalf("after spare's announcement expired: willing %+v, sea %+v", st.Willing, st.Sea)
	}
	// The flocks survive a restart.
	again, err := NewManager(Options{Pool: "busy", Node: "busy-0", DataDir: dir,
		Capacity: func(context.Context) (api.FlockCapacity, error) { return api.FlockCapacity{}, nil }, SetTags: s.setTags("busy-0"), Members: s.list})
	if err != nil {
		t.Fatal(err)
	}
	if st := again.Status(); len(st.Flocks) != 1 || st.Flocks[0].Name != "overflow" {
		t.Fatalf("flocks after a restart: %+v", st.Flocks)
	}
	if ok, err := again.Remove("overflow"); !ok || err != nil {
		t.Fatalf("remove: %v %v", ok, err)
	}
	third, _ := NewManager(Options{Pool: "busy", Node: "busy-0", DataDir: dir,
		Capacity: func(context.Context) (api.FlockCapacity, error) { return api.FlockCapacity{}, nil }, SetTags: s.setTags("busy-0"), Members: s.list})
	if st := third.Status(); len(st.Flocks) != 0 {
		t.Fatalf("a removed flock came back: %+v", st.Flocks)
	}
}

func TestManagerRunRenews(t *testing.T) {
	s := &sea{members: map[string]Member{"p-0": {Name: "p-0", Status: "alive", Tags: map[string]string{"role": "cm", "pool": "p", "api": "a:1"}}}}
	m, err := NewManager(Options{Pool: "p", Node: "p-0", Interval: 10 * time.Millisecond,
		Capacity: func(context.Context) (api.FlockCapacity, error) { return api.FlockCapacity{IdleSlots: 1}, nil }, SetTags: s.setTags("p-0"), Members: s.list})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	for len(m.Announcements()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no announcement")
		}
		time.Sleep(5 * time.Millisecond)
	}
	first := m.Status().Announcement.Expires
	for !m.Status().Announcement.Expires.After(first) {
		if time.Now().After(deadline.Add(5 * time.Second)) {
			t.Fatal("the announcement was not renewed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-done
}

// BenchmarkWilling works out the willing list of one pool in a sea of
// 1,000 announcing pools under two flocks, one with expressions: what a
// central manager does for its schedd every two seconds.
func BenchmarkWilling(b *testing.B) {
	exp := t0.Add(time.Minute)
	var anns []api.FlockAnnouncement
	for i := range 1000 {
		a, err := Parse(cm(fmt.Sprintf("p%d-0", i), fmt.Sprintf("p%d", i), fmt.Sprintf("10.0.%d.%d:1", i/250, i%250),
			api.FlockCapacity{IdleSlots: i % 5, Cpus: 1 + i%8, Memory: 1024 * (1 + i%4)}, exp), t0)
		if err != nil {
			b.Fatal(err)
		}
		anns = append(anns, a)
	}
	flocks := []*Policy{
		mustCompile(b, api.FlockConfig{Name: "a", Out: &api.FlockOut{Allow: "Cpus >= 2 && Memory >= 2048", Deny: `PoolName == "p7" || RTT > 0.2`}}),
		mustCompile(b, api.FlockConfig{Name: "b", Out: &api.FlockOut{To: []string{"p1", "p2", "p3"}}}),
	}
	rtt := func(node string) (time.Duration, bool) { return time.Duration(len(node)) * time.Millisecond, true }
	b.ReportAllocs()
	for b.Loop() {
		if len(Willing("busy", anns, flocks, rtt)) == 0 {
			b.Fatal("nobody willing")
		}
	}
}

// TestManagerAnnouncesChangesOnly counts the tag updates: an unchanged
// announcement is renewed only once half its TTL has passed, a change of
// capacity is announced at once.
func TestManagerAnnouncesChangesOnly(t *testing.T) {
	now := t0
	idle := 2
	sets := 0
	m, err := NewManager(Options{Pool: "p", Node: "p-0", Interval: time.Second, TTL: 4 * time.Second,
		Capacity: func(context.Context) (api.FlockCapacity, error) { return api.FlockCapacity{IdleSlots: idle}, nil },
		SetTags:  func(map[string]string) error { sets++; return nil },
		Members:  func() []Member { return nil }, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	step := func(d time.Duration, want int) {
		t.Helper()
		now = now.Add(d)
		if err := m.Announce(context.Background()); err != nil {
			t.Fatal(err)
		}
		if sets != want {
			t.Fatalf("at %v: %d updates, want %d", now.Sub(t0), sets, want)
		}
	}
	step(0, 1)
	step(time.Second, 1) // 3 s left
	step(time.Second, 2) // 2 s left: renewed
	idle = 3             // a change
	step(time.Second, 3) // announced at once
	step(time.Second, 3) // 3 s left
}

// TestAnnouncementsOfAFailover follows a pool through the fail-over of its
// central manager: a replica that acts (an epoch tag, not role cm)
// announces, and while the declared manager's announcement has not
// expired, or once it is back at a higher epoch, one announcement per
// pool counts, the acting manager's, with its API address; the willing
// list of another pool shows that address. A member with an epoch tag
// but no announcement, or a replica that does not act, counts for
// nothing.
func TestAnnouncementsOfAFailover(t *testing.T) {
	spare := func(name string, role, epoch string, idle int) Member {
		m := cm(name, "spare", name+":1", api.FlockCapacity{IdleSlots: idle, Cpus: 1}, t0.Add(time.Minute))
		m.Tags["role"] = role
		if epoch != "" {
			m.Tags["epoch"] = epoch
		}
		return m
	}
	busy := cm("busy-0", "busy", "busy-0:1", api.FlockCapacity{}, t0.Add(time.Minute))
	flocks := []*Policy{mustCompile(t, api.FlockConfig{Name: "f", Out: &api.FlockOut{To: []string{"spare"}}})}
	for _, tc := range []struct {
		name    string
		members []Member
		node    string // the spare announcement that counts, "" none
	}{
		{"declared manager without fail-over", []Member{busy, spare("spare-0", "cm", "", 2)}, "spare-0"},
		{"declared manager at epoch 1", []Member{busy, spare("spare-0", "cm", "1", 2)}, "spare-0"},
		{"replica took over", []Member{busy, spare("spare-0", "cm", "1", 2), spare("spare-1", "node", "2", 3)}, "spare-1"},
		{"declared manager back, no epoch yet", []Member{busy, spare("spare-0", "cm", "", 2), spare("spare-1", "node", "2", 3)}, "spare-1"},
		{"declared manager took the pool back", []Member{busy, spare("spare-0", "cm", "3", 2), spare("spare-1", "node", "2", 3)}, "spare-0"},
		{"replica that does not act", []Member{busy, spare("spare-1", "node", "", 3)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var anns []api.FlockAnnouncement
			for _, m := range tc.members {
				if a, err := Parse(m, t0); err == nil {
					anns = append(anns, a)
				}
			}
			var got []string
			node := ""
			for _, a := range Current(anns) {
				got = append(got, a.Pool)
				if a.Pool == "spare" {
					node = a.Node
				}
			}
			if node != tc.node {
				t.Fatalf("spare's announcement from %q, want %q (pools %v)", node, tc.node, got)
			}
			w := Admitted("busy", Current(anns), flocks, nil)
			if tc.node == "" {
				if len(w) != 0 {
					t.Fatalf("admitted %+v", w)
				}
				return
			}
			if len(w) != 1 || w[0].API != tc.node+":1" || w[0].Node != tc.node {
				t.Fatalf("busy's admitted list %+v, want spare at %s:1", w, tc.node)
			}
		})
	}
}

// TestManagerReplace replaces a manager's flocks as a replica does when it
// takes over: they are kept in its data directory, a wrong one changes
// nothing, and the announcement's accept list follows at once.
func TestManagerReplace(t *testing.T) {
	s := &sea{members: map[string]Member{"spare-1": {Name: "spare-1", Status: "alive",
		Tags: map[string]string{"role": "node", "epoch": "2", "pool": "spare", "api": "spare-1:1"}}}}
	dir := t.TempDir()
	opts := Options{Pool: "spare", Node: "spare-1", DataDir: dir, Interval: time.Second, TTL: 3 * time.Second,
		Capacity: func(context.Context) (api.FlockCapacity, error) { return api.FlockCapacity{IdleSlots: 1}, nil },
		SetTags:  s.setTags("spare-1"), Members: s.list, Now: func() time.Time { return t0 }}
	m, err := NewManager(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Set(api.FlockConfig{Name: "old", In: &api.FlockIn{From: []string{"x"}}}); err != nil {
		t.Fatal(err)
	}
	want := []api.FlockConfig{{Name: "a", In: &api.FlockIn{From: []string{"busy"}}}, {Name: "b", Out: &api.FlockOut{To: []string{"other"}}}}
	if err := m.Replace(want); err != nil {
		t.Fatal(err)
	}
	if err := m.Replace([]api.FlockConfig{{Name: "bad", Out: &api.FlockOut{Allow: "Cpus >"}}}); err == nil {
		t.Fatal("a flock that does not compile replaced the flocks")
	}
	again, err := NewManager(opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, mm := range []*Manager{m, again} {
		got := mm.Configs()
		if len(got) != 2 || got[0].Name != "a" || got[1].Name != "b" {
			t.Fatalf("flocks %+v, want a and b", got)
		}
	}
	if err := m.Announce(context.Background()); err != nil {
		t.Fatal(err)
	}
	a, err := Parse(s.members["spare-1"], t0)
	if err != nil || a.Epoch != 2 || !a.Accepts("busy") || a.Accepts("x") {
		t.Fatalf("the acting replica's announcement %+v (%v)", a, err)
	}
}
