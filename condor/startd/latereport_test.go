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
	c := claimAndActivate(t, s, pclaim, srv.Listener.Addr().String(), job, "1.0")
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

// TestClaimIdleFromItsReportsAnswer runs a job whose final report the
// schedd answers later than CLAIM_IDLE_TIMEOUT, as a schedd whose queue is
// busy does. The claim is not idle while its job's end is being reported,
// nor for CLAIM_IDLE_TIMEOUT from the job's end, but from the schedd's
// answer: the schedd starts the claim's next job only once it has applied
// the report, and a claim released meanwhile refuses that job.
func TestClaimIdleFromItsReportsAnswer(t *testing.T) {
	reported := make(chan struct{}) // the first job's final report arrived
	answer := make(chan struct{})   // the schedd answers it
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rep wire.JobReport
		if err := json.NewDecoder(r.Body).Decode(&rep); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if rep.Kind != wire.ReportUpdate && rep.JobID == "1.0" {
			close(reported)
			<-answer
		}
		w.Write([]byte("{}"))
	}))
	t.Cleanup(srv.Close)
	var once sync.Once
	free := func() { once.Do(func() { close(answer) }) }
	t.Cleanup(free) // before the server closes: its handler waits on it

	s := newStartd(t, map[string]string{"NUM_CPUS": "1", "MEMORY": "100", "STARTER_POLL_INTERVAL": "0.05s",
		"CLAIM_IDLE_TIMEOUT": "1", "STARTER_REPORT_TIMEOUT": "30"})
	t.Cleanup(s.shutdown)
	ctx := context.Background()
	pclaim := partitionableClaim(t, s)
	job := wire.Ad{"Owner": `"alice"`, "RequestCpus": "1", "RequestMemory": "10", "RequestDisk": "10", "Requirements": "true",
		"Cmd": `"/bin/true"`}
	c := claimAndActivate(t, s, pclaim, srv.Listener.Addr().String(), job, "1.0")
	select {
	case <-reported:
	case <-time.After(10 * time.Second):
		t.Fatal("no final report of the first job after 10 s")
	}
	held := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.claims[c.ClaimID] != nil
	}
	// Longer than CLAIM_IDLE_TIMEOUT from the job's end, its report
	// unanswered.
	time.Sleep(1500 * time.Millisecond)
	s.releaseIdleClaims()
	if !held() {
		t.Fatal("the claim was released as idle while its job's end was being reported")
	}
	free()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		reporting := s.claims[c.ClaimID] != nil && s.claims[c.ClaimID].reporting
		s.mu.Unlock()
		if !reporting || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.releaseIdleClaims()
	if !held() {
		t.Fatal("the claim was released as idle as soon as its job's report was answered")
	}
	if _, err := s.Activate(ctx, &wire.ActivateRequest{ClaimID: c.ClaimID, JobID: "1.1", Job: job}); err != nil {
		t.Errorf("the claim's next job, activated once the report was answered: %v", err)
	}
}
