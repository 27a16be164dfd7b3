package agent

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
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
// directory and addresses, while the worker runs a job, with other
// programs holding the ports it served the worker on: the worker attaches
// to it again on new ports and advertises them, its API address in its
// serf tag (as the central manager sees it), in /v1/self and in the
// machine ad's PondAPI, and its tree address in its tree tag; it moves
// its gossip to its new gossip address, where the central manager and the
// restarted relay see it alive; the worker answers at its new API
// address. The job goes on where it runs and completes exactly once: no
// disconnection, no requeue.
func TestRelayRestartMovesWorker(t *testing.T) {
	t.Parallel()
	sea := newRelaySea(t)
	cm := sea.start(sea.config(&Config{Name: "cm", Role: "cm", Pool: "campus"}))
	rcfg := sea.config(&Config{Name: "r1", Role: "node", Pool: "campus", CondorHost: cm.APIAddr()})
	rcfg.API, rcfg.Bind = freeAddr(t), freeAddr(t)
	rcfg.Join = []string{cm.Sea().GossipAddr()}
	// The relay runs until stopRelay, the test's cleanup stops it again;
	// relayAgent is the one running now.
	var relayNow *Agent
	relayAgent := func() *Agent { return relayNow }
	startRelay := func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		a, err := New(ctx, rcfg, nil)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		relayNow = a
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
				if m.Status != api.StatusAlive || m.Tags[api.TagAPI] != apiAddr || m.Tags[api.TagTree] != treeAddr {
					return fmt.Errorf("w1 is %s with api %s, tree %s; want alive, %s, %s", m.Status, m.Tags[api.TagAPI], m.Tags[api.TagTree], apiAddr, treeAddr)
				}
				return nil
			}
		}
		return fmt.Errorf("w1 not among %d members", len(ms))
	}
	waitFor(t, 20*time.Second, "cm to see w1 behind r1", func() error { return w1Tags(before.API, before.Tree) })

	// A job runs on w1 across the relay's restart.
	job := startRelayedJob(t, sea, cm, `PondReach == "reverse" && PondRelay == "r1"`, 25)
	job.waitStarted(t)

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
	// Its gossip follows: cm and the restarted relay see it alive at its
	// new gossip address, and it stays there.
	atGossip := func(a *Agent) error {
		for _, m := range a.Sea().Members() {
			if m.Name == "w1" {
				if m.Status != api.StatusAlive || m.GossipAddr() != after.Gossip {
					return fmt.Errorf("%s sees w1 %s at %s, want alive at %s", a.cfg.Name, m.Status, m.GossipAddr(), after.Gossip)
				}
				return nil
			}
		}
		return fmt.Errorf("%s does not know w1", a.cfg.Name)
	}
	waitFor(t, 30*time.Second, "w1 to move its gossip to its new address", func() error {
		if w.Sea().GossipAddr() != after.Gossip {
			return fmt.Errorf("w1 gossips at %s, its relay serves it on %s", w.Sea().GossipAddr(), after.Gossip)
		}
		if err := atGossip(cm); err != nil {
			return err
		}
		return atGossip(relayAgent())
	})
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
	// The job completes where it ran, once; the sea never took w1 for
	// lost while it moved.
	job.waitDone(t)
	waitFor(t, 10*time.Second, "cm to keep seeing w1 at its new gossip address", func() error { return atGossip(cm) })
}

// relayedJob is a job submitted to a central manager's schedd that
// records each of its runs.
type relayedJob struct {
	sc              *wire.Schedd
	cluster         int
	work, runs, log string
}

// startRelayedJob submits to cm's schedd a job that sleeps for sleep
// seconds on a node matching requirements.
func startRelayedJob(t *testing.T, sea *relaySea, cm *Agent, requirements string, sleep int) *relayedJob {
	t.Helper()
	owner := "root"
	if u, err := user.Current(); err == nil {
		owner = u.Username
	}
	j := &relayedJob{sc: wire.NewClient(cm.APIAddr(), sea.mint(auth.Claims{Subject: owner, Scopes: []auth.Scope{auth.Write}})).WithTLS(sea.tls).Schedd()}
	j.work = t.TempDir()
	os.Chmod(j.work, 0o777)
	// The job may run as another account: it records its runs in a file
	// all may write.
	runDir, err := os.MkdirTemp("", "relay-runs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(runDir) })
	os.Chmod(runDir, 0o777)
	j.runs = filepath.Join(runDir, "runs")
	if err := os.WriteFile(j.runs, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(j.runs, 0o666)
	script := filepath.Join(j.work, "job.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho run >> "+j.runs+"\nsleep \"$1\"\necho done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	j.log = filepath.Join(j.work, "job.log")
	ctx := t.Context()
	nc, err := j.sc.NewCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	j.cluster = nc.Cluster
	ad := wire.Ad{"Cmd": strconv.Quote(script), "Arguments": strconv.Quote(strconv.Itoa(sleep)), "Iwd": strconv.Quote(j.work),
		"ShouldTransferFiles": `"YES"`, "WhenToTransferOutput": `"ON_EXIT"`, "UserLog": strconv.Quote(j.log),
		"Out": `"job.out"`, "Err": `"job.err"`, "RequestMemory": "16", "RequestCpus": "1", "RequestDisk": "1024",
		"Requirements": requirements, "JobUniverse": "5"}
	if _, err := j.sc.Submit(ctx, &wire.SubmitRequest{Cluster: nc.Cluster, Jobs: []wire.Ad{ad}}); err != nil {
		t.Fatal(err)
	}
	return j
}

// waitStarted waits for the job's first run.
func (j *relayedJob) waitStarted(t *testing.T) {
	t.Helper()
	waitFor(t, 60*time.Second, "the job to start", func() error {
		if b, _ := os.ReadFile(j.runs); !strings.Contains(string(b), "run") {
			return fmt.Errorf("runs %q", b)
		}
		return nil
	})
}

// waitDone waits for the job to complete and checks that it ran once,
// never disconnected nor requeued.
func (j *relayedJob) waitDone(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	var ad wire.Ad
	waitFor(t, 120*time.Second, "the job to complete", func() error {
		done, err := j.sc.History(ctx, &wire.QueryJobsRequest{Constraint: fmt.Sprintf("ClusterId == %d", j.cluster)})
		if err != nil {
			return err
		}
		if len(done) != 1 {
			q, _ := j.sc.Queue(ctx, &wire.QueryJobsRequest{})
			return fmt.Errorf("history %v, queue %v", done, q)
		}
		ad = done[0].Ad
		return nil
	})
	if ad["JobStatus"] != "4" || ad["NumJobStarts"] != "1" || (ad["NumJobsLost"] != "" && ad["NumJobsLost"] != "0") {
		t.Errorf("the job ended %s after %s starts, lost %s times; want completed after one start", ad["JobStatus"], ad["NumJobStarts"], ad["NumJobsLost"])
	}
	if b, _ := os.ReadFile(j.runs); strings.Count(string(b), "run") != 1 {
		t.Errorf("the job ran %d times, want once: %q", strings.Count(string(b), "run"), b)
	}
	if b, err := os.ReadFile(filepath.Join(j.work, "job.out")); err != nil || string(b) != "done\n" {
		t.Errorf("the job's output %q, %v", b, err)
	}
	f, err := os.Open(j.log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, _ := joblog.ReadAll(f, time.Local)
	for _, ev := range evs {
		switch ev.Type {
		case joblog.JobDisconnected, joblog.JobReconnectFailed, joblog.ShadowException, joblog.Evicted:
			b, _ := os.ReadFile(j.log)
			t.Errorf("the job's log has a %v event:\n%s", ev.Type, b)
			return
		}
	}
}
