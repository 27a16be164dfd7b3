package schedd_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// runSchedd runs the node's schedd (Run) until the test ends.
func (n *node) runSchedd() {
	n.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = n.s.Run(ctx)
	}()
	n.t.Cleanup(func() { cancel(); <-done })
}

// waitStatus waits until job id has status want, and returns its ad.
func (n *node) waitStatus(id string, want jobqueue.Status) wire.Ad {
	n.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		jobs, err := n.c.Queue(context.Background(), &wire.QueryJobsRequest{Args: []string{id}})
		if err == nil && len(jobs) == 1 && jobs[0].Ad["JobStatus"] == strconv.Itoa(int(want)) {
			return jobs[0].Ad
		}
		if err == nil && len(jobs) == 0 {
			hist, herr := n.c.History(context.Background(), &wire.QueryJobsRequest{Args: []string{id}})
			if herr == nil && len(hist) == 1 && hist[0].Ad["JobStatus"] == strconv.Itoa(int(want)) {
				return hist[0].Ad
			}
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("job %s never reached status %d: %v %v", id, want, jobs, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (n *node) script(name, text string) {
	n.t.Helper()
	if err := os.WriteFile(filepath.Join(n.jobs, name), []byte(text), 0o755); err != nil {
		n.t.Fatal(err)
	}
}

// TestLocalUniverseJobs runs scheduler- and local-universe jobs on the
// schedd itself: never offered to the negotiator, with their output,
// exit code and events; one that cannot start is held.
func TestLocalUniverseJobs(t *testing.T) {
	t.Parallel()
	for _, universe := range []string{"scheduler", "local"} {
		t.Run(universe, func(t *testing.T) {
			n := start(t)
			n.script("job.sh", "#!/bin/sh\necho \"out $1 $CONDOR_ID\"\necho err >&2\nexit 3\n")
			n.runSchedd()
			resp := n.submitFile("alice", "universe = "+universe+"\nexecutable = job.sh\narguments = a1\noutput = job.out\nerror = job.err\nlog = job.log\nqueue\n")
			id := strconv.Itoa(resp.Cluster) + ".0"
			if idle := n.idle(); len(idle) != 0 {
				t.Errorf("the negotiator is offered %v", idle)
			}
			ad := n.waitStatus(id, jobqueue.Completed)
			if ad["ExitCode"] != "3" {
				t.Errorf("ExitCode %q, want 3", ad["ExitCode"])
			}
			if b, _ := os.ReadFile(filepath.Join(n.jobs, "job.out")); string(b) != "out a1 "+id+"\n" {
				t.Errorf("output %q", b)
			}
			if b, _ := os.ReadFile(filepath.Join(n.jobs, "job.err")); string(b) != "err\n" {
				t.Errorf("error %q", b)
			}
			if got, want := strings.Join(n.events(), ","), "SubmitEvent "+id+",ExecuteEvent "+id+",JobTerminatedEvent "+id; got != want {
				t.Errorf("events %s, want %s", got, want)
			}
		})
	}
	t.Run("missing executable", func(t *testing.T) {
		n := start(t)
		n.runSchedd()
		resp := n.submitFile("alice", "universe = scheduler\nexecutable = /nonexistent/prog\ntransfer_executable = false\nlog = job.log\nqueue\n")
		ad := n.waitStatus(strconv.Itoa(resp.Cluster)+".0", jobqueue.Held)
		if ad["HoldReasonCode"] != "6" || !strings.Contains(ad["HoldReason"], "/nonexistent/prog") {
			t.Errorf("hold %s %s", ad["HoldReasonCode"], ad["HoldReason"])
		}
	})
}

// TestLocalUniverseRemoveKillsTree removes a running scheduler-universe
// job: every process of it dies, even one it put in a session of its own.
func TestLocalUniverseRemoveKillsTree(t *testing.T) {
	t.Parallel()
	n := start(t)
	n.script("job.sh", "#!/bin/sh\nsetsid sleep 300 &\necho $! > child.pid\nsleep 300\n")
	n.runSchedd()
	resp := n.submitFile("alice", "universe = scheduler\nexecutable = job.sh\nlog = job.log\nqueue\n")
	id := strconv.Itoa(resp.Cluster) + ".0"
	n.waitStatus(id, jobqueue.Running)
	var child int
	for deadline := time.Now().Add(10 * time.Second); child == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(n.jobs, "child.pid"))
		child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	if child == 0 || syscall.Kill(child, 0) != nil {
		t.Fatalf("the job's child %d does not run", child)
	}
	if _, err := n.c.Act(context.Background(), &wire.ActRequest{Action: wire.ActRemove, Args: []string{id}}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); syscall.Kill(child, 0) == nil; time.Sleep(20 * time.Millisecond) {
		if b, _ := os.ReadFile("/proc/" + strconv.Itoa(child) + "/stat"); strings.Contains(string(b), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job's child %d still runs after condor_rm", child)
		}
	}
	if got := strings.Join(n.events(), ","); got != "SubmitEvent "+id+",ExecuteEvent "+id+",JobAbortedEvent "+id {
		t.Errorf("events %s", got)
	}
}

// TestLocalUniverseOutputNotThroughLink checks that a local job's output
// is not written through a symbolic link, as a vanilla job's is not: the
// job is held with the reason, and the file the link names is kept.
func TestLocalUniverseOutputNotThroughLink(t *testing.T) {
	t.Parallel()
	n := start(t)
	n.script("job.sh", "#!/bin/sh\necho written\n")
	victim := filepath.Join(n.jobs, "victim")
	if err := os.WriteFile(victim, []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(n.jobs, "job.out")); err != nil {
		t.Fatal(err)
	}
	n.runSchedd()
	resp := n.submitFile("alice", "universe = local\nexecutable = job.sh\noutput = job.out\nqueue\n")
	ad := n.waitStatus(strconv.Itoa(resp.Cluster)+".0", jobqueue.Held)
	if !strings.Contains(ad["HoldReason"], "is a symbolic link, not written through") {
		t.Errorf("hold reason %q", ad["HoldReason"])
	}
	if b, _ := os.ReadFile(victim); string(b) != "kept\n" {
		t.Errorf("the file the link names holds %q", b)
	}
}

// TestRequeuedEventSaysHowTheJobEnded runs a local job whose max_retries
// keeps it after a failed run: the log's eviction says it terminated and
// was requeued, with its exit code and the OnExitRemove that kept it, as
// HTCondor's shadow writes it.
func TestRequeuedEventSaysHowTheJobEnded(t *testing.T) {
	t.Parallel()
	n := start(t)
	n.script("job.sh", "#!/bin/sh\nexit 5\n")
	n.runSchedd()
	resp := n.submitFile("alice", "universe = local\nexecutable = job.sh\nmax_retries = 1\nlog = job.log\nqueue\n")
	n.waitStatus(strconv.Itoa(resp.Cluster)+".0", jobqueue.Completed)
	log, err := os.ReadFile(filepath.Join(n.jobs, "job.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Job was evicted.\n\t(0) Job terminated and was requeued\n", "\t(1) Normal termination (return value 5)\n\tThe OnExitRemove expression '"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
}
