package collector_test

import (
	"context"
	"errors"
	"slices"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/daemon"
	"github.com/pond-htc/pond/condor/daemon/testpool"
	"github.com/pond-htc/pond/condor/wire"
)

// seed is what nodes a and b advertise with their own tokens before each
// case: their slots, schedd, submitters and master.
func seed(node string) []*wire.UpdateRequest {
	q := func(s string) string { return `"` + s + `"` }
	return []*wire.UpdateRequest{
		{Type: wire.TypeMachine, Source: "startd@" + node, Ads: []wire.Ad{
			{"Name": q("slot1@" + node), "Machine": q(node)}, {"Name": q("slot1_1@" + node), "Machine": q(node)}}},
		{Type: wire.TypeSchedd, Source: "schedd@" + node, Ads: []wire.Ad{{"Name": q(node), "Machine": q(node)}}},
		{Type: wire.TypeSubmitter, Source: "schedd@" + node, Ads: []wire.Ad{{"Name": q("alice@pond"), "ScheddName": q(node)}}},
		{Type: wire.TypeMaster, Source: "master@" + node, Ads: []wire.Ad{{"Name": q(node), "Machine": q(node)}}},
	}
}

// ads lists the collector's ads as "MyType Name AuthenticatedIdentity".
func ads(t *testing.T, c *wire.Collector) []string {
	t.Helper()
	got, err := c.Query(context.Background(), &wire.QueryAdsRequest{Type: wire.TypeAny,
		Projection: []string{"MyType", "Name", "AuthenticatedIdentity"}})
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, a := range got {
		if a["AuthenticatedIdentity"] == `"node/cm"` {
			continue // the central manager's own master ad
		}
		out = append(out, a["MyType"]+" "+a["Name"]+" "+a["AuthenticatedIdentity"])
	}
	sort.Strings(out)
	return out
}

// TestCollectorBindsAdsToNodes checks, over the wire of a real node, that a
// node's token advertises and withdraws only its own node's ads (as
// HTCondor binds an ad to the identity that advertised it), that an
// administrator may withdraw any, and that every ad records the identity
// that advertised it, whatever the ad claims.
func TestCollectorBindsAdsToNodes(t *testing.T) {
	cm := testpool.Start(t, "cm", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR"})
	ctx := context.Background()
	client := func(subject string, scopes ...auth.Scope) *wire.Collector {
		return wire.NewCollector(cm.Addr, testpool.Token(t, subject, scopes...))
	}
	admin := client("admin", auth.Administrator, auth.Daemon)
	nodes := map[string]*wire.Collector{"a": client("node/a", auth.Daemon), "b": client("node/b", auth.Daemon)}
	seeded := []string{
		`"DaemonMaster" "a" "node/a"`, `"DaemonMaster" "b" "node/b"`,
		`"Machine" "slot1@a" "node/a"`, `"Machine" "slot1@b" "node/b"`,
		`"Machine" "slot1_1@a" "node/a"`, `"Machine" "slot1_1@b" "node/b"`,
		`"Scheduler" "a" "node/a"`, `"Scheduler" "b" "node/b"`,
		`"Submitter" "alice@pond" "node/a"`, `"Submitter" "alice@pond" "node/b"`,
	}
	without := func(drop ...string) []string {
		return slices.DeleteFunc(slices.Clone(seeded), func(s string) bool { return slices.Contains(drop, s) })
	}
	with := func(add ...string) []string {
		out := append(slices.Clone(seeded), add...)
		sort.Strings(out)
		return out
	}
	update := func(typ, source string, ad wire.Ad) func(*wire.Collector) error {
		return func(c *wire.Collector) error {
			return c.Update(ctx, &wire.UpdateRequest{Type: typ, Source: source, Ads: []wire.Ad{ad}})
		}
	}
	invalidate := func(typ, source string) func(*wire.Collector) error {
		return func(c *wire.Collector) error {
			return c.Invalidate(ctx, &wire.InvalidateRequest{Type: typ, Source: source})
		}
	}
	tests := []struct {
		name   string
		caller *wire.Collector
		call   func(*wire.Collector) error
		status int
		want   []string
	}{
		{"b overwrites a's slots", nodes["b"], update(wire.TypeMachine, "startd@a", wire.Ad{"Name": `"slot1@b"`, "Machine": `"b"`}), 403, seeded},
		{"b advertises a slot of a's", nodes["b"], update(wire.TypeMachine, "startd@b", wire.Ad{"Name": `"slot1@a"`, "Machine": `"a"`}), 403, seeded},
		{"b advertises a slot on machine a", nodes["b"], update(wire.TypeMachine, "startd@b", wire.Ad{"Name": `"slot1@b"`, "Machine": `"a"`}), 403, seeded},
		{"b advertises a slot without a name", nodes["b"], update(wire.TypeMachine, "startd@b", wire.Ad{"Machine": `"b"`}), 403, seeded},
		{"b advertises a's schedd", nodes["b"], update(wire.TypeSchedd, "schedd@b", wire.Ad{"Name": `"a"`}), 403, seeded},
		{"b advertises submitters of a's schedd", nodes["b"], update(wire.TypeSubmitter, "schedd@b", wire.Ad{"Name": `"bob@pond"`, "ScheddName": `"a"`}), 403, seeded},
		{"b overwrites a's submitters", nodes["b"], update(wire.TypeSubmitter, "schedd@a", wire.Ad{"Name": `"bob@pond"`, "ScheddName": `"b"`}), 403, seeded},
		{"b advertises a's master", nodes["b"], update(wire.TypeMaster, "master@b", wire.Ad{"Name": `"a"`}), 403, seeded},
		{"b advertises under a bare source", nodes["b"], update(wire.TypeMachine, "nobody", wire.Ad{"Name": `"slot9@b"`}), 403, seeded},
		{"b withdraws a's slots", nodes["b"], invalidate(wire.TypeMachine, "startd@a"), 403, seeded},
		{"b withdraws a's submitters", nodes["b"], invalidate(wire.TypeSubmitter, "schedd@a"), 403, seeded},
		{"b withdraws a's master", nodes["b"], invalidate(wire.TypeMaster, "master@a"), 403, seeded},
		{"b withdraws every ad of a's startd", nodes["b"], invalidate(wire.TypeAny, "startd@a"), 403, seeded},
		{"b advertises a slot of its own", nodes["b"], update(wire.TypeMachine, "startd2@b", wire.Ad{"Name": `"slot2@b"`, "Machine": `"b"`}), 200,
			with(`"Machine" "slot2@b" "node/b"`)},
		{"b claims to be a", nodes["b"], update(wire.TypeMachine, "startd2@b", wire.Ad{"Name": `"slot2@b"`, "AuthenticatedIdentity": `"node/a"`}), 200,
			with(`"Machine" "slot2@b" "node/b"`)},
		{"b advertises its own submitters", nodes["b"], update(wire.TypeSubmitter, "schedd2@b", wire.Ad{"Name": `"bob@pond"`, "ScheddName": `"b"`}), 200,
			with(`"Submitter" "bob@pond" "node/b"`)},
		{"b withdraws its own slots", nodes["b"], invalidate(wire.TypeMachine, "startd@b"), 200,
			without(`"Machine" "slot1@b" "node/b"`, `"Machine" "slot1_1@b" "node/b"`)},
		{"an administrator withdraws a's slots", admin, invalidate(wire.TypeMachine, "startd@a"), 200,
			without(`"Machine" "slot1@a" "node/a"`, `"Machine" "slot1_1@a" "node/a"`)},
		{"an administrator withdraws a's ads", admin, invalidate(wire.TypeAny, "schedd@a"), 200,
			without(`"Scheduler" "a" "node/a"`, `"Submitter" "alice@pond" "node/a"`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, src := range []string{"startd", "startd2", "schedd", "schedd2", "master"} {
				for _, n := range []string{"a", "b"} {
					if err := admin.Invalidate(ctx, &wire.InvalidateRequest{Type: wire.TypeAny, Source: src + "@" + n}); err != nil {
						t.Fatal(err)
					}
				}
			}
			for n, c := range nodes {
				for _, req := range seed(n) {
					if err := c.Update(ctx, req); err != nil {
						t.Fatalf("node %s advertising its own %s ads: %v", n, req.Type, err)
					}
				}
			}
			err := tt.call(tt.caller)
			if got := status(err); got != tt.status {
				t.Errorf("HTTP %d (%v), want %d", got, err, tt.status)
			}
			if diff := cmp.Diff(tt.want, ads(t, admin)); diff != "" {
				t.Errorf("ads (-want +got)\n%s", diff)
			}
		})
	}
}

func status(err error) int {
	var we *wire.Error
	if errors.As(err, &we) {
		return we.Status
	}
	if err != nil {
		return -1
	}
	return 200
}

// TestCollectorAcceptSubmitters runs a collector whose pool takes flocked
// jobs from node a's pool but not b's: b's schedd may advertise its schedd
// ad, not its submitters (403); a's submitters and an administrator's go
// in, and a withdrawal (no ads) is never refused.
func TestCollectorAcceptSubmitters(t *testing.T) {
	cfg := testpool.Config(t, testpool.FastKnobs(), testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR"})
	cm, err := testpool.StartWith("cm", "", "", nil, cfg, func(o *daemon.Options) {
		o.AcceptSubmitters = func(node string) error {
			if node == "b" {
				return errors.New("pool of b not accepted")
			}
			return nil
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cm.Stop)
	ctx := context.Background()
	for _, node := range []string{"a", "b"} {
		c := wire.NewCollector(cm.Addr, testpool.Token(t, "node/"+node, auth.Daemon))
		for _, req := range seed(node) {
			err := c.Update(ctx, req)
			refused := node == "b" && req.Type == wire.TypeSubmitter
			var we *wire.Error
			forbidden := errors.As(err, &we) && we.Status == 403
			if refused != forbidden || (!refused && err != nil) {
				t.Errorf("node %s, %s update: %v", node, req.Type, err)
			}
		}
		if err := c.Update(ctx, &wire.UpdateRequest{Type: wire.TypeSubmitter, Source: "schedd@" + node}); err != nil {
			t.Errorf("node %s, an empty submitter update: %v", node, err)
		}
	}
	admin := wire.NewCollector(cm.Addr, testpool.Token(t, "admin", auth.Administrator, auth.Daemon))
	if err := admin.Update(ctx, seed("b")[2]); err != nil {
		t.Errorf("an administrator's submitter update: %v", err)
	}
}
