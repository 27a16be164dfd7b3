package schedd_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/wire"
)

// TestPeriodicPolicy runs the schedd with a short PERIODIC_EXPR_INTERVAL:
// a job's periodic_remove removes it, a periodic_hold holds another with
// its reason and subcode and its periodic_release releases it, a job
// without a periodic expression stays as it is, and the job log has
// HTCondor's events with their reasons and codes.
func TestPeriodicPolicy(t *testing.T) {
	t.Parallel()
	n := startWith(t, "PERIODIC_EXPR_INTERVAL = 0.2\n")
	n.run()
	remove := n.submitFile("alice", "executable = /bin/sleep\narguments = 600\nlog = job.log\n"+
		"periodic_remove = (time() - QDate) > 1\nqueue\n")
	// Held until released once (the release sets ReleaseReason), then
	// released by its periodic_release.
	cycle := n.submitFile("alice", "executable = /bin/sleep\narguments = 600\nlog = job.log\n"+
		"periodic_hold = ReleaseReason =?= undefined\nperiodic_hold_reason = \"held by policy\"\nperiodic_hold_subcode = 9\n"+
		"periodic_release = HoldReasonCode == 3 && HoldReasonSubCode == 9\nqueue\n")
	plain := n.submitFile("alice", "executable = /bin/sleep\narguments = 600\nlog = job.log\nqueue\n")
	rid, cid, pid := itoa(remove.Cluster)+".0", itoa(cycle.Cluster)+".0", itoa(plain.Cluster)+".0"

	deadline := time.Now().Add(60 * time.Second)
	var evs []joblog.Event
	for time.Now().Before(deadline) {
		evs = readLog(t, filepath.Join(n.jobs, "job.log"))
		if hasEvent(evs, joblog.Aborted, remove.Cluster) && hasEvent(evs, joblog.Released, cycle.Cluster) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !hasEvent(evs, joblog.Aborted, remove.Cluster) {
		t.Fatalf("job %s was not removed by its periodic_remove; events %v", rid, evs)
	}
	hist, err := n.c.History(context.Background(), &wire.QueryJobsRequest{Args: []string{rid}})
	if err != nil || len(hist) != 1 {
		t.Fatalf("history of %s: %v, %v", rid, hist, err)
	}
	wantRemove := "The job attribute PeriodicRemove expression '(time() - QDate) > 1' evaluated to TRUE"
	if got := hist[0].Ad["RemoveReason"]; got != `"`+wantRemove+`"` {
		t.Errorf("RemoveReason = %s, want %q", got, wantRemove)
	}
	for _, ev := range evs {
		switch {
		case ev.Type == joblog.Aborted && ev.Cluster == remove.Cluster:
			if ev.Message != wantRemove {
				t.Errorf("abort event's reason %q, want %q", ev.Message, wantRemove)
			}
		case ev.Type == joblog.Held && ev.Cluster == cycle.Cluster:
			if ev.Message != "held by policy" || ev.HoldCode != 3 || ev.HoldSubCode != 9 {
				t.Errorf("hold event %q code %d subcode %d, want %q 3 9", ev.Message, ev.HoldCode, ev.HoldSubCode, "held by policy")
			}
		case ev.Type == joblog.Released && ev.Cluster == cycle.Cluster:
			want := "The job attribute PeriodicRelease expression 'HoldReasonCode == 3 && HoldReasonSubCode == 9' evaluated to TRUE"
			if ev.Message != want {
				t.Errorf("release event's reason %q, want %q", ev.Message, want)
			}
		case ev.Cluster == plain.Cluster && ev.Type != joblog.Submit:
			t.Errorf("job %s without policy got event %v", pid, ev.Type)
		}
	}
	if !hasEvent(evs, joblog.Held, cycle.Cluster) || !hasEvent(evs, joblog.Released, cycle.Cluster) {
		t.Fatalf("job %s was not held and released; events %v", cid, evs)
	}
	if got := n.job(pid)["JobStatus"]; got != "1" {
		t.Errorf("job without policy: JobStatus %s, want 1", got)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func hasEvent(evs []joblog.Event, typ joblog.EventType, cluster int) bool {
	return slices.ContainsFunc(evs, func(ev joblog.Event) bool { return ev.Type == typ && ev.Cluster == cluster })
}

func readLog(t *testing.T, path string) []joblog.Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	evs, _ := joblog.ReadAll(f, time.Local)
	return evs
}

// TestSystemPeriodicPolicy sets SYSTEM_PERIODIC_REMOVE and its reason:
// the schedd evaluates every job, also those carrying no periodic
// expression of their own, and removes only those it picks.
func TestSystemPeriodicPolicy(t *testing.T) {
	t.Parallel()
	n := startWith(t, "PERIODIC_EXPR_INTERVAL = 0.2\nSYSTEM_PERIODIC_REMOVE = JobPrio > 5\n"+
		"SYSTEM_PERIODIC_REMOVE_REASON = strcat(\"priority \", JobPrio, \" is too high\")\n")
	n.run()
	high := n.submitFile("alice", "executable = /bin/sleep\narguments = 600\nlog = job.log\npriority = 10\nqueue\n")
	low := n.submitFile("alice", "executable = /bin/sleep\narguments = 600\nlog = job.log\npriority = 1\nqueue\n")
	hid := itoa(high.Cluster) + ".0"
	var hist []wire.Job
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		var err error
		if hist, err = n.c.History(context.Background(), &wire.QueryJobsRequest{Args: []string{hid}}); err != nil {
			t.Fatal(err)
		}
		if len(hist) > 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(hist) != 1 {
		t.Fatalf("job %s was not removed by SYSTEM_PERIODIC_REMOVE", hid)
	}
	if got, want := hist[0].Ad["RemoveReason"], `"priority 10 is too high"`; got != want {
		t.Errorf("RemoveReason = %s, want %s", got, want)
	}
	time.Sleep(500 * time.Millisecond) // two more intervals
	if got := n.job(itoa(low.Cluster) + ".0")["JobStatus"]; got != "1" {
		t.Errorf("job the system policy does not pick: JobStatus %s, want 1", got)
	}
}
