package agent

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/gossip"
	"github.com/pond-htc/pond/overlay/tree"
)

// freeAddr is 127.0.0.1:PORT with PORT free for TCP and UDP when asked:
// where an agent restarted on its data directory listens again.
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 10 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		u, err := net.ListenPacket("udp", addr)
		ln.Close()
		if err == nil {
			u.Close()
			return addr
		}
	}
	t.Fatal("no port free for both TCP and UDP")
	return ""
}

// TestRelayRestartMovesWorker restarts a worker's relay agent on its data
// directory and addresses while other programs hold the ports it served
// the worker on: the worker attaches to it again on new ports and
// advertises them, its API address in its serf tag (as the central
// manager sees it), in /v1/self and in the machine ad's PondAPI, and its
// tree address in its tree tag; the worker answers at its new API
// address.
func TestRelayRestartMovesWorker(t *testing.T) {
	sea := newRelaySea(t)
	cm := sea.start(sea.config(&Config{Name: "cm", Role: "cm", Pool: "campus"}))
	rcfg := sea.config(&Config{Name: "r1", Role: "node", Pool: "campus", CondorHost: cm.APIAddr()})
	rcfg.API, rcfg.Bind = freeAddr(t), freeAddr(t)
	rcfg.Join = []string{cm.Sea().GossipAddr()}
	// The relay runs until stopRelay, the test's cleanup stops it again.
	startRelay := func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		a, err := New(ctx, rcfg, nil)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { a.Run(ctx); close(done) }()
		stop = func() { cancel(); <-done }
		t.Cleanup(stop)
		return stop
	}
	stopRelay := startRelay()

	wcfg := sea.config(&Config{Name: "w1", Role: "node", Pool: "campus", CondorHost: cm.APIAddr(), Relay: rcfg.API, Reach: ReachRelay})
	wcfg.Join = []string{cm.Sea().GossipAddr()}
	w := sea.start(wcfg)
	ctx := t.Context()
	tun := w.Tunnel()
	if tun == nil || w.RelayName() != "r1" {
		t.Fatalf("w1's relay is %q", w.RelayName())
	}
	before := tun.Addrs()
	reader := sea.client(cm.APIAddr(), auth.SeaRead)
	// w1 as cm sees it: its API and tree tags.
	w1Tags := func(apiAddr, treeAddr string) error {
		ms, err := reader.Members(ctx, api.MembersFilter{})
		if err != nil {
			return err
		}
		for _, m := range ms {
			if m.Name == "w1" {
				if m.Status != gossip.StatusAlive || m.Tags[gossip.TagAPI] != apiAddr || m.Tags[tree.TagAddr] != treeAddr {
					return fmt.Errorf("w1 is %s with api %s, tree %s; want alive, %s, %s", m.Status, m.Tags[gossip.TagAPI], m.Tags[tree.TagAddr], apiAddr, treeAddr)
				}
				return nil
			}
		}
		return fmt.Errorf("w1 not among %d members", len(ms))
	}
	waitFor(t, 20*time.Second, "cm to see w1 behind r1", func() error { return w1Tags(before.API, before.Tree) })

	stopRelay()
	for _, a := range []string{before.API, before.Tree, before.Gossip} {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("taking %s: %v", a, err)
		}
		t.Cleanup(func() { ln.Close() })
	}
	attaches := tun.Attaches()
	startRelay()
	waitFor(t, 30*time.Second, "w1 to attach to the restarted relay", func() error {
		if tun.Attaches() <= attaches || !tun.Connected() {
			return fmt.Errorf("attaches %d, connected %v", tun.Attaches(), tun.Connected())
		}
		return nil
	})
	after := tun.Addrs()
	if after.API == before.API || after.Tree == before.Tree || after.Gossip == before.Gossip {
		t.Fatalf("w1's addresses after the relay's restart %+v, want new ones: %+v are taken", after, before)
	}
	waitFor(t, 10*time.Second, "w1 to advertise its new API address", func() error {
		if w.APIAddr() != after.API {
			return fmt.Errorf("w1 advertises %s, its relay serves it on %s", w.APIAddr(), after.API)
		}
		return nil
	})
	waitFor(t, 30*time.Second, "cm to see w1's new addresses", func() error { return w1Tags(after.API, after.Tree) })
	self, err := sea.client(after.API, auth.SeaRead).Self(ctx)
	if err != nil || self.Name != "w1" || self.API != after.API {
		t.Fatalf("w1's /v1/self at its new address: %+v, %v", self, err)
	}
	// A tree query from cm reaches w1 at its new tree address, and its
	// machine ad names its new API address.
	waitFor(t, 30*time.Second, "a tree query to reach w1 at its new address", func() error {
		ans, err := reader.Query(ctx, api.Query{Requirements: `PondReach == "reverse"`, Attrs: []string{"PondAPI"}})
		if err != nil {
			return err
		}
		if got := matchNames(ans); got != "w1" {
			return fmt.Errorf("matched %q", got)
		}
		if got, _ := ans.Matches[0].Attrs["PondAPI"].(string); got != after.API {
			return fmt.Errorf("w1's PondAPI %q, want %s", got, after.API)
		}
		return nil
	})
}
