package schedd_test

import (
	"context"
	"net"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// TestRecoveredClaimStartdListensLate restarts the schedd with a running
// job whose startd's address refuses connections at first, as a worker
// reached through this agent as its relay does until its tunnel is open
// again: a startd that answers there within the claim lease keeps its job
// (no failed reconnection, no second run); one that never does has its
// job requeued once the claim lease and a renewal interval have passed
// since the restart, not at once.
func TestRecoveredClaimStartdListensLate(t *testing.T) {
	t.Parallel()
	// A claim lease of 2 s and a renewal interval of 1 s: the schedd's
	// sweeps (every second) find the address refusing before then.
	const grace = 3 * time.Second
	for _, tc := range []struct {
		name  string
		after time.Duration // when the startd starts listening; 0: never
	}{
		{"startd back within the claim lease", 1500 * time.Millisecond},
		{"nothing ever listens", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := startWith(t, "ALIVE_INTERVAL = 1\nMAX_CLAIM_ALIVES_MISSED = 2\n")
			ctx := context.Background()
			// An address nothing listens on yet.
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := l.Addr().String()
			l.Close()
			resp := n.submitFile("alice", "executable = /bin/echo\nlog = job.log\nqueue\n")
			id := jobqueue.JobID{Cluster: resp.Cluster}
			if err := n.s.Queue().Transition(ctx, id, jobqueue.Running, jobqueue.Ad{"PondClaimId": `"claim-0"`,
				"RemoteHost": `"slot1@exec"`, "PondStartd": strconv.Quote(addr)}); err != nil {
				t.Fatal(err)
			}
			n.restart()
			runCtx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- n.s.Run(runCtx) }()
			t.Cleanup(func() {
				cancel()
				<-done
			})
			restarted := time.Now()
			job := id.String()
			if tc.after > 0 {
				time.Sleep(tc.after)
				l, err := net.Listen("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				mux := http.NewServeMux()
				mux.Handle(wire.PathPrefix+"startd/claiminfo", wire.Handle(func(ctx context.Context, r *wire.ClaimInfoRequest) (*wire.ClaimInfoResponse, error) {
					return &wire.ClaimInfoResponse{Exists: r.ClaimID == "claim-0", Active: true, JobID: job, Machine: "exec"}, nil
				}))
				srv := &http.Server{Handler: mux}
				go srv.Serve(l)
				t.Cleanup(func() { srv.Close() })
				// Well past the claim lease: the job still runs there.
				time.Sleep(2 * grace)
				if st := n.job(job)["JobStatus"]; st != "2" {
					t.Errorf("job %s has JobStatus %s after its startd came back, want 2 (running)", job, st)
				}
				if evs := n.events(); slices.Contains(evs, "JobReconnectFailedEvent "+job) {
					t.Errorf("the job log has a failed reconnection: %v", evs)
				}
				return
			}
			for n.job(job)["JobStatus"] != "1" || !slices.Contains(n.events(), "JobReconnectFailedEvent "+job) {
				if time.Since(restarted) > 15*time.Second {
					t.Fatalf("job %s still has JobStatus %s 15 s after the restart: %v", job, n.job(job)["JobStatus"], n.events())
				}
				time.Sleep(50 * time.Millisecond)
			}
			took := time.Since(restarted)
			if took < grace {
				t.Errorf("job %s requeued %s after the restart, before its claim lease and a renewal interval (%s)", job, took, grace)
			}
			t.Logf("job %s requeued %s after the restart", job, took.Round(time.Millisecond))
		})
	}
}
