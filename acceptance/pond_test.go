package acceptance

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// seaMember is one row of pondctl sea members -json.
type seaMember struct {
	Name   string            `json:"name"`
	Status string            `json:"status"`
	Tags   map[string]string `json:"tags"`
}

func (w *workdir) seaMembers(sea string) []seaMember {
	w.t.Helper()
	r := w.expect(0, "sea", "members", "-json", "-sea", sea, "-status", "alive")
	var ms []seaMember
	if err := json.Unmarshal([]byte(r.stdout), &ms); err != nil {
		w.t.Fatalf("sea members -json: %v\n%s", err, r.stdout)
	}
	return ms
}

// collectorMachines lists the machines whose slots the collector at cm
// holds.
func (w *workdir) collectorMachines(cm string) ([]string, error) {
	r := w.run("condor", "status", "-pool", cm, "-json")
	if r.code != 0 {
		return nil, fmt.Errorf("condor status: %s", r)
	}
	var ads []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &ads); err != nil {
		return nil, fmt.Errorf("condor status -json: %v\n%s", err, r.stdout)
	}
	set := map[string]bool{}
	for _, ad := range ads {
		if m, ok := ad["Machine"].(string); ok {
			set[m] = true
		}
	}
	var out []string
	for m := range set {
		out = append(out, m)
	}
	sort.Strings(out)
	return out, nil
}

// nodeSelf is what a node says of itself.
type nodeSelf struct {
	Name       string `json:"name"`
	API        string `json:"api"`
	Pond       string `json:"pond"`
	CondorHost string `json:"condor_host"`
}

// selfOf asks the agent at api what it says of itself, presenting the
// working directory's token.
func (w *workdir) selfOf(api string) (*nodeSelf, error) {
	var s nodeSelf
	return &s, w.getJSON(api, "/v1/self", &s)
}

func stringsOf(v any) []string {
	var out []string
	if l, ok := v.([]any); ok {
		for _, e := range l {
			out = append(out, fmt.Sprint(e))
		}
	}
	sort.Strings(out)
	return out
}

func TestPond(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "pond")
	w.expect(0, "apply", "-auto-approve", "-target=pool.manager", "-target=pool.sea")
	cm := w.outputs()["central_manager"].(string)

	// Apply returns once the sea is whole: a tree query rooted at the
	// manager, asked at once, covers all eight nodes.
	var ans struct {
		Matches []struct{ Name string }
		Stats   struct{ Members, Covered int }
	}
	r := w.expect(0, "sea", "query", "-sea", cm, "-requirements", "true", "-k", "0", "-json")
	if err := json.Unmarshal([]byte(r.stdout), &ans); err != nil {
		t.Fatalf("sea query -json: %v\n%s", err, r.stdout)
	}
	if len(ans.Matches) != 8 || ans.Stats.Members != 8 || ans.Stats.Covered != 8 {
		t.Fatalf("query at the manager right after apply: %d matches, covered %d of %d members, want 8 of 8:\n%s",
			len(ans.Matches), ans.Stats.Covered, ans.Stats.Members, r.stdout)
	}

	// The plan runs the tree query and shows who would join, with rank.
	r = w.expect(2, "plan", "-detailed-exitcode")
	if !strings.Contains(r.stdout, "pond.burst will be created") || !strings.Contains(r.stdout, `"sea-large-`) || !strings.Contains(r.stdout, "16384") {
		t.Fatalf("plan does not show the pond's candidates:\n%s", r.stdout)
	}
	r = w.expect(0, "apply", "-auto-approve")
	if !strings.Contains(r.stdout, "3 of 3 members joined") {
		t.Fatalf("apply does not say who joined:\n%s", r.stdout)
	}
	members := stringsOf(w.outputs()["members"])
	if len(members) != 3 {
		t.Fatalf("members = %v, want 3", members)
	}
	joinedLine := ""
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.Contains(l, "members joined:") {
			joinedLine = l
		}
	}
	for _, m := range members {
		if !strings.Contains(joinedLine, m) {
			t.Fatalf("apply does not name member %s among those who joined:\n%s", m, r.stdout)
		}
	}
	for _, m := range members {
		if !strings.HasPrefix(m, "sea-large-") {
			t.Fatalf("%s joined but does not satisfy the requirements", m)
		}
	}
	// The pond's collector sees the members' slots, and only theirs.
	eventually(t, 30*time.Second, func() error {
		got, err := w.collectorMachines(cm)
		if err != nil {
			return err
		}
		for _, m := range members {
			if !contains(got, m) {
				return fmt.Errorf("the pond's collector holds %v, not member %s", got, m)
			}
		}
		for _, g := range got {
			if !contains(members, g) {
				return fmt.Errorf("the pond's collector holds %s, which is not a member", g)
			}
		}
		return nil
	})
	w.expect(0, "plan", "-detailed-exitcode")

	// Jobs submitted to the pond's central manager run on its members, and
	// only there.
	ran := runPondJobs(t, w, cm, 12)
	for host := range ran {
		if !contains(members, host) {
			t.Fatalf("a job ran on %s, which is not a member of %v", host, members)
		}
	}

	// A member killed: plan shows the drift, apply replenishes from the sea.
	victim := members[0]
	killNode(t, w, victim)
	r = w.expect(2, "plan", "-detailed-exitcode")
	if !strings.Contains(r.stdout, "pond.burst has changed") {
		t.Fatalf("plan does not show the lost member:\n%s", r.stdout)
	}
	// The killed node's pool is repaired too; the pond gets a new member.
	w.expect(0, "apply", "-auto-approve")
	after := stringsOf(w.outputs()["members"])
	if len(after) != 3 {
		t.Fatalf("members after replenishing = %v, want 3", after)
	}

	// Destroying the pond returns its members to the sea, each its own
	// central manager again.
	apis := map[string]string{}
	for _, m := range w.seaMembers(cm) {
		apis[m.Name] = m.Tags["api"]
	}
	// Destroy drains the members first (drain = "wait"): jobs still
	// running when it starts finish there instead of being evicted.
	w.write("slow.sub", "executable = /bin/sleep\narguments = 4\ntransfer_executable = false\nqueue 3\n")
	w.expect(0, "condor", "submit", "-pool", cm, "slow.sub")
	eventually(t, 30*time.Second, func() error {
		r := w.run("condor", "q", "-pool", cm, "-af", "JobStatus")
		if n := strings.Count(r.stdout, "2\n"); n != 3 {
			return fmt.Errorf("%d of 3 slow jobs running:\n%s", n, r.stdout)
		}
		return nil
	})
	// The members' live machine ads count the cores their jobs hold: each
	// job holds a member's one static slot, which has all its cores.
	eventually(t, 3*time.Second, func() error {
		r := w.run("sea", "query", "-sea", cm, "-requirements", "CpusInUse > 0", "-k", "0", "-attrs", "CpusInUse,Cpus", "-json")
		var busy struct {
			Matches []struct {
				Name  string
				Attrs map[string]float64
			}
		}
		if err := json.Unmarshal([]byte(r.stdout), &busy); err != nil {
			return fmt.Errorf("sea query -json: %v\n%s", err, r)
		}
		if len(busy.Matches) != 3 {
			return fmt.Errorf("%d nodes have cores in use, want the 3 running a job:\n%s", len(busy.Matches), r.stdout)
		}
		for _, m := range busy.Matches {
			if !contains(members, m.Name) {
				return fmt.Errorf("%s has cores in use but is not a member", m.Name)
			}
			if m.Attrs["CpusInUse"] != m.Attrs["Cpus"] {
				return fmt.Errorf("%s has %v of %v cores in use, want all of them:\n%s", m.Name, m.Attrs["CpusInUse"], m.Attrs["Cpus"], r.stdout)
			}
		}
		return nil
	})
	r = w.expect(0, "destroy", "-auto-approve", "-target=pond.burst")
	if !strings.Contains(r.stdout, "letting running jobs finish") || !strings.Contains(r.stdout, "job(s) finished, 0 evicted") {
		t.Fatalf("destroy does not say it drained the members:\n%s", r.stdout)
	}
	if q := w.expect(0, "condor", "q", "-pool", cm, "-af", "ProcId", "JobStatus"); strings.TrimSpace(q.stdout) != "" {
		t.Fatalf("jobs left in the queue after a draining destroy (evicted, not finished):\n%s", q.stdout)
	}
	var hist []map[string]any
	h := w.expect(0, "condor", "history", "-pool", cm, "-json")
	if err := json.Unmarshal([]byte(h.stdout), &hist); err != nil {
		t.Fatal(err)
	}
	slow := 0
	for _, j := range hist {
		if cmd, _ := j["Cmd"].(string); strings.HasSuffix(cmd, "sleep") {
			if st, _ := j["JobStatus"].(float64); st != 4 {
				t.Fatalf("slow job %v ended with JobStatus %v, want 4 (completed)", j["ProcId"], j["JobStatus"])
			}
			slow++
		}
	}
	if slow != 3 {
		t.Fatalf("history holds %d slow jobs, want 3", slow)
	}
	for _, name := range after {
		s, err := w.selfOf(apis[name])
		if err != nil {
			t.Fatal(err)
		}
		if s.Pond != "" || s.CondorHost != s.API {
			t.Fatalf("%s after release: pond=%q condor_host=%q, want itself (%s)", name, s.Pond, s.CondorHost, s.API)
		}
	}
	// Released members withdraw their slots from the pond's collector. The
	// member killed with SIGKILL could not withdraw its old ads: as in
	// HTCondor, the collector keeps them until CLASSAD_LIFETIME.
	eventually(t, 30*time.Second, func() error {
		got, err := w.collectorMachines(cm)
		if err != nil {
			return err
		}
		for _, g := range got {
			if g != victim {
				return fmt.Errorf("the pond's collector still holds %v after release", got)
			}
		}
		return nil
	})

	// A pond whose central manager dies: its members withdraw by themselves.
	w.expect(0, "apply", "-auto-approve")
	members = stringsOf(w.outputs()["members"])
	sea := ""
	for _, m := range w.seaMembers(cm) {
		if m.Name == "sea-small-0" {
			sea = m.Tags["api"]
		}
	}
	if sea == "" {
		t.Fatal("no sea node to watch from")
	}
	killNode(t, w, "manager-0")
	eventually(t, 60*time.Second, func() error {
		for _, name := range members {
			s, err := w.selfOf(apis[name])
			if err != nil {
				return err
			}
			if s.Pond != "" || s.CondorHost != s.API {
				return fmt.Errorf("%s: pond=%q condor_host=%q", name, s.Pond, s.CondorHost)
			}
		}
		return nil
	})
	w.expect(0, "destroy", "-auto-approve")
}

// killNode kills the agent named name with SIGKILL and waits for it to die.
func killNode(t *testing.T, w *workdir, name string) {
	t.Helper()
	for _, pid := range agentPIDs(w.dir) {
		if cmdlineHas(pid, "-name", name) {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			eventually(t, 10*time.Second, func() error {
				if !isZombie(pid) {
					return fmt.Errorf("agent %s (%d) still running", name, pid)
				}
				return nil
			})
			return
		}
	}
	t.Fatalf("no agent named %s", name)
}

// TestConcurrentPondsShareNoNode applies two ponds at once, from two
// working directories, over one sea with fewer matching nodes than they
// ask for together: every node ends up in at most one of them.
func TestConcurrentPondsShareNoNode(t *testing.T) {
	t.Parallel()
	a := newWorkdir(t, "")
	a.write("main.pond.hcl", `
pool "manager" {
  nodes = 1
}
pool "sea" {
  nodes      = 5
  free       = true
  attributes = { SizeClass = "large" }
}
pond "a" {
  central_manager = pool.manager.central_manager
  requirements    = "SizeClass == \"large\""
  size            = 4
  min_size        = 1
  depends_on      = [pool.sea]
}
output "cm" {
  value = pool.manager.central_manager
}
output "members" {
  value = pond.a.members
}
`)
	a.expect(0, "apply", "-auto-approve", "-target=pool.manager", "-target=pool.sea")
	cm := a.outputs()["cm"].(string)

	b := newWorkdir(t, "")
	b.joinSeaOf(a)
	b.write("main.pond.hcl", fmt.Sprintf(`
pond {
  sea { address = %q }
}
pool "other_manager" {
  nodes = 1
}
pond "b" {
  central_manager = pool.other_manager.central_manager
  requirements    = "SizeClass == \"large\""
  size            = 4
  min_size        = 1
}
output "members" {
  value = pond.b.members
}
`, cm))
	b.expect(0, "apply", "-auto-approve", "-target=pool.other_manager")

	results := make(chan result, 2)
	for _, w := range []*workdir{a, b} {
		go func(w *workdir) { results <- w.run("apply", "-auto-approve") }(w)
	}
	for range 2 {
		if r := <-results; r.code != 0 {
			t.Fatalf("concurrent apply failed: %s\nthe sea now: %s", r, a.describeSea(cm))
		}
	}
	ma, mb := stringsOf(a.outputs()["members"]), stringsOf(b.outputs()["members"])
	seen := map[string]string{}
	for _, m := range ma {
		seen[m] = "a"
	}
	for _, m := range mb {
		if seen[m] != "" {
			t.Fatalf("%s is in both ponds: a=%v b=%v", m, ma, mb)
		}
	}
	if len(ma) == 0 || len(mb) == 0 || len(ma)+len(mb) > 5 {
		t.Fatalf("pond a has %v and pond b %v: want both non-empty, 5 nodes at most in all", ma, mb)
	}
	// Each node says so itself.
	for _, m := range a.seaMembers(cm) {
		if !strings.HasPrefix(m.Name, "sea-") {
			continue
		}
		want := ""
		switch {
		case contains(ma, m.Name):
			want = "pond.a"
		case contains(mb, m.Name):
			want = "pond.b"
		}
		self, err := a.selfOf(m.Tags["api"])
		if err != nil {
			t.Fatal(err)
		}
		if self.Pond != want {
			t.Fatalf("%s says it is in pond %q, want %q", m.Name, self.Pond, want)
		}
	}
	b.expect(0, "destroy", "-auto-approve")
	a.expect(0, "destroy", "-auto-approve")
}

// runPondJobs submits n short jobs to the schedd of the central manager
// at cm, waits until all have completed, and returns the machines they
// ran on, with how many jobs each ran.
func runPondJobs(t *testing.T, w *workdir, cm string, n int) map[string]int {
	t.Helper()
	w.write("pond.sub", fmt.Sprintf(`executable = /bin/sh
arguments  = "-c 'echo $(Process)'"
output     = out.$(Process)
queue %d
`, n))
	r := w.expect(0, "condor", "submit", "-pool", cm, "pond.sub")
	if !strings.Contains(r.stdout, fmt.Sprintf("%d job(s) submitted to cluster", n)) {
		t.Fatalf("submit says:\n%s", r.stdout)
	}
	var hist []map[string]any
	eventually(t, 60*time.Second, func() error {
		r := w.run("condor", "history", "-pool", cm, "-json")
		if r.code != 0 {
			return fmt.Errorf("history: %s", r)
		}
		hist = nil
		if err := json.Unmarshal([]byte(r.stdout), &hist); err != nil {
			return fmt.Errorf("history -json: %v", err)
		}
		if len(hist) < n {
			q := w.run("condor", "q", "-pool", cm, "-af", "ProcId", "JobStatus", "HoldReason")
			return fmt.Errorf("%d of %d jobs done; the queue (ProcId, JobStatus, HoldReason):\n%s", len(hist), n, q.stdout)
		}
		return nil
	})
	ran := map[string]int{}
	for _, j := range hist {
		host, _ := j["LastRemoteHost"].(string)
		if _, machine, ok := strings.Cut(host, "@"); ok {
			host = machine
		}
		if st, _ := j["JobStatus"].(float64); st != 4 {
			t.Fatalf("job %v ended with JobStatus %v, want 4 (completed)", j["ProcId"], j["JobStatus"])
		}
		ran[host]++
	}
	for p := range n {
		data, err := os.ReadFile(filepath.Join(w.dir, fmt.Sprintf("out.%d", p)))
		if err != nil || strings.TrimSpace(string(data)) != strconv.Itoa(p) {
			entries, _ := os.ReadDir(w.dir)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Fatalf("out.%d = %q, %v; want %d (the directory holds %v; history: %v)", p, data, err, p, names, hist)
		}
	}
	return ran
}

// describeSea says, for a failure message, what every node of the sea
// says of itself.
func (w *workdir) describeSea(sea string) string {
	var b strings.Builder
	r := w.run("sea", "members", "-json", "-sea", sea)
	var ms []seaMember
	_ = json.Unmarshal([]byte(r.stdout), &ms)
	for _, m := range ms {
		if m.Status != "alive" {
			fmt.Fprintf(&b, "\n  %s: %s", m.Name, m.Status)
			continue
		}
		self, err := w.selfOf(m.Tags["api"])
		if err != nil {
			fmt.Fprintf(&b, "\n  %s: %v", m.Name, err)
			continue
		}
		fmt.Fprintf(&b, "\n  %s: pond=%q condor_host=%s tags=%v", m.Name, self.Pond, self.CondorHost, m.Tags)
	}
	var logs []string
	_ = filepath.WalkDir(filepath.Join(w.dir, ".pond"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "agent.log" {
			logs = append(logs, path)
		}
		return nil
	})
	for _, l := range logs {
		data, _ := os.ReadFile(l)
		if len(data) > 3000 {
			data = data[len(data)-3000:]
		}
		fmt.Fprintf(&b, "\n--- %s\n%s", l, data)
	}
	return b.String()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
