package factory_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/ssh/sshtest"
)

// sleeperArg in a glidein's arguments makes this test binary, run as
// `agent`, only sleep: TestAgentKilled counts submissions, not jobs.
const sleeperArg = "-factory-test-sleeper"

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestAgentKilled kills the central manager's agent, a real process that
// runs the pilot factory, with SIGKILL at a random point of its glidein
// submissions, trial after trial, and starts it again on the same data
// directory: each time the factory reads its entry and journal back,
// adopts what the site has and submits only what is missing, so that the
// site ends with exactly the glideins the jobs need (no duplicate), each
// in the journal (no orphan). Six trials, two with -short.
func TestAgentKilled(t *testing.T) {
	t.Parallel()
	srv := sshtest.Start(t, 1)
	site := sshSite(t, srv, 20)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	conf := fastCondor(t, "DAEMON_LIST = MASTER COLLECTOR NEGOTIATOR SCHEDD\nPOND_FACTORY_INTERVAL = 0.25s\n"+
		"POND_FACTORY_SUBMIT_GRACE = 1s\nPOND_FACTORY_JOIN_TIMEOUT = 1h\n")
	apiAddr, gossip := freeAddr(t), freeAddr(t)
	var cur *exec.Cmd
	var out bytes.Buffer
	start := func() {
		cur = exec.Command(exe, "agent", "-name", "cm", "-role", "cm", "-pool", "campus", "-bind", gossip, "-api", apiAddr,
			"-data-dir", data, "-insecure-api", "-gossip-profile", "fast", "-config", conf)
		out.Reset()
		cur.Stdout, cur.Stderr = &out, &out
		if err := cur.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 20*time.Second, "the agent up", func() error {
			_, err := api.NewClient(apiAddr).Health(t.Context())
			return err
		})
	}
	kill := func() {
		cur.Process.Kill()
		cur.Wait()
	}
	t.Cleanup(func() {
		if cur != nil && cur.ProcessState == nil {
			kill()
		}
		if t.Failed() {
			t.Logf("agent's log:\n%s", out.String())
		}
	})
	call := func(method, path, body string) {
		req, _ := http.NewRequest(method, "http://"+apiAddr+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %s", method, path, resp.Status)
		}
	}
	const want = 3
	sshJSON, _ := json.Marshal(sshConfig(srv, 20))
	trials := 6
	if testing.Short() {
		trials = 2
	}
	for trial := range trials {
		start()
		if q, err := wire.NewSchedd(apiAddr, "").Queue(t.Context(), &wire.QueryJobsRequest{}); err != nil || len(q) < want {
			submitJobsAt(t, apiAddr, want)
		}
		name := fmt.Sprintf("k%d", trial)
		prefix := glidein.IDPrefix + "campus-" + name + "-"
		call("PUT", api.PathFactoryEntries+name, fmt.Sprintf(`{"name": %q, "site": {"kind": "ssh", "config": %s},
			"template": {"cpus": 1, "memory_mb": 64, "lifetime": "5m", "agent_args": [%q]},
			"limits": {"max_queued": %d, "max_running": %d, "max_submit_per_cycle": 1}}`, name, sshJSON, sleeperArg, want, want))
		time.Sleep(time.Duration(100+rand.IntN(1500)) * time.Millisecond)
		kill()
		before := len(active(t, site, prefix))
		intents := 0
		journal := filepath.Join(data, "factory", "journal")
		ents, _ := os.ReadDir(journal)
		for _, e := range ents {
			if b, _ := os.ReadFile(filepath.Join(journal, e.Name())); strings.HasPrefix(e.Name(), prefix) &&
				strings.Contains(string(b), `"phase": "intent"`) {
				intents++
			}
		}

		start()
		deadline := time.Now().Add(90 * time.Second)
		stable := time.Time{}
		for {
			n := len(active(t, site, prefix))
			if n > want {
				t.Fatalf("trial %d: %d glideins at the site, want %d: a duplicate", trial, n, want)
			}
			if n == want && stable.IsZero() {
				stable = time.Now()
			}
			if n != want {
				stable = time.Time{}
			}
			if !stable.IsZero() && time.Since(stable) > 2*time.Second {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("trial %d: %d glideins after 90s, want %d steady for 2 s", trial, n, want)
			}
			// Each look lists the site over ssh, as each factory cycle does.
			time.Sleep(250 * time.Millisecond)
		}
		for _, g := range active(t, site, prefix) {
			if _, err := os.Stat(filepath.Join(journal, g.ID+".json")); err != nil {
				t.Fatalf("trial %d: %s runs at the site but is not in the journal: an orphan (%v)", trial, g.ID, err)
			}
		}
		t.Logf("trial %d: killed with %d glideins at the site and %d intents in the journal; restarted with %d",
			trial, before, intents, want)
		call("DELETE", api.PathFactoryEntries+name, "")
		kill()
		for _, g := range active(t, site, prefix) {
			site.Cancel(t.Context(), g.ID)
		}
	}
}

// submitJobsAt queues n idle jobs at the schedd at addr.
func submitJobsAt(t *testing.T, addr string, n int) {
	t.Helper()
	sc := wire.NewSchedd(addr, "")
	nc, err := sc.NewCluster(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var jobs []wire.Ad
	for range n {
		jobs = append(jobs, wire.Ad{"Owner": `"root"`, "Cmd": `"/bin/true"`, "TransferExecutable": "false",
			"Iwd": `"/tmp"`, "Out": `"/dev/null"`, "Err": `"/dev/null"`, "RequestMemory": "16", "RequestCpus": "1",
			"RequestDisk": "1024", "Requirements": "true", "JobUniverse": "5"})
	}
	if _, err := sc.Submit(t.Context(), &wire.SubmitRequest{Cluster: nc.Cluster, Jobs: jobs}); err != nil {
		t.Fatal(err)
	}
}
