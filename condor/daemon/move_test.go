package daemon_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
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
	t.Parallel()
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

// TestStaleEpochClaimsRefused runs a negotiator of epoch 1 against a startd
// that has seen epoch 2 (a replica took over; this negotiator was cut off):
// its matches carry the epoch through the schedd to the startd, which
// refuses every claim, so the job stays idle; once the negotiator is of
// epoch 2 too, the job runs.
func TestStaleEpochClaimsRefused(t *testing.T) {
	t.Parallel()
	cm, execs := pool(t, 1, testpool.Knobs{wire.EpochKnob: "1"})
	exec := execs[0]
	knobs := testpool.Knobs{"DAEMON_LIST": "MASTER, STARTD", "CONDOR_HOST": cm.Addr, wire.EpochKnob: "2"}
	if err := exec.Master.Reconfig(testpool.Config(t, testpool.FastKnobs(), knobs)); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	submitFile(t, cm, dir, `
executable = /bin/sh
arguments = "-c 'echo ran'"
output = out
log = job.log
queue
`)
	deadline := time.Now().Add(6 * time.Second)
	for time.Now().Before(deadline) {
		if st := cm.Master.Negotiator().LastCycle(); st.Matches > 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st := cm.Master.Negotiator().LastCycle(); st.Matches == 0 {
		t.Fatalf("the negotiator of epoch 1 made no match in 6 s: %+v", st)
	}
	time.Sleep(2 * time.Second)
	jobs, err := cm.Client().Schedd().Queue(context.Background(), &wire.QueryJobsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].Ad["JobStatus"] != "1" {
		t.Fatalf("the job ran on a startd of epoch 2 matched by a negotiator of epoch 1: %v", jobs)
	}
	if exec.Master.Startd().Epoch() != 2 {
		t.Errorf("the startd's epoch is %d, want 2", exec.Master.Startd().Epoch())
	}

	cmKnobs := testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR, NEGOTIATOR, SCHEDD", wire.EpochKnob: "2"}
	if err := cm.Master.Reconfig(testpool.Config(t, testpool.FastKnobs(), cmKnobs)); err != nil {
		t.Fatal(err)
	}
	waitDone(t, cm, time.Minute)
	if got, err := os.ReadFile(filepath.Join(dir, "out")); err != nil || string(got) != "ran\n" {
		t.Errorf("output %q, %v", got, err)
	}
}
