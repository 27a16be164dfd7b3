package startd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/wire"
)

// TestLateRefusalKeepsLaterJobsClaim runs two jobs one after the other on
// one claim. The schedd answers the first job's final report later than
// the starter waits (STARTER_REPORT_TIMEOUT); meanwhile the claim runs the
// second job, and the report sent again is refused, as a schedd that has
// given the claim the next job refuses a report of the one before. The
// refusal says nothing of the second job: its claim holds, and its end is
// reported as an exit.
func TestLateRefusalKeepsLaterJobsClaim(t *testing.T) {
	var mu sync.Mutex
	finals := map[string][]string{} // job -> the kinds of its final reports
	gaveUp := make(chan struct{})   // the starter gave up on 1.0's first report
	second := make(chan struct{})   // 1.1 runs
	done := make(chan struct{})     // 1.1's end reported
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rep wire.JobReport
		if err := json.NewDecoder(r.Body).Decode(&rep); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if rep.Kind == wire.ReportUpdate {
			w.Write([]byte("{}"))
			return
		}
		mu.Lock()
		finals[rep.JobID] = append(finals[rep.JobID], rep.Kind)
		n := len(finals[rep.JobID])
		mu.Unlock()
		switch {
		case rep.JobID == "1.0" && n == 1:
			<-r.Context().Done()
			close(gaveUp)
			return
		case rep.JobID == "1.0":
			<-second
			wire.WriteError(w, http.StatusNotFound, fmt.Errorf("%w: no claim slot1@exec for job 1.0", wire.ErrNotFound))
			return
		case rep.JobID == "1.1" && n == 1:
			close(done)
		}
		w.Write([]byte("{}"))
	}))
	t.Cleanup(srv.Close)

	s := newStartd(t, map[string]string{"NUM_CPUS": "1", "MEMORY": "100", "STARTER_POLL_INTERVAL": "0.05s",
		"STARTER_REPORT_TIMEOUT": "0.3s", "REPORT_RETRY_TIME": "10"})
	t.Cleanup(s.shutdown)
	ctx := context.Background()
	pclaim := partitionableClaim(t, s)
	job := wire.Ad{"Owner": `"alice"`, "RequestCpus": "1", "RequestMemory": "10", "RequestDisk": "10", "Requirements": "true",
		"Cmd": `"/bin/sleep"`, "Arguments": `"0.5"`}
	c, err := s.Claim(ctx, &wire.ClaimRequest{ClaimID: pclaim, Job: job, Schedd: srv.Listener.Addr().String(), ScheddName: "schedd"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Activate(ctx, &wire.ActivateRequest{ClaimID: c.ClaimID, JobID: "1.0", Job: job}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-gaveUp:
	case <-time.After(10 * time.Second):
		t.Fatal("the starter did not give up on the first job's report after 10 s")
	}
	if _, err := s.Activate(ctx, &wire.ActivateRequest{ClaimID: c.ClaimID, JobID: "1.1", Job: job}); err != nil {
		t.Fatalf("the claim's second job: %v", err)
	}
	close(second)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("no report of the second job's end after 10 s")
	}
	s.mu.Lock()
	held := s.claims[c.ClaimID] != nil
	s.mu.Unlock()
	if !held {
		t.Error("the startd let the claim go on an earlier job's refused report while the claim ran a later job")
	}
	mu.Lock()
	defer mu.Unlock()
	if got := finals["1.1"]; len(got) != 1 || got[0] != wire.ReportExited {
		t.Errorf("the second job's final reports %v, want one exited", got)
	}
}
