package daemon_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/daemon/testpool"
	"github.com/pond-htc/pond/condor/wire"
)

// TestMoveFromSilentCollector moves a node's startd and schedd from a
// central manager that accepts connections but never answers (one cut off
// by a partition) to a live one: the reconfiguration returns within a
// second or so, and the new collector has the node's ads at once, not
// after the withdrawal from the old one has timed out.
func TestMoveFromSilentCollector(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		silent.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})

	cm := testpool.Start(t, "cm", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR"})
	knobs := testpool.Knobs{"DAEMON_LIST": "MASTER, SCHEDD, STARTD", "UPDATE_INTERVAL": "60"}
	node := testpool.Start(t, "node", "", "", nil, knobs, testpool.Knobs{"CONDOR_HOST": silent.Addr().String()})

	start := time.Now()
	if err := node.Master.Reconfig(testpool.Config(t, testpool.FastKnobs(), knobs, testpool.Knobs{"CONDOR_HOST": cm.Addr})); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the move took %s: it waited for the silent collector", took)
	}
	for _, typ := range []string{wire.TypeMachine, wire.TypeSchedd} {
		for {
			ads, err := cm.Client().Collector().Query(context.Background(), &wire.QueryAdsRequest{Type: typ})
			if err != nil {
				t.Fatal(err)
			}
			if len(ads) > 0 {
				break
			}
			if time.Since(start) > 3*time.Second {
				t.Fatalf("no %s ad at the new collector %s after the move", typ, time.Since(start).Round(time.Millisecond))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	t.Logf("ads at the new collector %s after the move", time.Since(start).Round(time.Millisecond))
}
