package acceptance

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"
)

// policyStatus is what a node's GET /v1/policy answers.
type policyStatus struct {
	Ponds []struct {
		Name    string `json:"name"`
		Members []struct {
			Name string `json:"name"`
			API  string `json:"api"`
		} `json:"members"`
	} `json:"ponds"`
	Stats struct {
		Queries  int `json:"queries"`
		Joined   int `json:"joined"`
		Released int `json:"released"`
	} `json:"stats"`
}

func (w *workdir) policyOf(api string) (*policyStatus, error) {
	var s policyStatus
	return &s, w.getJSON(api, "/v1/policy", &s)
}

// TestPondPolicy submits 100 short jobs to a node with a pond policy and
// no slot of its own: the node grows a pond of matching sea nodes by
// itself, the jobs run there and only there, and once the queue has
// drained the members go back to the sea.
func TestPondPolicy(t *testing.T) {
	t.Parallel()
	w := newWorkdir(t, "pond-policy")
	w.expect(0, "apply", "-auto-approve")
	submit := w.outputs()["submit"].(string)
	apis := map[string]string{}
	eventually(t, 20*time.Second, func() error {
		for _, m := range w.seaMembers(submit) {
			apis[m.Name] = m.Tags["api"]
		}
		if len(apis) < 7 {
			return fmt.Errorf("the sea has %d of 7 nodes", len(apis))
		}
		return nil
	})

	start := time.Now()
	r := w.expect(0, "condor", "submit", "-pool", submit, "jobs.sub")
	if !strings.Contains(r.stdout, "100 job(s) submitted to cluster") {
		t.Fatalf("submit says:\n%s", r.stdout)
	}

	// The pond grows by itself; its members' slots carry its name.
	var pondName string
	members := map[string]bool{}
	eventually(t, 20*time.Second, func() error {
		st, err := w.policyOf(submit)
		if err != nil {
			return err
		}
		for _, p := range st.Ponds {
			pondName = p.Name
			for _, m := range p.Members {
				members[m.Name] = true
			}
		}
		if len(members) == 0 {
			return fmt.Errorf("no pond yet: %+v", st)
		}
		return nil
	})
	formed := time.Since(start)
	if len(members) > 3 {
		t.Fatalf("the pond has %d members; max_members is 3", len(members))
	}
	for m := range members {
		if !strings.HasPrefix(m, "sea-large-") {
			t.Fatalf("%s joined but does not satisfy the jobs' Requirements", m)
		}
	}
	eventually(t, 20*time.Second, func() error {
		r := w.run("condor", "status", "-pool", submit, "-af", "Machine", "PondName")
		if r.code != 0 {
			return fmt.Errorf("condor status: %s", r)
		}
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			f := strings.Fields(line)
			if len(f) == 2 && members[f[0]] && f[1] == pondName {
				return nil
			}
		}
		return fmt.Errorf("no member slot says PondName = %q:\n%s", pondName, r.stdout)
	})

	// Every job completes, on members only.
	var hist []map[string]any
	eventually(t, 60*time.Second, func() error {
		r := w.run("condor", "history", "-pool", submit, "-json")
		if r.code != 0 {
			return fmt.Errorf("history: %s", r)
		}
		hist = nil
		if err := json.Unmarshal([]byte(r.stdout), &hist); err != nil {
			return fmt.Errorf("history -json: %v", err)
		}
		if len(hist) < 100 {
			return fmt.Errorf("%d of 100 jobs done", len(hist))
		}
		return nil
	})
	done := time.Since(start)
	ran := map[string]int{}
	for _, j := range hist {
		if st, _ := j["JobStatus"].(float64); st != 4 {
			t.Fatalf("job %v ended with JobStatus %v, want 4 (completed)", j["ProcId"], j["JobStatus"])
		}
		host, _ := j["LastRemoteHost"].(string)
		_, machine, _ := strings.Cut(host, "@")
		if !members[machine] {
			t.Fatalf("job %v ran on %q, which is not a member of the pond (%v)", j["ProcId"], host, members)
		}
		ran[machine]++
	}

	// After the grace period the members are back in the sea, each its
	// own central manager.
	eventually(t, 30*time.Second, func() error {
		st, err := w.policyOf(submit)
		if err != nil {
			return err
		}
		if len(st.Ponds) != 0 {
			return fmt.Errorf("the policy still holds %d pond(s)", len(st.Ponds))
		}
		for m := range members {
			s, err := w.selfOf(apis[m])
			if err != nil {
				return err
			}
			if s.Pond != "" || s.CondorHost != s.API {
				return fmt.Errorf("%s: pond=%q condor_host=%q, want none and itself (%s)", m, s.Pond, s.CondorHost, s.API)
			}
		}
		return nil
	})
	released := time.Since(start)
	// The sea learns it by gossip: no node carries a pond tag.
	eventually(t, 30*time.Second, func() error {
		for _, sm := range w.seaMembers(submit) {
			if sm.Tags["pond"] != "" {
				return fmt.Errorf("%s still carries the pond tag %q", sm.Name, sm.Tags["pond"])
			}
		}
		return nil
	})
	hosts := make([]string, 0, len(ran))
	for h, n := range ran {
		hosts = append(hosts, fmt.Sprintf("%s:%d", h, n))
	}
	sort.Strings(hosts)
	t.Logf("100 jobs: pond formed %.1fs, all done %.1fs, members released %.1fs after submit (grace 3s); jobs per member %v",
		formed.Seconds(), done.Seconds(), released.Seconds(), hosts)
	w.expect(0, "destroy", "-auto-approve")
}
