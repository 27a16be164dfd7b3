package schedd_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/wire"
)

// TestOutputArrivingHoldsTheLease: a job's output that takes longer to
// arrive than the claim's lease does not get the job requeued: the claim
// is alive while its output arrives, the output lands once the final
// report comes, and the job completes once, with no disconnection in its
// log.
func TestOutputArrivingHoldsTheLease(t *testing.T) {
	t.Parallel()
	// A claim lease of 0.2 s (and one renewal interval more).
	n := startWith(t, "ALIVE_INTERVAL = 0.1\nMAX_CLAIM_ALIVES_MISSED = 2\n")
	n.running(1)
	ctx := n.run()
	// Keep the claim alive until the output starts, as the starter does.
	if err := n.c.JobReport(ctx, &wire.JobReport{ClaimID: "claim-0", JobID: "1.0", Kind: wire.ReportUpdate}); err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("o"), wire.ChunkSize)
	info, err := n.c.SendOutput(ctx, wire.TransferHeader{ClaimID: "claim-0", JobID: "1.0", Stream: wire.StreamStdout},
		func(tw *wire.TransferWriter) error {
			for range 3 {
				if _, err := tw.Write(chunk); err != nil {
					return err
				}
				// Longer than the lease, and than the schedd's sweep.
				time.Sleep(1500 * time.Millisecond)
			}
			_, err := tw.End()
			return err
		})
	if err != nil {
		t.Fatalf("sending the output, slowly: %v", err)
	}
	if err := n.c.JobReport(ctx, &wire.JobReport{ClaimID: "claim-0", JobID: "1.0", Kind: wire.ReportExited, Outputs: []wire.FileInfo{*info}}); err != nil {
		t.Fatalf("the final report: %v", err)
	}
	// The job moves to the history right after the report's answer
	// (complete).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		hist, err := n.c.History(ctx, &wire.QueryJobsRequest{Args: []string{"1.0"}})
		if err == nil && len(hist) == 1 && hist[0].Ad["JobStatus"] == "4" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("history of 1.0: %v, %v", hist, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(n.jobs, "out.0")); err != nil || len(b) != 3*wire.ChunkSize {
		t.Errorf("out.0: %d bytes, %v", len(b), err)
	}
	evs := n.events()
	for _, bad := range []string{"JobDisconnectedEvent 1.0", "JobReconnectFailedEvent 1.0", "JobEvictedEvent 1.0"} {
		if slices.Contains(evs, bad) {
			t.Errorf("the job log has %s: %v", bad, evs)
		}
	}
}

// TestNodeLostStopsInputTransfer: a job whose input files are on their
// way to a node the sea declares gone goes back to the queue at once,
// with the reason in its log, rather than when the stalled transfer is
// given up.
func TestNodeLostStopsInputTransfer(t *testing.T) {
	t.Parallel()
	n := start(t)
	ctx := context.Background()
	// A startd that grants the claim, then takes the input connection
	// and never reads it, as a dead node's would stay.
	arrived, quit := make(chan struct{}, 1), make(chan struct{})
	mux := http.NewServeMux()
	mux.Handle(wire.PathPrefix+"startd/claim", wire.Handle(func(ctx context.Context, r *wire.ClaimRequest) (*wire.ClaimResponse, error) {
		return &wire.ClaimResponse{ClaimID: "claim-1", Slot: wire.Ad{"Name": `"slot1_1@exec"`}}, nil
	}))
	mux.HandleFunc(wire.PathPrefix+"startd/transfer", func(w http.ResponseWriter, r *http.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		// Neither reading nor answering; the test's end lets go.
		select {
		case <-r.Context().Done():
		case <-quit:
		}
	})
	mux.Handle(wire.PathPrefix+"startd/release", wire.Handle(func(ctx context.Context, r *wire.ReleaseRequest) (struct{}, error) {
		return struct{}{}, nil
	}))
	startd := httptest.NewServer(mux)
	t.Cleanup(startd.Close)
	t.Cleanup(func() { close(quit) })
	if err := os.WriteFile(filepath.Join(n.jobs, "in.dat"), bytes.Repeat([]byte("x"), 64<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	resp := n.submitFile("alice", "executable = /bin/cat\ntransfer_executable = false\ntransfer_input_files = in.dat\nlog = job.log\nqueue\n")
	id := strconv.Itoa(resp.Cluster) + ".0"
	if err := n.c.Matches(ctx, &wire.MatchesRequest{Negotiator: "test", Matches: []wire.Match{{JobID: id, SlotName: "slot1@exec",
		Startd: startd.Listener.Addr().String(), ClaimID: "offer-1"}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the input transfer did not start")
	}
	lost := time.Now()
	n.s.NodeLost(ctx, "exec")
	// The event is written to the job's log after the requeue's commit.
	for n.job(id)["JobStatus"] != "1" || !slices.Contains(n.events(), "ShadowExceptionEvent "+id) {
		if time.Since(lost) > 10*time.Second {
			t.Fatalf("10 s after its node was lost, job %s has JobStatus %s and its log %v, want 1 and a shadow exception", id,
				n.job(id)["JobStatus"], n.events())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestNodeLostWhileStarting: a job whose node the sea declares gone while
// the startd's grant of its claim, or its answer to the job's activation,
// is on its way runs there, disconnected: once its claim lease runs out
// and nothing listens at its startd's address (the node's agent is dead,
// the job with it), it goes back to the queue, with the disconnection and
// the failed reconnection in its log, rather than after its job lease of
// 40 minutes.
func TestNodeLostWhileStarting(t *testing.T) {
	t.Parallel()
	for _, held := range []string{"claim", "activate"} {
		t.Run(held, func(t *testing.T) {
			// A claim lease of 0.2 s (and one renewal interval more).
			n := startWith(t, "ALIVE_INTERVAL = 0.1\nMAX_CLAIM_ALIVES_MISSED = 2\n")
			ctx := n.run()
			// A startd that grants the claim and takes the job, answering
			// the call held only once the test lets it.
			waiting, answer := make(chan struct{}, 1), make(chan struct{})
			hold := func(call string) {
				if call == held {
					waiting <- struct{}{}
					<-answer
				}
			}
			mux := http.NewServeMux()
			mux.Handle(wire.PathPrefix+"startd/claim", wire.Handle(func(ctx context.Context, r *wire.ClaimRequest) (*wire.ClaimResponse, error) {
				hold("claim")
				return &wire.ClaimResponse{ClaimID: "claim-1", Slot: wire.Ad{"Name": `"slot1_1@exec"`}}, nil
			}))
			activated := make(chan struct{}, 1)
			mux.Handle(wire.PathPrefix+"startd/activate", wire.Handle(func(ctx context.Context, r *wire.ActivateRequest) (struct{}, error) {
				hold("activate")
				select {
				case activated <- struct{}{}:
				default:
				}
				return struct{}{}, nil
			}))
			mux.Handle(wire.PathPrefix+"startd/release", wire.Handle(func(ctx context.Context, r *wire.ReleaseRequest) (struct{}, error) {
				return struct{}{}, nil
			}))
			startd := httptest.NewServer(mux)
			t.Cleanup(startd.Close)
			resp := n.submitFile("alice", "executable = /bin/sleep\narguments = 8\ntransfer_executable = false\nlog = job.log\nqueue\n")
			id := strconv.Itoa(resp.Cluster) + ".0"
			if err := n.c.Matches(ctx, &wire.MatchesRequest{Negotiator: "test", Matches: []wire.Match{{JobID: id, SlotName: "slot1@exec",
				Startd: startd.Listener.Addr().String(), ClaimID: "offer-1"}}}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-waiting:
			case <-time.After(10 * time.Second):
				t.Fatalf("the %s call did not come", held)
			}
			n.s.NodeLost(ctx, "exec")
			if held == "claim" {
				// The node's agent answers the claim, and the
				// activation, as it goes.
				close(answer)
				// The startd answers the activation before it goes
				// (Close waits for the answer); the execute event
				// follows that answer.
				select {
				case <-activated:
				case <-time.After(10 * time.Second):
					t.Fatal("the activation did not come")
				}
			} else {
				close(answer)
			}
			// The node's agent is gone: nothing listens at its address.
			startd.Close()
			n.waitReconnectFailed(id, 10*time.Second)
			evs := n.events()
			for _, want := range []string{"ExecuteEvent " + id, "JobDisconnectedEvent " + id, "JobReconnectFailedEvent " + id} {
				if !slices.Contains(evs, want) {
					t.Errorf("the job log has no %s: %v", want, evs)
				}
			}
			if i, j := slices.Index(evs, "JobDisconnectedEvent "+id), slices.Index(evs, "JobReconnectFailedEvent "+id); i > j {
				t.Errorf("the job log has the failed reconnection before the disconnection: %v", evs)
			}
		})
	}
}

// TestLateReportOfLostNode: a report sent just before a node's agent died,
// and handled after the sea declared the node lost, does not bring the
// node back unless its startd answers: nothing listening at its address,
// the job goes back to the queue once its claim lease runs out, not after
// its job lease of 40 minutes; a startd that answers is back, and its job
// reconnected.
func TestLateReportOfLostNode(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		alive bool // the startd answers as the report comes
		dies  bool // and its agent is dead after
	}{{"agent dead", false, true}, {"agent alive", true, false}, {"agent alive, then dead", true, true}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// A claim lease of 2 s (and one renewal interval more).
			n := startWith(t, "ALIVE_INTERVAL = 1\nMAX_CLAIM_ALIVES_MISSED = 2\n")
			ctx := n.run()
			var jobID atomic.Value
			jobID.Store("")
			mux := http.NewServeMux()
			mux.Handle(wire.PathPrefix+"startd/claim", wire.Handle(func(ctx context.Context, r *wire.ClaimRequest) (*wire.ClaimResponse, error) {
				return &wire.ClaimResponse{ClaimID: "claim-1", Slot: wire.Ad{"Name": `"slot1_1@exec"`}}, nil
			}))
			mux.Handle(wire.PathPrefix+"startd/activate", wire.Handle(func(ctx context.Context, r *wire.ActivateRequest) (struct{}, error) {
				return struct{}{}, nil
			}))
			mux.Handle(wire.PathPrefix+"startd/claiminfo", wire.Handle(func(ctx context.Context, r *wire.ClaimInfoRequest) (*wire.ClaimInfoResponse, error) {
				return &wire.ClaimInfoResponse{Exists: true, Active: true, JobID: jobID.Load().(string), Machine: "exec"}, nil
			}))
			mux.Handle(wire.PathPrefix+"startd/release", wire.Handle(func(ctx context.Context, r *wire.ReleaseRequest) (struct{}, error) {
				return struct{}{}, nil
			}))
			startd := httptest.NewServer(mux)
			t.Cleanup(startd.Close)
			resp := n.submitFile("alice", "executable = /bin/sleep\narguments = 8\ntransfer_executable = false\nlog = job.log\nqueue\n")
			id := strconv.Itoa(resp.Cluster) + ".0"
			jobID.Store(id)
			if err := n.c.Matches(ctx, &wire.MatchesRequest{Negotiator: "test", Matches: []wire.Match{{JobID: id, SlotName: "slot1@exec",
				Startd: startd.Listener.Addr().String(), ClaimID: "offer-1"}}}); err != nil {
				t.Fatal(err)
			}
			for !slices.Contains(n.events(), "ExecuteEvent "+id) {
				if ctx.Err() != nil {
					t.Fatal(ctx.Err())
				}
				time.Sleep(20 * time.Millisecond)
			}
			if !tt.alive {
				startd.Close()
			}
			n.s.NodeLost(ctx, "exec")
			// The report the node sent as it went.
			if err := n.c.JobReport(ctx, &wire.JobReport{ClaimID: "claim-1", JobID: id, Kind: wire.ReportUpdate, SlotName: "slot1_1@exec"}); err != nil {
				t.Fatal(err)
			}
			if tt.alive {
				if evs := n.events(); !slices.Contains(evs, "JobReconnectedEvent "+id) {
					t.Errorf("the job log has no reconnection of the node that answers: %v", evs)
				}
				if !tt.dies {
					return
				}
				// Its agent was on its way out: the node the sea lost
				// stays lost, and nothing listening at its startd's
				// address says it is dead.
				startd.Close()
			}
			n.waitReconnectFailed(id, 15*time.Second)
			if evs := n.events(); !tt.alive && slices.Contains(evs, "JobReconnectedEvent "+id) {
				t.Errorf("the late report of a dead node reconnected its job: %v", evs)
			}
		})
	}
}

// waitReconnectFailed waits, up to within from now, for job id, whose node
// was lost, to be idle again with its failed reconnection in its log.
func (n *node) waitReconnectFailed(id string, within time.Duration) {
	n.t.Helper()
	lost := time.Now()
	for n.job(id)["JobStatus"] != "1" || !slices.Contains(n.events(), "JobReconnectFailedEvent "+id) {
		if time.Since(lost) > within {
			n.t.Fatalf("job %s still has JobStatus %s %v after its node was lost: %v", id, n.job(id)["JobStatus"], within, n.events())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
