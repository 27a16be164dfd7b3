package acceptance

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// glideinPool is a local pool of one node, its central manager, that
// negotiates every second.
const glideinPool = `
pool "glide" {
  nodes  = 1
  slots  = 1
  config = { NEGOTIATOR_INTERVAL = "1", NEGOTIATOR_MIN_INTERVAL = "0", UPDATE_INTERVAL = "1" }
}

output "cm" {
  value = pool.glide.central_manager
}
`

// glideinJob runs only on a glidein, longer than the glidein lives.
const glideinJob = `executable          = /bin/sleep
arguments           = 600
transfer_executable = false
requirements        = IsGlidein =?= true && GlideinID == "pond-g1"
request_memory      = 16
log                 = job.log
queue
`

// glideinStatus is what the test reads of a glidein's status file.
type glideinStatus struct {
	ID       string `json:"id"`
	Phase    string `json:"phase"`
	Reason   string `json:"reason"`
	Message  string `json:"message"`
	ExitCode *int   `json:"exit_code"`
	Drain    *struct {
		Finished int `json:"finished"`
		Evicted  int `json:"evicted"`
	} `json:"drain"`
}

func readGlideinStatus(t *testing.T, path string) glideinStatus {
	t.Helper()
	var st glideinStatus
	if err := json.Unmarshal([]byte(readFile(t, path)), &st); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return st
}

// TestGlidein starts real `pondctl agent` processes as glideins of a pool
// that pondctl applied, with a node token and a certificate of the working
// directory's authority: one whose validation command fails exits 3 with
// the command's output in its status file, never in the pool; one that
// validates (its central manager reached with its token) joins the pool
// (pondctl sea members shows its glidein tag), runs a job, and when its
// lifetime ends drains, hands the job back to the schedd (evicted,
// requeued), leaves the sea and exits 0 with reason lifetime; and one
// whose central manager is killed leaves after its -cm-timeout.
func TestGlidein(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", glideinPool)
	w.expect(0, "apply", "-auto-approve")
	cm := w.output("cm")
	var cmInfo struct{ Gossip string }
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(w.dir, ".pond", "local", "nodes", "glide-0", "agent.json"))), &cmInfo); err != nil {
		t.Fatal(err)
	}

	var created struct {
		Token  string `json:"token"`
		Issuer string `json:"issuer"`
	}
	r := w.expect(0, "token", "create", "-subject", "node/g1", "-scope", "DAEMON,SEA_READ", "-lifetime", "1h", "-json")
	if err := json.Unmarshal([]byte(r.stdout), &created); err != nil {
		t.Fatal(err)
	}
	// What a site copies into the glidein's directory.
	gdir := filepath.Join(w.dir, "glidein")
	if err := os.Mkdir(gdir, 0o700); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(gdir, "node.token")
	if err := os.WriteFile(tokenFile, []byte(created.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tlsFlags := strings.Fields(w.expect(0, "cert", "create", "-name", "g1", "-host", "127.0.0.1", "-dir", gdir).stdout)
	writeJSON := func(name, text string) string {
		path := filepath.Join(gdir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// The sea gossips encrypted with the working directory's key, which a
	// site hands its glideins with their token.
	seaKey := strings.TrimSpace(readFile(t, filepath.Join(w.dir, ".pond", "auth", "gossip.key")))
	glidein := func(name string, args ...string) *exec.Cmd {
		all := append([]string{"agent", "-name", name, "-bind", "127.0.0.1:0", "-api", "127.0.0.1:0", "-gossip-profile", "fast",
			"-data-dir", filepath.Join(gdir, name), "-pool", "glide", "-condor-host", cm, "-join", cmInfo.Gossip, "-encrypt", seaKey,
			"-trusted-keys", filepath.Join(w.dir, ".pond", "auth", "trusted.pem"), "-token-issuer", created.Issuer,
			"-token-file", tokenFile}, tlsFlags...)
		return execPond(w, append(all, args...)...)
	}

	// A glidein whose site lacks what its jobs need.
	bad := glidein("g1", "-glidein", "pond-g0", "-validate", writeJSON("bad.json",
		`[{"type": "central_manager"}, {"type": "command", "name": "software", "shell": "echo /cvmfs is not mounted; exit 1"}]`))
	out, err := bad.CombinedOutput()
	if code := bad.ProcessState.ExitCode(); code != 3 || !strings.Contains(string(out), "check software: exit status 1: /cvmfs is not mounted") {
		t.Fatalf("the glidein that fails validation: exit %d (%v), want 3:\n%s", code, err, out)
	}
	st := readGlideinStatus(t, filepath.Join(gdir, "g1", "glidein.status"))
	if st.ID != "pond-g0" || st.Phase != "failed" || st.Reason != "validation" || !strings.Contains(st.Message, "/cvmfs is not mounted") ||
		st.ExitCode == nil || *st.ExitCode != 3 {
		t.Fatalf("status %+v", st)
	}
	if r := w.expect(0, "sea", "members", "-sea", cm); strings.Contains(r.stdout, "g1") {
		t.Fatalf("the glidein that failed validation is in the sea:\n%s", r.stdout)
	}

	// A glidein of 45s: it drains from 12s on, and evicts what still runs
	// at 34s.
	g := glidein("g1", "-glidein", "pond-g1", "-lifetime", "45s", "-grace", "33s", "-idle-timeout", "5m", "-cm-timeout", "1m",
		"-validate", writeJSON("good.json", `[{"type": "central_manager"}, {"type": "disk", "min_mb": 10}]`))
	var glog strings.Builder
	g.Stdout, g.Stderr = &glog, &glog
	began := time.Now()
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { g.Wait(); close(exited) }()
	t.Cleanup(func() {
		g.Process.Signal(syscall.SIGKILL)
		<-exited
		if t.Failed() {
			t.Logf("the glidein's log:\n%s", glog.String())
			describeJobs(t, w, cm)
		}
	})
	eventually(t, 15*time.Second, func() error {
		if r := w.run("sea", "members", "-sea", cm); !strings.Contains(r.stdout, "glidein=pond-g1") {
			return fmt.Errorf("sea members:\n%s", r)
		}
		return nil
	})
	w.write("job.sub", glideinJob)
	w.expect(0, "condor", "submit", "-pool", cm, "job.sub")
	eventually(t, 10*time.Second, func() error {
		if data, _ := os.ReadFile(filepath.Join(w.dir, "job.log")); !strings.Contains(string(data), "001 (") {
			return fmt.Errorf("the job has not started:\n%s", data)
		}
		return nil
	})
	select {
	case <-exited:
	case <-time.After(90 * time.Second):
		t.Fatal("the glidein did not exit after its lifetime")
	}
	lived := time.Since(began)
	t.Logf("the glidein lived %s", lived.Round(time.Millisecond))
	if code := g.ProcessState.ExitCode(); code != 0 || lived < 34*time.Second || lived > 45*time.Second {
		t.Fatalf("the glidein exited %d after %s, want 0 after 34s to 45s", code, lived)
	}
	st = readGlideinStatus(t, filepath.Join(gdir, "g1", "glidein.status"))
	if st.ID != "pond-g1" || st.Phase != "ended" || st.Reason != "lifetime" || st.ExitCode == nil || *st.ExitCode != 0 ||
		st.Drain == nil || st.Drain.Evicted != 1 {
		t.Fatalf("status %+v", st)
	}
	if data := readFile(t, filepath.Join(w.dir, "job.log")); !strings.Contains(data, "004 (") {
		t.Fatalf("the job's log has no eviction:\n%s", data)
	}
	eventually(t, 20*time.Second, func() error {
		if r := w.run("condor", "q", "-pool", cm, "-af", "JobStatus"); strings.TrimSpace(r.stdout) != "1" {
			return fmt.Errorf("the job is not idle again: %s", r)
		}
		return nil
	})
	eventually(t, 15*time.Second, func() error {
		if r := w.run("sea", "members", "-sea", cm, "-status", "left"); !strings.Contains(r.stdout, "g1") {
			return fmt.Errorf("the glidein has not left:\n%s", r)
		}
		return nil
	})

	// The dead-man switch: its central manager killed, with no pondctl
	// running, a glidein leaves by itself after its -cm-timeout.
	g2 := glidein("g1", "-glidein", "pond-g2", "-cm-timeout", "5s")
	if err := g2.Start(); err != nil {
		t.Fatal(err)
	}
	exited2 := make(chan struct{})
	go func() { g2.Wait(); close(exited2) }()
	t.Cleanup(func() { g2.Process.Signal(syscall.SIGKILL); <-exited2 })
	eventually(t, 15*time.Second, func() error {
		if r := w.run("sea", "members", "-sea", cm, "-status", "alive"); !strings.Contains(r.stdout, "glidein=pond-g2") {
			return fmt.Errorf("sea members:\n%s", r)
		}
		return nil
	})
	killNode(t, w, "glide-0")
	killed := time.Now()
	select {
	case <-exited2:
	case <-time.After(60 * time.Second):
		t.Fatal("the glidein did not exit after its central manager was killed")
	}
	took := time.Since(killed)
	t.Logf("the glidein exited %s after its central manager was killed", took.Round(time.Millisecond))
	if code := g2.ProcessState.ExitCode(); code != 0 || took < 3*time.Second {
		t.Fatalf("the glidein exited %d after %s, want 0 after its -cm-timeout of 5s", code, took)
	}
	st = readGlideinStatus(t, filepath.Join(gdir, "g1", "glidein.status"))
	if st.ID != "pond-g2" || st.Phase != "ended" || st.Reason != "central-manager-gone" || st.ExitCode == nil || *st.ExitCode != 0 {
		t.Fatalf("status %+v", st)
	}
}
