package negotiator

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pond-htc/pond/condor/config"
)

func groupCfg(t *testing.T, knobs ...string) *config.Config {
	t.Helper()
	cfg := config.New(config.Options{})
	for _, kv := range knobs {
		k, v, _ := strings.Cut(kv, "=")
		if err := cfg.Set(strings.TrimSpace(k), strings.TrimSpace(v)); err != nil {
			t.Fatal(err)
		}
	}
	return cfg
}

func TestMatchmakeGroups(t *testing.T) {
	idle := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = "RequestCpus = 1\nRequestMemory = 10\nRequestDisk = 10\nRequirements = true"
		}
		return out
	}
	slots := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = slotAd(fmt.Sprintf("slot%d@x", i), defSlot)
		}
		return out
	}
	cases := []struct {
		name  string
		knobs []string
		slots int
		subs  []poolSub
		usage map[string]float64 // slot weight already held; the pool has that many more claimed slots
		want  map[string]int     // matches by submitter
		quota map[string]float64 // EffectiveQuota by group
	}{
		{name: "static, surplus off", slots: 4,
			knobs: []string{"GROUP_NAMES = group_a, group_b", "GROUP_QUOTA_group_a = 3", "GROUP_QUOTA_group_b = 1"},
			subs:  []poolSub{{name: "group_a.alice@x", prio: 1, jobs: idle(10)}, {name: "group_b.bob@x", prio: 1, jobs: idle(10)}},
			want:  map[string]int{"group_a.alice@x": 3, "group_b.bob@x": 1},
			quota: map[string]float64{"group_a": 3, "group_b": 1, RootGroup: 0}},
		{name: "surplus off leaves an idle group's share unused", slots: 4,
			knobs: []string{"GROUP_NAMES = group_a, group_b", "GROUP_QUOTA_group_a = 3", "GROUP_QUOTA_group_b = 1"},
			subs:  []poolSub{{name: "group_a.alice@x", prio: 1, jobs: idle(10)}},
			want:  map[string]int{"group_a.alice@x": 3}},
		{name: "surplus on takes an idle group's share", slots: 4,
			knobs: []string{"GROUP_NAMES = group_a, group_b", "GROUP_QUOTA_group_a = 3", "GROUP_QUOTA_group_b = 1",
				"GROUP_ACCEPT_SURPLUS = true"},
			subs: []poolSub{{name: "group_a.alice@x", prio: 1, jobs: idle(10)}},
			want: map[string]int{"group_a.alice@x": 4}},
		{name: "surplus per group", slots: 6,
			knobs: []string{"GROUP_NAMES = group_a, group_b, group_c", "GROUP_QUOTA_group_a = 2", "GROUP_QUOTA_group_b = 2",
				"GROUP_QUOTA_group_c = 2", "GROUP_ACCEPT_SURPLUS_group_b = true"},
			subs: []poolSub{{name: "group_a.alice@x", prio: 1, jobs: idle(10)}, {name: "group_b.bob@x", prio: 1, jobs: idle(10)}},
			want: map[string]int{"group_a.alice@x": 2, "group_b.bob@x": 4}},
		{name: "dynamic", slots: 8,
			knobs: []string{"GROUP_NAMES = group_a, group_b", "GROUP_QUOTA_DYNAMIC_group_a = 0.75", "GROUP_QUOTA_DYNAMIC_group_b = 0.25"},
			subs:  []poolSub{{name: "group_a.alice@x", prio: 1, jobs: idle(10)}, {name: "group_b.bob@x", prio: 1, jobs: idle(10)}},
			want:  map[string]int{"group_a.alice@x": 6, "group_b.bob@x": 2},
			quota: map[string]float64{"group_a": 6, "group_b": 2}},
		{name: "dynamic over 1 is scaled", slots: 8,
			knobs: []string{"GROUP_NAMES = group_a, group_b", "GROUP_QUOTA_DYNAMIC_group_a = 1", "GROUP_QUOTA_DYNAMIC_group_b = 1"},
			subs:  []poolSub{{name: "group_a.alice@x", prio: 1, jobs: idle(10)}, {name: "group_b.bob@x", prio: 1, jobs: idle(10)}},
			want:  map[string]int{"group_a.alice@x": 4, "group_b.bob@x": 4}},
		{name: "nested", slots: 8,
			knobs: []string{"GROUP_NAMES = group_physics, group_physics.hep, group_chem", "GROUP_QUOTA_group_physics = 4",
				"GROUP_QUOTA_DYNAMIC_group_physics.hep = 0.5", "GROUP_QUOTA_group_chem = 4",
				// Oversubscribed (the default), group_physics's own quota
				// would be all of its 4, not what its subgroup leaves.
				"NEGOTIATOR_ALLOW_QUOTA_OVERSUBSCRIPTION = false"},
			subs: []poolSub{{name: "group_physics.hep.alice@x", prio: 1, jobs: idle(10)},
				{name: "group_physics.carol@x", prio: 1, jobs: idle(10)}, {name: "group_chem.dan@x", prio: 1, jobs: idle(10)}},
			want:  map[string]int{"group_physics.hep.alice@x": 2, "group_physics.carol@x": 2, "group_chem.dan@x": 4},
			quota: map[string]float64{"group_physics": 2, "group_physics.hep": 2, "group_chem": 4}},
		{name: "nested parent without surplus caps its subgroup", slots: 8,
			knobs: []string{"GROUP_NAMES = group_physics, group_physics.hep", "GROUP_QUOTA_group_physics = 4",
				"GROUP_QUOTA_DYNAMIC_group_physics.hep = 0.5", "GROUP_ACCEPT_SURPLUS_group_physics.hep = true"},
			subs: []poolSub{{name: "group_physics.hep.alice@x", prio: 1, jobs: idle(10)}},
			want: map[string]int{"group_physics.hep.alice@x": 4}},
		{name: "<none> gets what the groups leave", slots: 4,
			knobs: []string{"GROUP_NAMES = group_a", "GROUP_QUOTA_group_a = 2"},
			subs:  []poolSub{{name: "group_a.alice@x", prio: 1, jobs: idle(10)}, {name: "dave@x", prio: 1, jobs: idle(10)}},
			want:  map[string]int{"group_a.alice@x": 2, "dave@x": 2},
			quota: map[string]float64{RootGroup: 2, "group_a": 2}},
		{name: "an undefined group negotiates in <none>", slots: 4,
			knobs: []string{"GROUP_NAMES = group_a", "GROUP_QUOTA_group_a = 3"},
			subs:  []poolSub{{name: "group_zz.eve@x", prio: 1, jobs: idle(10)}, {name: "group_a.alice@x", prio: 1, jobs: idle(10)}},
			want:  map[string]int{"group_zz.eve@x": 1, "group_a.alice@x": 3}},
		{name: "<none> always takes the surplus", slots: 4,
			knobs: []string{"GROUP_NAMES = group_a", "GROUP_QUOTA_group_a = 3"},
			subs:  []poolSub{{name: "eve@x", prio: 1, jobs: idle(10)}},
			want:  map[string]int{"eve@x": 4}},
		{name: "usage counts against the quota", slots: 2,
			knobs: []string{"GROUP_NAMES = group_a, group_b", "GROUP_QUOTA_group_a = 3", "GROUP_QUOTA_group_b = 1"},
			usage: map[string]float64{"group_a.alice@x": 2},
			subs:  []poolSub{{name: "group_a.alice@x", prio: 1, jobs: idle(10)}, {name: "group_b.bob@x", prio: 1, jobs: idle(10)}},
			want:  map[string]int{"group_a.alice@x": 1, "group_b.bob@x": 1}},
		{name: "fair share inside a group", slots: 4,
			knobs: []string{"GROUP_NAMES = group_a", "GROUP_QUOTA_group_a = 4"},
			subs:  []poolSub{{name: "group_a.alice@x", prio: 1, jobs: idle(10)}, {name: "group_a.bob@x", prio: 1, jobs: idle(10)}},
			want:  map[string]int{"group_a.alice@x": 2, "group_a.bob@x": 2}},
		{name: "autoregroup takes the leftovers", slots: 4,
			knobs: []string{"GROUP_NAMES = group_a, group_b", "GROUP_QUOTA_group_a = 1", "GROUP_QUOTA_group_b = 3",
				"GROUP_AUTOREGROUP_group_a = true"},
			subs: []poolSub{{name: "group_a.alice@x", prio: 1, jobs: idle(10)}},
			want: map[string]int{"group_a.alice@x": 4}},
		{name: "oversubscription off scales static quotas", slots: 4,
			knobs: []string{"GROUP_NAMES = group_a, group_b", "GROUP_QUOTA_group_a = 6", "GROUP_QUOTA_group_b = 2",
				"NEGOTIATOR_ALLOW_QUOTA_OVERSUBSCRIPTION = false"},
			subs:  []poolSub{{name: "group_a.alice@x", prio: 1, jobs: idle(10)}, {name: "group_b.bob@x", prio: 1, jobs: idle(10)}},
			want:  map[string]int{"group_a.alice@x": 3, "group_b.bob@x": 1},
			quota: map[string]float64{"group_a": 3, "group_b": 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tree, warns, err := ReadGroups(groupCfg(t, c.knobs...))
			if err != nil || tree == nil {
				t.Fatalf("ReadGroups: %v, %v (warnings %q)", tree, err, warns)
			}
			sl, subs := pool{slots: slots(c.slots), subs: c.subs}.build(t)
			total := float64(c.slots)
			for _, u := range c.usage {
				total += u
			}
			ms, report := MatchmakeGroups(sl, subs, tree, total, c.usage)
			got := map[string]int{}
			for _, m := range ms {
				got[m.Submitter]++
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("matched %v; want %v\ngroups %+v", got, c.want, report)
			}
			byName := map[string]GroupQuota{}
			for _, g := range report {
				byName[g.Name] = g
			}
			for name, q := range c.quota {
				if g, ok := byName[name]; !ok || g.Quota != q {
					t.Errorf("group %s: quota %+v; want %g", name, g, q)
				}
			}
		})
	}
}

func TestGroupBlockedAndUsageReport(t *testing.T) {
	tree, _, err := ReadGroups(groupCfg(t, "GROUP_NAMES = group_a", "GROUP_QUOTA_group_a = 1"))
	if err != nil {
		t.Fatal(err)
	}
	job := "RequestCpus = 1\nRequestMemory = 10\nRequestDisk = 10\nRequirements = true"
	sl, subs := pool{slots: []string{slotAd("s1", defSlot), slotAd("s2", defSlot), slotAd("s3", defSlot)},
		subs: []poolSub{{name: "group_a.alice@x", prio: 1, jobs: []string{job, job, job}}}}.build(t)
	_, report := MatchmakeGroups(sl, subs, tree, 3, nil)
	var a GroupQuota
	for _, g := range report {
		if g.Name == "group_a" {
			a = g
		}
	}
	if a.Usage != 1 || a.Blocked != 2 || a.Requested != 3 || a.Quota != 1 || !a.Static || a.Submitters != 1 {
		t.Fatalf("group_a = %+v; want usage 1, 2 blocked, requested 3, quota 1", a)
	}
}

func TestReadGroups(t *testing.T) {
	cases := []struct {
		name  string
		knobs []string
		err   string // an error naming this
		warn  string // else a warning naming this
		none  bool   // no group quotas
	}{
		{name: "none", knobs: nil, none: true},
		{name: "negative", knobs: []string{"GROUP_NAMES = group_a", "GROUP_QUOTA_group_a = -1"}, err: "GROUP_QUOTA_group_a"},
		{name: "not a number", knobs: []string{"GROUP_NAMES = group_a", "GROUP_QUOTA_group_a = lots"}, err: "GROUP_QUOTA_GROUP_A"},
		{name: "dynamic over 1", knobs: []string{"GROUP_NAMES = group_a", "GROUP_QUOTA_DYNAMIC_group_a = 1.5"}, err: "GROUP_QUOTA_DYNAMIC_group_a"},
		{name: "bad surplus", knobs: []string{"GROUP_NAMES = group_a", "GROUP_QUOTA_group_a = 1", "GROUP_ACCEPT_SURPLUS_group_a = maybe"}, err: "GROUP_ACCEPT_SURPLUS_GROUP_A"},
		{name: "quota of an unknown group", knobs: []string{"GROUP_NAMES = group_a", "GROUP_QUOTA_group_a = 1", "GROUP_QUOTA_group_b = 2"},
			warn: "GROUP_QUOTA_group_b: group group_b is not in GROUP_NAMES"},
		{name: "quota without GROUP_NAMES", knobs: []string{"GROUP_QUOTA_group_b = 2"}, warn: "GROUP_QUOTA_group_b", none: true},
		{name: "dynamic sum over 1", knobs: []string{"GROUP_NAMES = a, b", "GROUP_QUOTA_DYNAMIC_a = 0.7", "GROUP_QUOTA_DYNAMIC_b = 0.7"},
			warn: "GROUP_QUOTA_DYNAMIC_a, GROUP_QUOTA_DYNAMIC_b sum to 1.4"},
		{name: "missing parent", knobs: []string{"GROUP_NAMES = a, b.c", "GROUP_QUOTA_a = 1", "GROUP_QUOTA_b.c = 1"},
			warn: "group b.c is ignored: its parent group b"},
		{name: "no quota", knobs: []string{"GROUP_NAMES = a"}, warn: "neither GROUP_QUOTA_a nor GROUP_QUOTA_DYNAMIC_a"},
		{name: "both quotas", knobs: []string{"GROUP_NAMES = a", "GROUP_QUOTA_a = 1", "GROUP_QUOTA_DYNAMIC_a = 0.5"},
			warn: "GROUP_QUOTA_a and GROUP_QUOTA_DYNAMIC_a are both set"},
		{name: "own knobs are no group's", knobs: []string{"GROUP_NAMES = a", "GROUP_QUOTA_a = 1", "GROUP_QUOTA_MAX_ALLOCATION_ROUNDS = 2"}},
		{name: "rounds", knobs: []string{"GROUP_NAMES = a", "GROUP_QUOTA_a = 1", "GROUP_QUOTA_MAX_ALLOCATION_ROUNDS = 0"}, err: "GROUP_QUOTA_MAX_ALLOCATION_ROUNDS"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tree, warns, err := ReadGroups(groupCfg(t, c.knobs...))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("ReadGroups = %v; want an error naming %s", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (tree == nil) != c.none {
				t.Fatalf("tree %v; want none: %v", tree, c.none)
			}
			all := strings.Join(warns, "\n")
			if c.warn != "" && !strings.Contains(all, c.warn) {
				t.Fatalf("warnings %q; want one with %q", warns, c.warn)
			}
			if c.warn == "" && len(warns) > 0 {
				t.Fatalf("unexpected warnings %q", warns)
			}
		})
	}
}

func TestGroupOf(t *testing.T) {
	tree, _, err := ReadGroups(groupCfg(t, "GROUP_NAMES = group_physics, group_physics.hep", "GROUP_QUOTA_group_physics = 1",
		"GROUP_QUOTA_group_physics.hep = 1"))
	if err != nil {
		t.Fatal(err)
	}
	names := []string{RootGroup, "group_physics", "group_physics.hep"}
	for sub, want := range map[string]string{
		"alice@x": RootGroup, "group_physics.alice@x": "group_physics", "group_physics.hep.alice@x": "group_physics.hep",
		"GROUP_PHYSICS.HEP.alice@x": "group_physics.hep", "group_physics.lhc.alice@x": "group_physics",
		"group_other.bob@x": RootGroup, "nodomain": RootGroup,
	} {
		if got := tree.GroupOf(sub); got != want {
			t.Errorf("GroupOf(%q) = %q; want %q", sub, got, want)
		}
		if got := AssignGroup(names, sub); got != want {
			t.Errorf("AssignGroup(%q) = %q; want %q", sub, got, want)
		}
	}
}

// TestGroupMetrics: the groups of the last cycle are exported.
func TestGroupMetrics(t *testing.T) {
	n, err := New(Options{Config: groupCfg(t, "GROUP_NAMES = group_a", "GROUP_QUOTA_group_a = 1")})
	if err != nil {
		t.Fatal(err)
	}
	job := "RequestCpus = 1\nRequestMemory = 10\nRequestDisk = 10\nRequirements = true"
	sl, subs := pool{slots: []string{slotAd("s1", defSlot), slotAd("s2", defSlot)},
		subs: []poolSub{{name: "group_a.alice@x", prio: 1, jobs: []string{job, job}}}}.build(t)
	gc := newGroupCycle(n.groups, 2, nil)
	ms, _ := matchmake(sl, subs, nil, gc, JobRanks{})
	n.recordGroups(gc, ms)
	want := `
# HELP pond_negotiator_group_quota Effective quota of each accounting group (GROUP_NAMES) at the negotiator's last cycle, in slot weights (cpus).
# TYPE pond_negotiator_group_quota gauge
pond_negotiator_group_quota{group="<none>"} 1
pond_negotiator_group_quota{group="group_a"} 1
# HELP pond_negotiator_group_usage Slot weight (cpus) each accounting group's claims held at the negotiator's last cycle, its matches included.
# TYPE pond_negotiator_group_usage gauge
pond_negotiator_group_usage{group="<none>"} 0
pond_negotiator_group_usage{group="group_a"} 1
`
	if err := testutil.CollectAndCompare(n, strings.NewReader(want), "pond_negotiator_group_quota", "pond_negotiator_group_usage"); err != nil {
		t.Error(err)
	}
}
