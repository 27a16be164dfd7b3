package agent

import (
	"context"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/overlay/api"
)

// TestManagerRestartKeepsRelayedJob restarts, while a relayed worker runs
// one of its jobs, the worker's relay when the relay is its central
// manager: the agent that also runs the collector, the negotiator and the
// schedd that submitted the job. The manager comes back as a new agent on
// its data directory and addresses (its schedd recovers the job queue),
// with the ports it served the worker on free again or taken by other
// programs. The restart fits in the claim's lease (ALIVE_INTERVAL 2 s x
// MAX_CLAIM_ALIVES_MISSED 10: 20 s);
// beyond it the worker kills its job by design. The worker attaches to
// the restarted manager, is alive in the sea again at the addresses its
// relay now serves it on, and the job completes exactly once: one execute
// and one terminate event in its log, no failed reconnection, no
// eviction, one start.
func TestManagerRestartKeepsRelayedJob(t *testing.T) {
	for _, tc := range []struct {
		name      string
		takePorts bool // other programs take the worker's relayed ports meanwhile
	}{
		{name: "same ports"},
		{name: "ports taken", takePorts: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sea := newRelaySea(t)
			// A lease of 20 s: a loaded machine takes seconds to restart
			// the manager.
			f, err := os.OpenFile(sea.conf, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteString("MAX_CLAIM_ALIVES_MISSED = 10\n"); err != nil {
				t.Fatal(err)
			}
			f.Close()
			ccfg := sea.config(&Config{Name: "cm", Role: "cm", Pool: "campus"})
			ccfg.API, ccfg.Bind = freeAddr(t), freeAddr(t)
			var cmNow *Agent
			startCM := func() (stop func()) {
				ctx, cancel := context.WithCancel(context.Background())
				a, err := New(ctx, ccfg, nil)
				if err != nil {
					cancel()
					t.Fatal(err)
				}
				cmNow = a
				done := make(chan struct{})
				go func() { a.Run(ctx); close(done) }()
				stop = func() { cancel(); <-done }
				t.Cleanup(stop)
				return stop
			}
			stopCM := startCM()

			wcfg := sea.config(&Config{Name: "w1", Role: "node", Pool: "campus", CondorHost: ccfg.API, Reach: ReachRelay})
			wcfg.Join = []string{ccfg.Bind}
			w := sea.start(wcfg)
			tun := w.Tunnel()
			if tun == nil || w.RelayName() != "cm" {
				t.Fatalf("w1's relay is %q", w.RelayName())
			}
			before := tun.Addrs()
			// alive says whether a sees w1 alive at its relay's current
			// gossip address.
			alive := func(a *Agent) error {
				want := tun.Addrs().Gossip
				for _, m := range a.Sea().Members() {
					if m.Name == "w1" {
						if m.Status != api.StatusAlive || m.GossipAddr() != want {
							return fmt.Errorf("%s sees w1 %s at %s, want alive at %s", a.cfg.Name, m.Status, m.GossipAddr(), want)
						}
						return nil
					}
				}
				return fmt.Errorf("%s does not know w1", a.cfg.Name)
			}
			waitFor(t, 20*time.Second, "cm to see w1 behind it", func() error { return alive(cmNow) })

			job := startRelayedJob(t, sea, cmNow, `PondReach == "reverse" && PondRelay == "cm"`, 20)
			job.waitStarted(t)

			attaches := tun.Attaches()
			stopped := time.Now()
			stopCM()
			if tc.takePorts {
				for _, a := range []string{before.API, before.Tree, before.Gossip} {
					ln, err := net.Listen("tcp", a)
					if err != nil {
						t.Fatalf("taking %s: %v", a, err)
					}
					t.Cleanup(func() { ln.Close() })
				}
			}
			startCM()
			if d := time.Since(stopped); d > 10*time.Second {
				t.Fatalf("the manager took %v to restart: past half the claim's 20 s lease", d)
			}
			waitFor(t, 30*time.Second, "w1 to attach to the restarted manager", func() error {
				if tun.Attaches() <= attaches || !tun.Connected() {
					return fmt.Errorf("attaches %d, connected %v", tun.Attaches(), tun.Connected())
				}
				return nil
			})
			after := tun.Addrs()
			if tc.takePorts && (after.API == before.API || after.Tree == before.Tree || after.Gossip == before.Gossip) {
				t.Fatalf("w1's addresses after the restart %+v, want new ones: %+v are taken", after, before)
			}
			if !tc.takePorts && after != before {
				t.Errorf("w1's addresses after the restart %+v, want its former ones %+v, free again", after, before)
			}
			// The job completes where it ran, once.
			job.waitDone(t)
			checkOnePair(t, job.log)
			// w1 is alive in the sea again: the restarted manager knows it
			// at the address its relay serves it on, and w1, which saw the
			// manager leave, knows it again.
			waitFor(t, 30*time.Second, "the restarted manager to see w1 alive", func() error { return alive(cmNow) })
			waitFor(t, 30*time.Second, "w1 to see the restarted manager alive", func() error {
				for _, m := range w.Sea().Members() {
					if m.Name == "cm" {
						if m.Status != api.StatusAlive {
							return fmt.Errorf("w1 sees cm %s", m.Status)
						}
						return nil
					}
				}
				return fmt.Errorf("w1 does not know cm")
			})
			waitFor(t, 10*time.Second, "the manager to keep seeing w1 alive", func() error { return alive(cmNow) })
		})
	}
}

// checkOnePair checks that the job log at path has one execute and one
// terminate event: the job ran and ended once.
func checkOnePair(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, err := joblog.ReadAll(f, time.Local)
	if err != nil {
		t.Fatal(err)
	}
	n := map[joblog.EventType]int{}
	for _, ev := range evs {
		n[ev.Type]++
	}
	if n[joblog.Execute] != 1 || n[joblog.Terminated] != 1 {
		b, _ := os.ReadFile(path)
		t.Errorf("the job's log has %d execute and %d terminate events, want one of each:\n%s", n[joblog.Execute], n[joblog.Terminated], b)
	}
}
