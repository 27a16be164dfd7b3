package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/flock"
)

// startAgentAt starts one agent in this process that joins the sea at
// join (none: a new sea), with its own context: stop ends it (it leaves
// the sea) and waits. dataDir "" is a new one.
func startAgentAt(t *testing.T, cfg *Config, join, dataDir string) (a *Agent, stop func()) {
	t.Helper()
	return startAgentLogged(t, cfg, join, dataDir, nil)
}

// startAgentLogged is startAgentAt with the agent's log to logger (nil:
// none).
func startAgentLogged(t *testing.T, cfg *Config, join, dataDir string, logger *slog.Logger) (a *Agent, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg.Bind, cfg.API, cfg.GossipProfile, cfg.InsecureAPI = "127.0.0.1:0", "127.0.0.1:0", "fast", true
	cfg.DataDir = dataDir
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if join != "" {
		cfg.Join = []string{join}
	}
	a, err := New(ctx, cfg, logger)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	var once bool
	stop = func() {
		if once {
			return
		}
		once = true
		cancel()
		<-done
	}
	t.Cleanup(stop)
	return a, stop
}

// TestFlockThroughFailover runs pool busy (its manager busy-0 and a member
// busy-1, with one replica) and pool spare (its manager spare-0 and a member spare-1, with
// one replica), with a flock from busy to spare. busy-1's schedd gets the
// willing list from busy's manager and its jobs run in spare. Then
// spare-0 stops: spare-1 takes over with spare's flocks (replicated with
// the fail-over state), answers the flock routes, and is the one spare
// announcement in the sea, at its own API address in busy's willing list
// and busy-1's targets; back, spare-0 takes the pool back with the flocks
// set on the replica meanwhile, and spare-1 withdraws its announcement
// and answers 409 again. Last, busy's manager stops: busy-1 takes over
// with busy's flocks and flocks to spare by its own willing list.
func TestFlockThroughFailover(t *testing.T) {
	knobs := func(replicas string) map[string]string {
		return map[string]string{"POND_FLOCK_INTERVAL": "200ms", "POND_FLOCK_TTL": "2s", "POND_CM_REPLICAS": replicas,
			"POND_CM_REPLICATE_INTERVAL": "200ms", "POND_CM_TAKEOVER_STEP": "1s"}
	}
	condor := fastCondor(t, "FLOCK_IDLE_TIME = 1\n")
	// The agents' logs, shown if a job does not complete.
	var logBuf syncBuffer
	logged := func(node string) *slog.Logger {
		return slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelInfo})).With("node", node)
	}
	// Whatever step fails, the agents' lines about it explain why.
	t.Cleanup(func() {
		if t.Failed() {
			explainLog(t, logBuf.String())
		}
	})
	busy0, stopBusy0 := startAgentLogged(t, &Config{Name: "busy-0", Role: "cm", Pool: "busy", Knobs: knobs("1"), ConfigFile: condor}, "", "", logged("busy-0"))
	join := busy0.Sea().GossipAddr()
	busy1, _ := startAgentLogged(t, &Config{Name: "busy-1", Role: "node", Pool: "busy", CondorHost: busy0.APIAddr(), Knobs: knobs("1"), ConfigFile: condor},
		join, "", logged("busy-1"))
	spareDir := t.TempDir()
	spare0Cfg := func() *Config {
		return &Config{Name: "spare-0", Role: "cm", Pool: "spare", Knobs: knobs("1"), ConfigFile: fastCondor(t, "NUM_CPUS = 2\n")}
	}
	spare0, stopSpare0 := startAgentLogged(t, spare0Cfg(), join, spareDir, logged("spare-0"))
	spare1, _ := startAgentLogged(t, &Config{Name: "spare-1", Role: "node", Pool: "spare", CondorHost: spare0.APIAddr(), Knobs: knobs("1"),
		ConfigFile: fastCondor(t, "NUM_CPUS = 2\n")}, join, "", logged("spare-1"))

	put := func(a *Agent, name, body string) {
		t.Helper()
		if code, out := call(t, a, "PUT", api.PathFlocks+name, body); code != http.StatusOK {
			t.Fatalf("PUT %s at %s: %d %s", name, a.cfg.Name, code, out)
		}
	}
	put(busy0, "overflow", `{"name": "overflow", "out": {"to": ["spare"]}}`)
	put(spare0, "overflow", `{"name": "overflow", "in": {"from": ["busy"]}}`)

	status := func(a *Agent) (api.FlockStatus, error) {
		code, body := call(t, a, "GET", api.PathFlock, "")
		var st api.FlockStatus
		if code != http.StatusOK {
			return st, fmt.Errorf("GET %s at %s: %d %s", api.PathFlock, a.cfg.Name, code, body)
		}
		return st, json.Unmarshal([]byte(body), &st)
	}
	// spare, as busy's manager and busy-1's schedd see it: one
	// announcement, at the acting manager's API address.
	spareAt := func(node string, want *Agent) error {
		st, err := status(busy0)
		if err != nil {
			return err
		}
		n := 0
		for _, a := range st.Sea {
			if a.Pool == "spare" {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("%d announcements of spare in %+v", n, st.Sea)
		}
		// Admitted: spare's slots may all run busy's jobs.
		if len(st.Admitted) != 1 || st.Admitted[0].Node != node || st.Admitted[0].API != want.APIAddr() {
			return fmt.Errorf("busy's admitted pools %+v, want spare at %s (%s)", st.Admitted, node, want.APIAddr())
		}
		if ts := busy1.flockTargets(); len(ts) != 1 || ts[0].Node != node || ts[0].Collector != want.APIAddr() {
			return fmt.Errorf("busy-1's schedd's targets %+v, want spare at %s", ts, node)
		}
		return nil
	}
	waitFor(t, 30*time.Second, "busy and busy-1 to see spare at spare-0", func() error { return spareAt("spare-0", spare0) })
	if code, _ := call(t, spare1, "GET", api.PathFlock, ""); code != http.StatusConflict {
		t.Errorf("GET %s at spare-1, a replica that does not act: %d, want 409", api.PathFlock, code)
	}

	// busy-1's jobs flock too: busy's two slots are busy-0's and
	// busy-1's, four jobs of 20 seconds wait for them, long enough for a
	// spare pool whose managers trade places on a starved machine to be
	// flocked to before busy has run them all.
	logs := make([]string, 4)
	for i := range logs {
		logs[i] = submitSleep(t, busy1, 20)
	}
	waitFor(t, 60*time.Second, "a job of busy-1 running in spare", func() error {
		q, err := wire.NewSchedd(busy1.APIAddr(), "").Queue(t.Context(), &wire.QueryJobsRequest{Projection: []string{"RemoteHost", "JobStatus"}})
		if err != nil {
			return err
		}
		for _, j := range q {
			if j.Ad["JobStatus"] == "2" && strings.Contains(j.Ad["RemoteHost"], "@spare-") {
				return nil
			}
		}
		return fmt.Errorf("queue %+v", q)
	})

	// The replica holds spare's flocks.
	waitFor(t, 20*time.Second, "spare-1 to hold spare-0's flocks", func() error {
		st := spare1.FailoverStatus().State
		if st == nil || !strings.Contains(string(st.Flocks), `"overflow"`) {
			return fmt.Errorf("spare-1's state %+v", st)
		}
		return nil
	})

	stopSpare0()
	waitFor(t, 30*time.Second, "spare-1 to act with spare's flocks", func() error {
		if fs := spare1.FailoverStatus(); !fs.Acting {
			return fmt.Errorf("spare-1 does not act: %+v", fs)
		}
		st, err := status(spare1)
		if err != nil {
			return err
		}
		if len(st.Flocks) != 1 || st.Flocks[0].Name != "overflow" || st.Flocks[0].In == nil {
			return fmt.Errorf("spare-1's flocks %+v", st.Flocks)
		}
		return nil
	})
	waitFor(t, 30*time.Second, "busy and busy-1 to see spare at spare-1", func() error { return spareAt("spare-1", spare1) })
	data, err := os.ReadFile(spare1.cfg.DataDir + "/flock/" + flock.StateFile)
	if err != nil || !strings.Contains(string(data), `"overflow"`) {
		t.Errorf("spare-1's %s: %s %v", flock.StateFile, data, err)
	}
	// A flock set on the acting replica is spare's, replicated as the
	// rest.
	put(spare1, "extra", `{"name": "extra", "in": {"from": ["busy"]}}`)

	// Every job of busy-1 completes once. A job that ran on spare-0 (or
	// was starting there) is requeued by busy-1's schedd once its claim
	// lease (ALIVE_INTERVAL 2 s × MAX_CLAIM_ALIVES_MISSED 5, and an
	// interval more) ran out and spare-0's address refuses connections,
	// then runs again in spare, at spare-1, for its 20 s: well within the
	// wait, where the job lease (40 minutes) would not be.
	for _, l := range logs {
		completed := func() error {
			b, _ := os.ReadFile(l)
			if n := len(regexp.MustCompile(`(?m)^005 `).FindAll(b, -1)); n != 1 {
				return fmt.Errorf("%s: %d terminate events", l, n)
			}
			return nil
		}
		deadline := time.Now().Add(90 * time.Second)
		for completed() != nil && time.Now().Before(deadline) {
			time.Sleep(25 * time.Millisecond)
		}
		if err := completed(); err != nil {
			explainJobs(t, busy1, logs)
			t.Fatalf("waiting for busy-1's job to complete: %v", err)
		}
	}

	// spare-0 comes back and takes the pool back with the replica's
	// flocks; spare-1 stops announcing.
	spare0, _ = startAgentLogged(t, spare0Cfg(), join, spareDir, logged("spare-0"))
	waitFor(t, 30*time.Second, "spare-0 to take spare back with the flocks", func() error {
		if fs := spare0.FailoverStatus(); !fs.Acting {
			return fmt.Errorf("spare-0 does not act: %+v", fs)
		}
		if fs := spare1.FailoverStatus(); fs.Acting {
			return fmt.Errorf("spare-1 still acts: %+v", fs)
		}
		st, err := status(spare0)
		if err != nil {
			return err
		}
		if len(st.Flocks) != 2 {
			return fmt.Errorf("spare-0's flocks %+v, want overflow and extra", st.Flocks)
		}
		return nil
	})
	waitFor(t, 30*time.Second, "busy and busy-1 to see spare at spare-0 again", func() error { return spareAt("spare-0", spare0) })
	if code, _ := call(t, spare1, "GET", api.PathFlock, ""); code != http.StatusConflict {
		t.Errorf("GET %s at spare-1 after the hand-back: %d, want 409", api.PathFlock, code)
	}
	if tags := spare1.Sea().LocalMember().Tags; tags[flock.TagSpare] != "" {
		t.Errorf("spare-1 still announces after the hand-back: %v", tags)
	}

	// Out of a pool during its fail-over: busy-0 stops, busy-1 acts with
	// busy's flocks, and its schedd flocks to spare by its own list.
	stopBusy0()
	waitFor(t, 30*time.Second, "busy-1 to act with busy's flocks and flock to spare", func() error {
		if fs := busy1.FailoverStatus(); !fs.Acting {
			return fmt.Errorf("busy-1 does not act: %+v", fs)
		}
		st, err := status(busy1)
		if err != nil {
			return err
		}
		if len(st.Flocks) != 1 || st.Flocks[0].Out == nil || len(st.Admitted) != 1 || st.Admitted[0].Node != "spare-0" {
			return fmt.Errorf("busy-1's flocks %+v, admitted %+v", st.Flocks, st.Admitted)
		}
		if ts := busy1.flockTargets(); len(ts) != 1 || ts[0].Collector != spare0.APIAddr() {
			return fmt.Errorf("busy-1's schedd's targets %+v", ts)
		}
		return nil
	})
}

// explainJobs logs, for a job that did not complete, the queue of a's
// schedd (where and how often each job ran, and why its last match was
// rejected) and the job logs' events.
func explainJobs(t *testing.T, a *Agent, logs []string) {
	t.Helper()
	q, err := wire.NewSchedd(a.APIAddr(), "").Queue(context.Background(), &wire.QueryJobsRequest{Projection: []string{"ClusterId", "ProcId",
		"JobStatus", "RemoteHost", "LastRemoteHost", "NumJobStarts", "NumShadowExceptions", "NumJobsLost", "LastRejMatchReason",
		"PondClaimId", "PondStartd"}})
	if err != nil {
		t.Logf("%s's queue: %v", a.cfg.Name, err)
	}
	for _, j := range q {
		t.Logf("%s's queue: %v", a.cfg.Name, j.Ad)
	}
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		t.Logf("%s:\n%s", l, b)
	}
}

// explainLog logs the agents' lines of their schedds and negotiators, of
// lost nodes, flocking and fail-over.
func explainLog(t *testing.T, agentLog string) {
	t.Helper()
	re := regexp.MustCompile(`daemon=(schedd|negotiator)|lost node|flock|fail-?over|central manager|hand(ing)?[- ]back|take-over`)
	for _, line := range strings.Split(agentLog, "\n") {
		if re.MatchString(line) {
			t.Log(line)
		}
	}
}
