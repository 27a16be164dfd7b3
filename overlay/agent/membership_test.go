package agent

import (
	"context"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/gossip"
)

// startAgents runs in-process agents from cfgs, each joining the first,
// and stops them when the test ends.
func startAgents(t *testing.T, cfgs ...*Config) []*Agent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, len(cfgs))
	var agents []*Agent
	t.Cleanup(func() {
		cancel()
		for range agents {
			<-done
		}
	})
	for i, cfg := range cfgs {
		cfg.Bind, cfg.API, cfg.GossipProfile, cfg.DataDir = "127.0.0.1:0", "127.0.0.1:0", "fast", t.TempDir()
		if i > 0 {
			cfg.Join = []string{agents[0].Sea().GossipAddr()}
		}
		a, err := New(ctx, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		agents = append(agents, a)
		go func() { a.Run(ctx); done <- struct{}{} }()
	}
	return agents
}

// TestMembershipMovesTheDaemons invites a free node into a pond and
// releases it: its CONDOR_HOST (the daemons' configuration and the cm tag),
// its pond tag and its machine ad follow, and a cm tag set through the API
// moves the daemons too.
func TestMembershipMovesTheDaemons(t *testing.T) {
	agents := startAgents(t,
		&Config{Name: "cm", Role: "cm", Pool: "campus"},
		&Config{Name: "free", Role: "node"})
	cm, free := agents[0], agents[1]
	client := api.NewClient(free.APIAddr())
	ctx := t.Context()

	check := func(t *testing.T, wantCM, wantPond string) {
		t.Helper()
		if got, _ := free.daemons.master.Config().Get("CONDOR_HOST"); got != wantCM {
			t.Errorf("daemons' CONDOR_HOST = %q, want %q", got, wantCM)
		}
		tags := free.Sea().LocalMember().Tags
		if tags[gossip.TagCM] != wantCM || tags[gossip.TagPond] != wantPond {
			t.Errorf("tags cm=%q pond=%q, want %q %q", tags[gossip.TagCM], tags[gossip.TagPond], wantCM, wantPond)
		}
		name, _ := free.MachineAd().EvalAttr("PondName").StringValue()
		if name != wantPond {
			t.Errorf("machine ad PondName = %q, want %q", name, wantPond)
		}
	}
	check(t, free.APIAddr(), "")

	// A node of a declared pool declines.
	if r, err := api.NewClient(cm.APIAddr()).Invite(ctx, api.Invitation{Pond: "burst", PondID: "p1", CentralManager: cm.APIAddr()}); err != nil || r.Accepted {
		t.Fatalf("the pool's central manager answered %+v, %v", r, err)
	}
	r, err := client.Invite(ctx, api.Invitation{Pond: "burst", PondID: "p1", CentralManager: cm.APIAddr(), Lease: time.Hour})
	if err != nil || !r.Accepted {
		t.Fatalf("invite: %+v, %v", r, err)
	}
	check(t, cm.APIAddr(), "burst")

	rr, err := client.Release(ctx, "p1", api.Drain{Mode: api.DrainEvict})
	if err != nil || !rr.Released {
		t.Fatalf("release: %+v, %v", rr, err)
	}
	check(t, free.APIAddr(), "")

	if _, err := client.SetTags(ctx, map[string]string{gossip.TagCM: cm.APIAddr()}); err != nil {
		t.Fatal(err)
	}
	if got, _ := free.daemons.master.Config().Get("CONDOR_HOST"); got != cm.APIAddr() {
		t.Errorf("after PUT /v1/tags cm: daemons' CONDOR_HOST = %q, want %q", got, cm.APIAddr())
	}
}
