package schedd

import (
	"context"
	"errors"
	"fmt"
	"github.com/google/go-cmp/cmp"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/submit"
	"github.com/pond-htc/pond/condor/wire"
)

// submitCluster queues a cluster of n idle jobs of alice (that match
// nothing) on s and returns its number.
func submitCluster(t testing.TB, s *Schedd, n int) int {
	return submitClusterOf(t, s, "alice", n)
}

// submitClusterOf queues a cluster of n idle jobs of owner.
func submitClusterOf(t testing.TB, s *Schedd, owner string, n int) int {
	t.Helper()
	return submitText(t, s, owner, t.TempDir(), fmt.Sprintf("executable = /bin/true\narguments = $(Process)\nrequirements = false\nqueue %d\n", n))
}

// TestActPermissions acts on more jobs than a batch holds as a user and
// as an administrator: a user's action by constraint, owner or -all
// touches only their own jobs, one naming another's cluster is refused
// and changes nothing, an administrator's touches everyone's; the idle
// index and the counts follow each action.
func TestActPermissions(t *testing.T) {
	ctx := context.Background()
	s := scheddAt(t, t.TempDir(), "")
	t.Cleanup(func() { s.Close() })
	na := jobqueue.ActBatch + 1
	submitClusterOf(t, s, "alice", na)
	bob := submitClusterOf(t, s, "bob", 3)
	asAlice := asUser("alice", auth.Read, auth.Write)
	asAdmin := asUser("root", auth.Read, auth.Write, auth.Administrator)
	steps := []struct {
		name      string
		ctx       context.Context
		req       wire.ActRequest
		forbidden bool
		count     int
		counts    map[string]map[jobqueue.Status]int // owner -> status -> n
	}{
		{"alice holds all", asAlice, wire.ActRequest{Action: wire.ActHold, All: true}, false, na,
			map[string]map[jobqueue.Status]int{"alice": {jobqueue.Held: na}, "bob": {jobqueue.Idle: 3}}},
		{"alice releases by constraint", asAlice, wire.ActRequest{Action: wire.ActRelease, Constraint: "true"}, false, na,
			map[string]map[jobqueue.Status]int{"alice": {jobqueue.Idle: na}, "bob": {jobqueue.Idle: 3}}},
		{"alice holds bob's cluster", asAlice, wire.ActRequest{Action: wire.ActHold, Args: []string{fmt.Sprint(bob)}}, true, 0,
			map[string]map[jobqueue.Status]int{"alice": {jobqueue.Idle: na}, "bob": {jobqueue.Idle: 3}}},
		{"alice removes bob's jobs by owner", asAlice, wire.ActRequest{Action: wire.ActRemove, Args: []string{"bob"}}, false, 0,
			map[string]map[jobqueue.Status]int{"alice": {jobqueue.Idle: na}, "bob": {jobqueue.Idle: 3}}},
		{"alice removes all", asAlice, wire.ActRequest{Action: wire.ActRemove, All: true}, false, na,
			map[string]map[jobqueue.Status]int{"bob": {jobqueue.Idle: 3}}},
		{"the administrator holds all", asAdmin, wire.ActRequest{Action: wire.ActHold, All: true}, false, 3,
			map[string]map[jobqueue.Status]int{"bob": {jobqueue.Held: 3}}},
	}
	for _, st := range steps {
		resp, err := s.Act(st.ctx, &st.req)
		switch {
		case st.forbidden:
			if !errors.Is(err, wire.ErrForbidden) {
				t.Errorf("%s: %v, want forbidden", st.name, err)
			}
		case err != nil:
			t.Fatalf("%s: %v", st.name, err)
		case resp.Count != st.count:
			t.Errorf("%s: %d jobs changed, want %d", st.name, resp.Count, st.count)
		}
		counts, err := s.q.CountsByOwner(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, owner := range []string{"alice", "bob"} {
			for _, status := range []jobqueue.Status{jobqueue.Idle, jobqueue.Held} {
				if got, want := counts[owner][status], st.counts[owner][status]; got != want {
					t.Errorf("%s: %s has %d jobs %s, want %d", st.name, owner, got, status, want)
				}
			}
		}
		idle := 0
		for _, c := range st.counts {
			idle += c[jobqueue.Idle]
		}
		s.mu.Lock()
		got := s.idle.len()
		s.mu.Unlock()
		if got != idle {
			t.Errorf("%s: %d jobs in the idle index, want %d", st.name, got, idle)
		}
	}
}

// TestActClusterMemory holds, releases and removes one large cluster: the
// schedd's heap meanwhile does not grow with the number of jobs acted on.
func TestActClusterMemory(t *testing.T) {
	if raceDetector {
		t.Skip("a heap bound: run without the race detector (make allocs)")
	}
	if testing.Short() {
		t.Skip("a cluster of 20,000 jobs")
	}
	ctx := context.Background()
	peak := map[string]map[int]uint64{}
	for _, n := range []int{1000, 20000} {
		s := scheddAt(t, t.TempDir(), "")
		t.Cleanup(func() { s.Close() })
		c := submitCluster(t, s, n)
		for _, action := range []string{wire.ActHold, wire.ActRelease, wire.ActRemove} {
			var resp *wire.ActResponse
			start := time.Now()
			p := peakHeap(func() {
				var err error
				resp, err = s.Act(ctx, &wire.ActRequest{Action: action, Args: []string{fmt.Sprint(c)}})
				if err != nil {
					t.Fatal(err)
				}
			})
			if peak[action] == nil {
				peak[action] = map[int]uint64{}
			}
			peak[action][n] = p
			t.Logf("%s of %d jobs: %v, peak heap %.1f MiB over the schedd's before", action, n, time.Since(start).Round(time.Millisecond), float64(p)/(1<<20))
			if got := actCount(resp); got != n {
				t.Fatalf("%s changed %d jobs, want %d", action, got, n)
			}
		}
	}
	for action, p := range peak {
		// Flat, give or take what the garbage collector's timing leaves on a
		// loaded machine (up to 13 MiB seen); holding every ad grew it by 30–73 MiB.
		if grew := int64(p[20000]) - int64(p[1000]); grew > 20<<20 {
			t.Errorf("%s: the peak heap grew by %.1f MiB from 1,000 to 20,000 jobs, want it flat", action, float64(grew)/(1<<20))
		}
	}
}

func actCount(resp *wire.ActResponse) int { return resp.Count }

// TestQmgmtEditCluster edits every job of a cluster of 20,000 by
// constraint, as Schedd.edit and condor_qedit do: the answer counts them,
// and once the transaction commits every job has the value.
func TestQmgmtEditCluster(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a cluster of 20,000 jobs")
	}
	n := 20000
	if raceDetector {
		// Still several pages of the edit; the race detector makes each
		// job's work some ten times slower.
		n = 2500
	}
	s := newTestSchedd(t)
	c := submitCluster(t, s, n)
	se := newSession(t, s, "alice", false)
	start := time.Now()
	if got := se.do(msg(qSetAttributeByConstraint, fmt.Sprintf("ClusterId == %d", c), `"blue"`, "Colour")); got.rval != int64(n) {
		t.Fatalf("SetAttributeByConstraint of a cluster of %d: %+v", n, got)
	}
	edited := time.Since(start)
	if got := se.do(msg(qCommitTransaction, 0)); got.rval != 0 {
		t.Fatalf("commit: %+v", got)
	}
	t.Logf("edit of %d jobs: %v by constraint, %v with its commit", n, edited.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	blue := 0
	err := s.q.Scan(context.Background(), jobqueue.ClusterJobs(c), []string{"Colour"}, func(j jobqueue.Job) error {
		if j.Ad["Colour"] == `"blue"` {
			blue++
		}
		return nil
	})
	if err != nil || blue != n {
		t.Errorf("%d jobs of %d edited (%v)", blue, n, err)
	}
}

// submitText queues the jobs of a submit file of owner, in dir, on s
// and returns their cluster.
func submitText(t testing.TB, s *Schedd, owner, dir, text string) int {
	t.Helper()
	ctx := context.Background()
	f, err := submit.Parse(filepath.Join(dir, "job.sub"), []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := s.NewCluster(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	fa, err := f.NewFactory(ctx, submit.Options{ClusterID: nc.Cluster, Owner: owner, ScheddName: nc.ScheddName, QDate: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	d, err := fa.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SubmitDigest(ctx, &wire.SubmitDigestRequest{Cluster: nc.Cluster, Digest: d}); err != nil {
		t.Fatal(err)
	}
	return nc.Cluster
}

// TestActEventsOfEachLog holds, releases and removes jobs whose event
// logs are named every way (a relative log in the job's directory, a DAG
// node's log, a log of another attribute, an expression reading others)
// and checks that each log has each job's event once, in the jobs'
// order, as the job's whole ad names them.
func TestActEventsOfEachLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := scheddAt(t, t.TempDir(), "")
	t.Cleanup(func() { s.Close() })
	const n = 3
	clusters := map[int][]string{} // cluster -> the logs its events go to
	c := submitText(t, s, "alice", dir, fmt.Sprintf("initialdir = "+dir+"\nexecutable = /bin/true\nrequirements = false\nlog = a.log\nqueue %d\n", n))
	clusters[c] = []string{filepath.Join(dir, "a.log")}
	c = submitText(t, s, "bob", dir, fmt.Sprintf("initialdir = "+dir+"\nexecutable = /bin/true\nrequirements = false\nlog = a.log\n+DAGManNodesLog = \"%s\"\nqueue %d\n",
		filepath.Join(dir, "nodes.log"), n))
	clusters[c] = []string{filepath.Join(dir, "a.log"), filepath.Join(dir, "nodes.log")}
	c = submitText(t, s, "alice", dir, fmt.Sprintf("initialdir = "+dir+"\nexecutable = /bin/true\nrequirements = false\n+LogDir = \"%s\"\n+UserLog = strcat(LogDir, \"/b.log\")\nqueue %d\n", dir, n))
	clusters[c] = []string{filepath.Join(dir, "b.log")}
	c = submitText(t, s, "alice", dir, fmt.Sprintf("initialdir = "+dir+"\nexecutable = /bin/true\nrequirements = false\n+UserLog = ifThenElse(ProcId == 1, \"c1.log\", \"c.log\")\nqueue %d\n", n))
	clusters[c] = []string{filepath.Join(dir, "c.log"), filepath.Join(dir, "c1.log")}
	asAdmin := asUser("root", auth.Read, auth.Write, auth.Administrator)
	for _, step := range []struct {
		action, code string
	}{{wire.ActHold, "012"}, {wire.ActRelease, "013"}, {wire.ActRemove, "009"}} {
		resp, err := s.Act(asAdmin, &wire.ActRequest{Action: step.action, All: true})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Count != n*len(clusters) {
			t.Fatalf("%s: %d jobs, want %d", step.action, resp.Count, n*len(clusters))
		}
		// Each log's events of this action, in order.
		got := map[string][]string{}
		for _, name := range []string{"a.log", "nodes.log", "b.log", "c.log", "c1.log"} {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatalf("%s: %v", step.action, err)
			}
			for _, line := range strings.Split(string(b), "\n") {
				if id, ok := strings.CutPrefix(line, step.code+" ("); ok {
					got[filepath.Join(dir, name)] = append(got[filepath.Join(dir, name)], id[:strings.Index(id, ")")])
				}
			}
		}
		want := map[string][]string{}
		ids := slices.Sorted(maps.Keys(clusters))
		for _, c := range ids {
			for p := range n {
				logs := clusters[c]
				if strings.HasSuffix(logs[0], "c.log") {
					logs = logs[:1]
					if p == 1 {
						logs = clusters[c][1:]
					}
				}
				for _, l := range logs {
					want[l] = append(want[l], fmt.Sprintf("%03d.%03d.000", c, p))
				}
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("after condor_%s the logs have the events\n%v\nwant\n%v", step.action, got, want)
		}
	}
}

// TestReleaseFilesAsIndexed releases clusters whose jobs differ in what
// their autocluster, owner and JobPrio depend on (a resource request, an
// attribute Requirements names, one the slots' policy names, JobPrio
// through another attribute) and in what they do not (arguments): each
// job is filed as a schedd started on the queue files it, though jobs
// equal in all that matters share one read of their ad.
func TestReleaseFilesAsIndexed(t *testing.T) {
	ctx := context.Background()
	dir, qdir := t.TempDir(), t.TempDir()
	s := scheddAt(t, qdir, "")
	const n = 6
	for _, text := range []string{
		"arguments = $(Process)\n",
		"request_memory = $(Process) * 100 + 100\n",
		"+Foo = $(Process)\nrequirements = TARGET.Memory > Foo\n",
		"+Bar = $(Process) % 2\n",
		"+Baz = $(Process) % 3\n+JobPrio = Baz\narguments = $(Process)\n",
		"+Qux = $(Process) % 2\n+AccountingGroup = ifThenElse(Qux == 0, \"group_a.alice\", \"group_b.alice\")\n",
	} {
		submitText(t, s, "alice", dir, "initialdir = "+dir+"\nexecutable = /bin/true\n"+text+fmt.Sprintf("queue %d\n", n))
	}
	sig := []string{"Bar"}
	s.widen(ctx, sig)
	asAdmin := asUser("root", auth.Read, auth.Write, auth.Administrator)
	for _, action := range []string{wire.ActHold, wire.ActRelease} {
		if _, err := s.Act(asAdmin, &wire.ActRequest{Action: action, All: true}); err != nil {
			t.Fatal(err)
		}
	}
	filed := func(s *Schedd) []string {
		s.mu.Lock()
		defer s.mu.Unlock()
		var out []string
		for id, ij := range s.idle.m {
			out = append(out, fmt.Sprintf("%s owner=%s user=%s prio=%d key=%q", id, ij.owner, ij.ac.user, ij.prio, ij.ac.key))
		}
		slices.Sort(out)
		return out
	}
	got := filed(s)
	if len(got) != 6*n {
		t.Fatalf("%d jobs idle after the release, want %d", len(got), 6*n)
	}
	keys := map[string]bool{}
	s.mu.Lock()
	for _, ij := range s.idle.m {
		keys[ij.ac.key] = true
	}
	s.mu.Unlock()
	s.Close()
	ref := scheddAt(t, qdir, "")
	t.Cleanup(func() { ref.Close() })
	ref.widen(ctx, sig)
	if d := cmp.Diff(filed(ref), got); d != "" {
		t.Errorf("the released jobs' filing (-as a schedd started on the queue files them +after the release):\n%s", d)
	}
	// 1 (arguments, and Baz's cluster: JobPrio is not in the key) + 6
	// (request_memory) + 6 (Foo) + 6 (Bar's texts) + 2 (AccountingGroup).
	if len(keys) != 21 {
		t.Errorf("%d autoclusters, want 21", len(keys))
	}
}
