package schedd

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/internal/asuser"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// openOutboxSchedd opens a schedd whose spool is in dir.
func openOutboxSchedd(t *testing.T, dir string) *Schedd {
	t.Helper()
	s, err := New(context.Background(), Options{Config: config.New(config.Options{}), Name: "schedd@submit",
		Address: "127.0.0.1:9618", DataDir: dir, Account: func(string) (*asuser.Account, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestOutboxSurvivesCrash stops the schedd between a state change's
// commit and the write of its event (the crash of a schedd killed there),
// between its writes to the job's two logs (UserLog, DAGManNodesLog), or
// between the writes and the drop of the event from the outbox, and
// starts it again: each log has the event exactly once, and the outbox is
// empty.
func TestOutboxSurvivesCrash(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		written bool // the event reached the logs before the crash
		half    bool // it reached the first log only
		ev      joblog.Event
		change  func(ctx context.Context, s *Schedd, id jobqueue.JobID) error
	}{
		{name: "released before the write", ev: joblog.Event{Type: joblog.Released, Message: "via condor_release"},
			change: func(ctx context.Context, s *Schedd, id jobqueue.JobID) error {
				_, err := s.q.Release(ctx, jobqueue.OneJob(id), "via condor_release")
				return err
			}},
		{name: "released after the write", written: true, ev: joblog.Event{Type: joblog.Released, Message: "via condor_release"},
			change: func(ctx context.Context, s *Schedd, id jobqueue.JobID) error {
				_, err := s.q.Release(ctx, jobqueue.OneJob(id), "via condor_release")
				return err
			}},
		{name: "released between the writes", half: true, ev: joblog.Event{Type: joblog.Released, Message: "via condor_release"},
			change: func(ctx context.Context, s *Schedd, id jobqueue.JobID) error {
				_, err := s.q.Release(ctx, jobqueue.OneJob(id), "via condor_release")
				return err
			}},
		{name: "aborted before the write", ev: joblog.Event{Type: joblog.Aborted, Message: "via condor_rm"},
			change: func(ctx context.Context, s *Schedd, id jobqueue.JobID) error {
				_, err := s.q.Remove(ctx, jobqueue.OneJob(id), "via condor_rm")
				return err
			}},
		{name: "aborted after the write", written: true, ev: joblog.Event{Type: joblog.Aborted, Message: "via condor_rm"},
			change: func(ctx context.Context, s *Schedd, id jobqueue.JobID) error {
				_, err := s.q.Remove(ctx, jobqueue.OneJob(id), "via condor_rm")
				return err
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			logPath, nodesPath := filepath.Join(dir, "job.log"), filepath.Join(dir, "nodes.log")
			s := openOutboxSchedd(t, dir)
			id := submitLogged(t, s, logPath, wire.Ad{"JobStatus": "5", "DAGManNodesLog": strconv.Quote(nodesPath)})
			entries, err := s.recordEvents(ctx, c.ev, func(ctx context.Context) error { return c.change(ctx, s, id) })
			if err != nil || len(entries) != 1 {
				t.Fatalf("recording the change: %v, %d entries", err, len(entries))
			}
			var ev joblog.Event
			if err := json.Unmarshal(entries[0].Record, &ev); err != nil {
				t.Fatal(err)
			}
			switch {
			case c.written:
				s.writeEvent(ctx, id, nil, ev)
			case c.half:
				ad, err := s.eventAd(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				ev.Cluster, ev.Proc = id.Cluster, id.Proc
				s.writeLog(ad, logPath, ev)
			}
			// The schedd dies here: the outbox entry is not dropped.
			s.Close()

			s = openOutboxSchedd(t, dir)
			defer s.Close()
			for _, path := range []string{logPath, nodesPath} {
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				n := strings.Count("\n"+string(b), "\n"+eventNumber(c.ev.Type)+" (")
				if n != 1 {
					t.Fatalf("%s has %d events %s, want 1:\n%s", filepath.Base(path), n, eventNumber(c.ev.Type), b)
				}
			}
			left, err := s.q.PendingOutbox(ctx)
			if err != nil || len(left) != 0 {
				t.Fatalf("outbox after the restart: %v, %d entries", err, len(left))
			}
		})
	}
}

// submitLogged submits one job of alice's to s whose UserLog is
// logPath, with the attributes of extra besides, and returns its id.
func submitLogged(t *testing.T, s *Schedd, logPath string, extra wire.Ad) jobqueue.JobID {
	t.Helper()
	ctx := context.Background()
	nc, err := s.NewCluster(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ad := wire.Ad{"Owner": `"alice"`, "Cmd": `"/bin/true"`, "JobUniverse": "5", "RequestCpus": "1", "UserLog": strconv.Quote(logPath)}
	maps.Copy(ad, extra)
	if _, err := s.Submit(ctx, &wire.SubmitRequest{Cluster: nc.Cluster, Jobs: []wire.Ad{ad}}); err != nil {
		t.Fatal(err)
	}
	return jobqueue.JobID{Cluster: nc.Cluster}
}

// eventNumber is the number an event of type t starts with in a log.
func eventNumber(t joblog.EventType) string { return fmt.Sprintf("%03d", int(t)) }

// TestExecuteEventSurvivesCrash starts a job as the shadow does (the
// Running change with its Execute event in the outbox) and stops the
// schedd before the event is written, after it was written, or after the
// activation failed and the job went back to the queue, then starts it
// again: the job's log has the event once if the job started, and none
// if it did not. A record left from an earlier start of a job that runs
// again elsewhere writes nothing either.
func TestExecuteEventSurvivesCrash(t *testing.T) {
	t.Parallel()
	first := &claim{id: "claim-1", startd: "192.0.2.1:9618", slotName: "slot1@exec1"}
	second := &claim{id: "claim-2", startd: "192.0.2.2:9618", slotName: "slot1@exec2"}
	start := func(ctx context.Context, s *Schedd, id jobqueue.JobID, c *claim) *executeLog {
		t.Helper()
		x, err := s.startRunning(ctx, c, id, nil, jobqueue.Ad{"RemoteHost": strconv.Quote(c.slotName),
			"PondClaimId": strconv.Quote(c.id), "PondStartd": strconv.Quote(c.addr())})
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	requeue := func(ctx context.Context, s *Schedd, id jobqueue.JobID) {
		t.Helper()
		if err := s.q.Transition(ctx, id, jobqueue.Idle, nil); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name string
		// before runs until the crash; it returns the Execute events
		// it wrote.
		before func(ctx context.Context, s *Schedd, id jobqueue.JobID) int
		want   int // Execute events in the log after the restart
	}{
		{name: "started, killed before the write", want: 1, before: func(ctx context.Context, s *Schedd, id jobqueue.JobID) int {
			start(ctx, s, id, first)
			return 0
		}},
		{name: "started, killed after the write", want: 1, before: func(ctx context.Context, s *Schedd, id jobqueue.JobID) int {
			s.logExecute(ctx, start(ctx, s, id, first))
			return 1
		}},
		{name: "activation failed, requeued", want: 0, before: func(ctx context.Context, s *Schedd, id jobqueue.JobID) int {
			x := start(ctx, s, id, first)
			s.dropExecute(x)
			requeue(ctx, s, id)
			return 0
		}},
		{name: "activation failed, killed before the requeue", want: 1, before: func(ctx context.Context, s *Schedd, id jobqueue.JobID) int {
			s.dropExecute(start(ctx, s, id, first))
			return 0
		}},
		{name: "requeued, started elsewhere, killed after the write", want: 2, before: func(ctx context.Context, s *Schedd, id jobqueue.JobID) int {
			s.logExecute(ctx, start(ctx, s, id, first))
			requeue(ctx, s, id)
			s.logExecute(ctx, start(ctx, s, id, second))
			return 2
		}},
		{name: "requeued, started elsewhere, killed before the write", want: 2, before: func(ctx context.Context, s *Schedd, id jobqueue.JobID) int {
			s.logExecute(ctx, start(ctx, s, id, first))
			requeue(ctx, s, id)
			start(ctx, s, id, second)
			return 1
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			logPath := filepath.Join(dir, "job.log")
			s := openOutboxSchedd(t, dir)
			id := submitLogged(t, s, logPath, nil)
			wrote := c.before(ctx, s, id)
			if got := countEvents(t, logPath, joblog.Execute); got != wrote {
				t.Fatalf("before the crash the log has %d Execute events, want %d", got, wrote)
			}
			// The schedd dies here: the records dropped lazily are not.
			s.Close()

			s = openOutboxSchedd(t, dir)
			defer s.Close()
			if got := countEvents(t, logPath, joblog.Execute); got != c.want {
				b, _ := os.ReadFile(logPath)
				t.Fatalf("after the restart the log has %d Execute events, want %d:\n%s", got, c.want, b)
			}
			left, err := s.q.PendingOutbox(ctx)
			if err != nil || len(left) != 0 {
				t.Fatalf("outbox after the restart: %v, %d entries", err, len(left))
			}
		})
	}
}

// countEvents counts the events of type typ in the log at path; a missing
// log has none.
func countEvents(t *testing.T, path string, typ joblog.EventType) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count("\n"+string(b), "\n"+eventNumber(typ)+" (")
}
