package acceptance

import (
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/api"
)

// relayPoolConfig is the configuration of the pools of the relay tests:
// quick negotiation and updates.
const relayPoolConfig = `config = { NEGOTIATOR_INTERVAL = "1", NEGOTIATOR_MIN_INTERVAL = "0", UPDATE_INTERVAL = "2" }`

// relayPool is a local pool whose workers are reached only through the
// central manager: reach = "reverse", the synonym of "relay".
const relayPool = `
pool "hub" {
  nodes  = 2
  reach  = "reverse"
  ` + relayPoolConfig + `
}

output "cm" {
  value = pool.hub.central_manager
}
`

// memberReach is how pondctl sea members -json says a member is reached.
type memberReach struct {
	Reach string `json:"reach"`
	Relay string `json:"relay"`
}

// seaMembersReach returns how pondctl sea members -json says each member
// is reached, and the table.
func seaMembersReach(t *testing.T, w *workdir, sea string) (map[string]memberReach, string) {
	t.Helper()
	r := w.expect(0, "sea", "members", "-json", "-sea", sea, "-status", "alive")
	var ms []struct {
		Name string `json:"name"`
		memberReach
	}
	if err := json.Unmarshal([]byte(r.stdout), &ms); err != nil {
		t.Fatalf("sea members -json: %v\n%s", err, r.stdout)
	}
	out := map[string]memberReach{}
	for _, m := range ms {
		out[m.Name] = m.memberReach
	}
	return out, w.expect(0, "sea", "members", "-sea", sea).stdout
}

// tableReach is the Reach and Relay columns of the row of member name in
// the table of pondctl sea members.
func tableReach(table, name string) memberReach {
	lines := strings.Split(table, "\n")
	if len(lines) == 0 {
		return memberReach{}
	}
	head := strings.Fields(lines[0])
	ri, li := slices.Index(head, "Reach"), slices.Index(head, "Relay")
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) > max(ri, li) && ri >= 0 && li >= 0 && f[0] == name {
			return memberReach{Reach: f[ri], Relay: f[li]}
		}
	}
	return memberReach{}
}

// expectRelayed waits until pondctl sea members says that each of workers
// is reached in reverse through relay, itself reached directly, in -json
// and in the table, and checks that a tree query for PondReach and
// PondRelay finds them, and not the relay.
func expectRelayed(t *testing.T, w *workdir, cm, relay string, workers ...string) {
	t.Helper()
	via := memberReach{Reach: "reverse", Relay: relay}
	eventually(t, 60*time.Second, func() error {
		reach, table := seaMembersReach(t, w, cm)
		if reach[relay] != (memberReach{Reach: "direct"}) {
			return fmt.Errorf("reach %v", reach)
		}
		if got := tableReach(table, relay); got != (memberReach{Reach: "direct", Relay: "-"}) {
			return fmt.Errorf("%s's row says %+v:\n%s", relay, got, table)
		}
		for _, name := range workers {
			if reach[name] != via {
				return fmt.Errorf("reach %v", reach)
			}
			if got := tableReach(table, name); got != via {
				return fmt.Errorf("%s's row says %+v:\n%s", name, got, table)
			}
		}
		return nil
	})
	r := w.expect(0, "sea", "query", "-sea", cm, "-requirements", fmt.Sprintf("PondReach =?= \"reverse\" && PondRelay =?= %q", relay), "-json")
	if strings.Contains(r.stdout, fmt.Sprintf("%q", relay)) {
		t.Errorf("tree query for the workers relayed by %s finds it:\n%s", relay, r.stdout)
	}
	for _, name := range workers {
		if !strings.Contains(r.stdout, name) {
			t.Errorf("tree query for the workers relayed by %s misses %s:\n%s", relay, name, r.stdout)
		}
	}
}

// runRelayedJobs submits n jobs, named name, that each write their input
// file and their number, on the machines that match requirements, waits
// until the queue of the pool at cm is empty, and checks that each job ran
// once and wrote what it should.
func runRelayedJobs(t *testing.T, w *workdir, cm, name, requirements string, n int) {
	t.Helper()
	input := "input of " + name + " "
	w.write(name+".in", input)
	w.write(name+".sub", fmt.Sprintf(`
executable           = /bin/sh
arguments            = "-c 'cat %[1]s.in; echo $(Process)'"
transfer_input_files = %[1]s.in
output               = %[1]s.out.$(Process)
log                  = %[1]s.log
requirements         = %[2]s
queue %[3]d
`, name, requirements, n))
	t0 := time.Now()
	w.expect(0, "condor", "submit", "-pool", cm, name+".sub")
	eventually(t, 120*time.Second, func() error {
		r := w.run("condor", "q", "-pool", cm, "-af", "ProcId", "JobStatus")
		if r.code != 0 {
			return fmt.Errorf("condor q: %s", r)
		}
		if left := strings.Count(r.stdout, "\n"); left > 0 {
			return fmt.Errorf("%d jobs still queued: %s", left, r.stdout)
		}
		return nil
	})
	t.Logf("%d jobs with an input file (%s): %s", n, name, time.Since(t0).Round(time.Millisecond))
	counts := logEvents(t, filepath.Join(w.dir, name+".log"))
	for p := range n {
		if got := readFile(t, filepath.Join(w.dir, fmt.Sprintf("%s.out.%d", name, p))); got != fmt.Sprintf("%s%d\n", input, p) {
			t.Errorf("%s.out.%d = %q", name, p, got)
		}
		if counts["005"][p] != 1 || counts["001"][p] != 1 {
			t.Errorf("job %s %d: %d execute and %d terminate events, want one of each", name, p, counts["001"][p], counts["005"][p])
		}
	}
}

// TestRelayPool applies a pool whose worker is reached through its central
// manager (reach = "reverse"): pondctl sea members says so, a tree query
// finds the worker by its PondReach and PondRelay, and jobs with an input file run on it.
func TestRelayPool(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", relayPool)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	t.Cleanup(func() { w.run("destroy", "-auto-approve") })

	expectRelayed(t, w, cm, "hub-0", "hub-1")
	runRelayedJobs(t, w, cm, "relay", `PondReach =?= "reverse" && PondRelay =?= "hub-0"`, 3)

	// The operator sees the central manager's tunnels and may drop one.
	if r := w.expect(0, "sea", "relays", "-sea", cm); !strings.Contains(r.stdout, "hub-1") || !strings.Contains(r.stdout, "attached") {
		t.Errorf("sea relays:\n%s", r)
	}
	if r := w.expect(0, "sea", "relays", "-sea", cm, "-drop", "hub-1"); !strings.Contains(r.stdout, "Dropped the tunnel of hub-1") {
		t.Errorf("sea relays -drop:\n%s", r)
	}
	if r := w.expect(1, "sea", "relays", "-sea", cm, "-drop", "nobody"); !strings.Contains(r.stderr, "holds no tunnel of nobody") {
		t.Errorf("sea relays -drop nobody:\n%s", r)
	}
	eventually(t, 15*time.Second, func() error {
		r := w.run("sea", "relays", "-json", "-sea", cm)
		var ws []api.RelayWorker
		if err := json.Unmarshal([]byte(r.stdout), &ws); err != nil || len(ws) != 1 || !ws[0].Connected {
			return fmt.Errorf("sea relays -json: %v\n%s", err, r)
		}
		return nil
	})
}

// TestOutboundWorkers runs worker agents in sites that accept no inbound
// connection, behind a firewall and behind NAT (one lab, one pool in its
// hub), two in each, left to decide how they are reached (-reach auto):
// the central manager cannot connect back to them, so they go through it
// as their relay; the sea sees them so, a tree query reaches them, and
// jobs with input files run on them, each once (a hundred behind NAT); a
// tunnel dropped in the middle of a job costs the job nothing (no 022 or
// 024 event).
func TestOutboundWorkers(t *testing.T) {
	t.Parallel()
	lab := newNetLab(t, siteFirewall, siteNAT)
	w, cm, opts := labPool(t, lab, "hub", relayPoolConfig)
	opts.Knobs = map[string]string{"NUM_CPUS": "2", "UPDATE_INTERVAL": "2", "STARTER_POLL_INTERVAL": "0.2s"}
	for i, site := range lab.Sites {
		jobs := 12
		if site.Variant == siteNAT {
			jobs = 100 // as the target has it
		}
		t.Run(site.Variant.String(), func(t *testing.T) {
			outboundWorkers(t, w, cm, site, opts, fmt.Sprintf("s%d-", i+1), jobs)
		})
	}
}

// outboundWorkers starts two workers named PREFIX1 and PREFIX2 in site,
// runs jobs jobs on them, then drops one's tunnel in the middle of a job.
func outboundWorkers(t *testing.T, w *workdir, cm string, site *netSite, opts labAgentOptions, prefix string, jobs int) {
	kind := site.Variant.String()
	workers := []*labAgent{site.startAgent(t, w, prefix+"1", opts), site.startAgent(t, w, prefix+"2", opts)}
	logOnFailure(t, w, cm, func() []*labAgent { return workers })
	expectRelayed(t, w, cm, "hub-0", workers[0].Name, workers[1].Name)
	for _, a := range workers {
		relayCheckAddr(t, a) // it says why it chose the relay
	}
	// The jobs match only this site's workers.
	mine := fmt.Sprintf(`PondReach =?= "reverse" && PondRelay =?= "hub-0" && regexp("^%s", Machine)`, prefix)
	runRelayedJobs(t, w, cm, kind, mine, jobs)

	// The relay closes a worker's tunnel in the middle of a job: the worker
	// attaches again, and the job completes, once, without a disconnection.
	w.write(kind+"-drop.sub", fmt.Sprintf(`
executable   = /bin/sh
arguments    = "-c 'sleep 8; echo survived'"
output       = %[1]s-drop.out
log          = %[1]s-drop.log
requirements = %[2]s
queue
`, kind, mine))
	w.expect(0, "condor", "submit", "-pool", cm, kind+"-drop.sub")
	var victim string
	eventually(t, 60*time.Second, func() error {
		r := w.run("condor", "q", "-pool", cm, "-constraint", "JobStatus == 2", "-af", "RemoteHost")
		_, node, ok := strings.Cut(strings.Trim(strings.TrimSpace(r.stdout), `"`), "@")
		if !ok || node == "" {
			return fmt.Errorf("not running: %s", r)
		}
		victim = node
		return nil
	})
	time.Sleep(2 * time.Second)
	if r := w.expect(0, "sea", "relays", "-sea", cm, "-drop", victim); !strings.Contains(r.stdout, "Dropped the tunnel of "+victim) {
		t.Errorf("sea relays -drop %s:\n%s", victim, r)
	}
	t.Logf("dropped the tunnel of %s in the middle of its job", victim)
	eventually(t, 60*time.Second, func() error {
		r := w.run("condor", "q", "-pool", cm, "-af", "ProcId")
		if strings.TrimSpace(r.stdout) != "" || r.code != 0 {
			return fmt.Errorf("still queued: %s", r)
		}
		return nil
	})
	if got := readFile(t, filepath.Join(w.dir, kind+"-drop.out")); got != "survived\n" {
		t.Errorf("%s-drop.out = %q", kind, got)
	}
	counts := logEvents(t, filepath.Join(w.dir, kind+"-drop.log"))
	if counts["001"][0] != 1 || counts["005"][0] != 1 || total(counts["022"]) != 0 || total(counts["024"]) != 0 {
		t.Errorf("the job's events %v: want one execute, one terminate, no disconnection", counts)
	}
	eventually(t, 30*time.Second, func() error {
		var ws []api.RelayWorker
		r := w.run("sea", "relays", "-json", "-sea", cm)
		if err := json.Unmarshal([]byte(r.stdout), &ws); err != nil {
			return fmt.Errorf("sea relays -json: %v\n%s", err, r)
		}
		attached := 0
		for _, rw := range ws {
			if strings.HasPrefix(rw.Name, prefix) && rw.Connected {
				attached++
			}
		}
		if attached != len(workers) {
			return fmt.Errorf("%d of %s's workers attached: %+v", attached, kind, ws)
		}
		return nil
	})
}

// TestNATFreeNodeJoinsPond starts a free node by hand in a NAT site,
// reached in reverse through the hub pool's central manager as its relay
// (-relay): a pond declared in HCL finds it by a tree query, invites it
// through its tunnel, runs the pond's jobs on it, and on destroy releases
// it back to the sea, free again, all with no connection into the site.
func TestNATFreeNodeJoinsPond(t *testing.T) {
	t.Parallel()
	lab := newNetLab(t, siteNAT)
	site := lab.Sites[0]
	w, cm, opts := labPool(t, lab, "hub", relayPoolConfig)
	opts.Pool, opts.CM = "", ""
	opts.Knobs = map[string]string{"NUM_SLOTS": "1", "UPDATE_INTERVAL": "2"}
	opts.Args = []string{"-relay", cm, "-attr", `Site="nat"`}
	a := site.startAgent(t, w, "natfree", opts)
	logOnFailure(t, w, cm, func() []*labAgent { return []*labAgent{a} })
	if host, _, _ := net.SplitHostPort(a.Info.API); host != labHubAddr {
		t.Fatalf("the free node in the NAT site advertises %s, want its relay's address in the hub (%s)", a.Info.API, labHubAddr)
	}

	w.write("pond.pond.hcl", `
pond "burst" {
  central_manager = pool.hub.central_manager
  requirements    = "Site =?= \"nat\""
  size            = 1
  drain           = "evict"
}

output "members" {
  value = pond.burst.members
}
`)
	w.expect(0, "apply", "-auto-approve")
	if got := fmt.Sprint(w.outputs()["members"]); got != "[natfree]" {
		t.Fatalf("pond members = %s, want the NAT site's free node", got)
	}
	eventually(t, 30*time.Second, func() error {
		r := w.run("condor", "status", "-pool", cm, "-af", "Machine")
		if !strings.Contains(r.stdout, "natfree") {
			return fmt.Errorf("the pond's collector does not list natfree yet: %s", r)
		}
		return nil
	})
	runRelayedJobs(t, w, cm, "natpond", `Machine == "natfree"`, 2)

	w.expect(0, "destroy", "-auto-approve", "-target", "pond.burst")
	eventually(t, 30*time.Second, func() error {
		r := w.run("condor", "status", "-pool", cm, "-af", "Machine")
		if strings.Contains(r.stdout, "natfree") {
			return fmt.Errorf("the pond's collector still lists natfree after destroy: %s", r)
		}
		reach, _ := seaMembersReach(t, w, cm)
		if m, ok := reach["natfree"]; !ok || m.Reach != "reverse" {
			return fmt.Errorf("after the release natfree is %+v in the sea, want alive and reached in reverse", m)
		}
		return nil
	})
}

// TestRelayPoolManagerRestarted stops the central manager of a pool whose
// worker it relays for, while the worker runs one of its jobs, with
// SIGTERM (it leaves the sea) or SIGKILL, and starts it again with
// `pondctl apply` (a new process on the same data directory and
// addresses; its schedd recovers its queue), well within the claim's
// lease (ALIVE_INTERVAL x MAX_CLAIM_ALIVES_MISSED, 10 s by default; past
// it the worker kills the job by design): the worker is alive in the sea
// again within seconds, reached through the manager, and the job
// completes exactly once (one execute and one terminate event, no failed
// reconnection, eviction or shadow exception).
func TestRelayPoolManagerRestarted(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) { relayPoolManagerRestarted(t, sig) })
	}
}

func relayPoolManagerRestarted(t *testing.T, sig syscall.Signal) {
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", relayPool)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	t.Cleanup(func() { w.run("destroy", "-auto-approve") })
	expectRelayed(t, w, cm, "hub-0", "hub-1")

	w.write("long.sub", `
executable   = /bin/sh
arguments    = "-c 'sleep 30; echo done'"
output       = long.out
log          = long.log
requirements = PondReach =?= "reverse"
queue
`)
	w.expect(0, "condor", "submit", "-pool", cm, "long.sub")
	// Running in the queue is not yet running on the worker (its input
	// files are on their way, its claim is being activated): a manager
	// stopped then finds no job to reconnect to, as HTCondor's would. The
	// worker's slot Busy says the job runs there.
	eventually(t, 60*time.Second, func() error {
		r := w.run("condor", "q", "-pool", cm, "-af", "JobStatus")
		if strings.TrimSpace(r.stdout) != "2" {
			return fmt.Errorf("job status %q: %s", strings.TrimSpace(r.stdout), r)
		}
		r = w.run("condor", "status", "-pool", cm, "-constraint", `Machine == "hub-1"`, "-af", "Activity")
		if !strings.Contains(r.stdout, "Busy") {
			return fmt.Errorf("hub-1's slots: %q: %s", r.stdout, r)
		}
		return nil
	})

	stopped := time.Now()
	signalNode(t, w, "hub-0", sig)
	// The schedd renews the claim until the agent stops its services, the
	// last thing it does after leaving the sea (a second or two after a
	// SIGTERM, longer under load): the lease runs from the agent's end.
	gone := time.Now()
	r := w.expect(0, "apply", "-auto-approve")
	back := time.Since(gone)
	if !strings.Contains(r.stdout, "1 changed") {
		t.Fatalf("apply after the stop did not start the central manager again:\n%s", r.stdout)
	}
	t.Logf("central manager ended %s after its %s, back %s later", gone.Sub(stopped).Round(time.Millisecond), sig, back.Round(time.Millisecond))
	if back > 5*time.Second {
		t.Fatalf("the central manager took %s to come back: too close to the claim's 10 s lease", back)
	}
	// The worker is alive in the sea again, as the restarted manager sees
	// it, well before its job ends.
	eventually(t, 15*time.Second, func() error {
		reach, _ := seaMembersReach(t, w, cm)
		if reach["hub-1"] != (memberReach{Reach: "reverse", Relay: "hub-0"}) {
			return fmt.Errorf("reach %v", reach)
		}
		return nil
	})
	t.Logf("worker alive in the sea again %s after the %s", time.Since(stopped).Round(time.Millisecond), sig)

	eventually(t, 120*time.Second, func() error {
		r := w.run("condor", "q", "-pool", cm, "-af", "ProcId", "JobStatus")
		if r.code != 0 || strings.TrimSpace(r.stdout) != "" {
			return fmt.Errorf("queue %q: %s", r.stdout, r)
		}
		return nil
	})
	log := filepath.Join(w.dir, "long.log")
	counts := logEvents(t, log)
	if counts["001"][0] != 1 || counts["005"][0] != 1 {
		t.Errorf("%d execute and %d terminate events, want one of each:\n%s", counts["001"][0], counts["005"][0], readFile(t, log))
	}
	for _, ev := range []string{"024", "004", "007"} {
		if counts[ev][0] != 0 {
			t.Errorf("the job's log has a %s event:\n%s", ev, readFile(t, log))
		}
	}
	if got := readFile(t, filepath.Join(w.dir, "long.out")); got != "done\n" {
		t.Errorf("long.out = %q", got)
	}
	expectRelayed(t, w, cm, "hub-0", "hub-1")
}

// signalNode sends sig to the agent named name and waits for it to end.
func signalNode(t *testing.T, w *workdir, name string, sig syscall.Signal) {
	t.Helper()
	for _, pid := range agentPIDs(w.dir) {
		if cmdlineHas(pid, "-name", name) {
			if err := syscall.Kill(pid, sig); err != nil {
				t.Fatal(err)
			}
			eventually(t, 20*time.Second, func() error {
				if !isZombie(pid) {
					return fmt.Errorf("agent %s (%d) still running after %s", name, pid, sig)
				}
				return nil
			})
			return
		}
	}
	t.Fatalf("no agent named %s", name)
}
