package schedd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// TestEndReachesLogBeforeHistory: a job's terminated event (005) is in its
// log before the job leaves the queue for the history, as HTCondor writes
// it: while the log cannot be written (the test holds its lock), the job
// stays in the queue, completed, and is not in the history; once the
// event is written, the job moves to the history and the outbox is empty.
func TestEndReachesLogBeforeHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestSchedd(t)
	logPath := filepath.Join(t.TempDir(), "job.log")
	nc, err := s.NewCluster(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	job := wire.Ad{"Owner": `"alice"`, "Cmd": `"/bin/true"`, "JobUniverse": "5", "RequestCpus": "1", "JobStatus": "1",
		"UserLog": strconv.Quote(logPath)}
	if _, err := s.Submit(ctx, &wire.SubmitRequest{Cluster: nc.Cluster, Jobs: []wire.Ad{job}}); err != nil {
		t.Fatal(err)
	}
	id := jobqueue.JobID{Cluster: nc.Cluster, Proc: 0}
	if err := s.q.Transition(ctx, id, jobqueue.Running, nil); err != nil {
		t.Fatal(err)
	}
	j, err := s.q.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	ad, err := wire.ToClassAd(j.Ad)
	if err != nil {
		t.Fatal(err)
	}
	// Hold the log's lock, as another writer of it would.
	f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- s.complete(ctx, id, ad, jobqueue.Ad{"ExitCode": "0"}, joblog.Event{Type: joblog.Terminated, TerminatedNormally: true})
	}()
	inHistory := func() bool {
		h, err := s.q.History(ctx, jobqueue.HistoryQuery{Sel: jobqueue.OneJob(id), Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		return len(h) > 0
	}
	// The completion commits; the event waits for the lock.
	deadline := time.Now().Add(10 * time.Second)
	for {
		j, err := s.q.Get(ctx, id)
		if errors.Is(err, jobqueue.ErrNotFound) {
			break // left the queue
		}
		if err != nil {
			t.Fatal(err)
		}
		if j.Status == jobqueue.Completed || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if inHistory() {
		t.Fatal("the job is in the history before its terminated event is in its log")
	}
	if j, err := s.q.Get(ctx, id); err != nil || j.Status != jobqueue.Completed {
		t.Fatalf("while its event waits, the job is %v (%v), want in the queue, completed", j.Status, err)
	}
	f.Close() // releases the lock
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the job's end did not finish once its log could be written")
	}
	raw, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), "005 ("); n != 1 {
		t.Fatalf("%d terminated events in the log, want 1:\n%s", n, raw)
	}
	// The move to the history follows in the background (complete).
	for deadline := time.Now().Add(10 * time.Second); !inHistory(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the job is not in the history once its event is written")
		}
	}
	if _, err := s.q.Get(ctx, id); !errors.Is(err, jobqueue.ErrNotFound) {
		t.Fatalf("the job is still in the queue: %v", err)
	}
	if pending, err := s.q.PendingOutbox(ctx); err != nil || len(pending) != 0 {
		t.Fatalf("outbox %+v (%v), want empty", pending, err)
	}
}

// TestCompletionSurvivesCrash stops the schedd where a completed job
// waits, in the queue, for its terminated event (complete): before the
// event is written, or after it and before the job moves to the history.
// Started again, the schedd writes the event if the log misses it, once,
// and the job then moves to the history.
func TestCompletionSurvivesCrash(t *testing.T) {
	t.Parallel()
	for _, written := range []bool{false, true} {
		t.Run(map[bool]string{false: "before the write", true: "after the write"}[written], func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			logPath := filepath.Join(dir, "job.log")
			s := openOutboxSchedd(t, dir)
			id := submitLogged(t, s, logPath, wire.Ad{"JobStatus": "1"})
			if err := s.q.Transition(ctx, id, jobqueue.Running, nil); err != nil {
				t.Fatal(err)
			}
			// complete's first step: completed, kept, the event in the outbox.
			entries, err := s.recordEvents(ctx, joblog.Event{Type: joblog.Terminated, TerminatedNormally: true}, func(ctx context.Context) error {
				return s.q.Apply(ctx, []jobqueue.Change{{ID: id, To: jobqueue.Completed, Keep: true}})
			})
			if err != nil || len(entries) != 1 {
				t.Fatalf("completing: %v, %d entries", err, len(entries))
			}
			if written {
				s.writeEntry(ctx, entries[0], nil, false)
			}
			s.Close() // the schedd dies here

			s = openOutboxSchedd(t, dir)
			defer s.Close()
			raw, err := os.ReadFile(logPath)
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(raw), "005 ("); n != 1 {
				t.Fatalf("%d terminated events in the log, want 1:\n%s", n, raw)
			}
			// Moved to the history as the schedd starts.
			if _, err := s.q.Get(ctx, id); !errors.Is(err, jobqueue.ErrNotFound) {
				t.Fatalf("the job is still in the queue: %v", err)
			}
			h, err := s.q.History(ctx, jobqueue.HistoryQuery{Sel: jobqueue.OneJob(id), Limit: 1})
			if err != nil || len(h) != 1 || h[0].Status != jobqueue.Completed {
				t.Fatalf("history %+v (%v), want the job completed", h, err)
			}
		})
	}
}
