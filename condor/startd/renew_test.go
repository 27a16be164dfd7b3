package startd

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/wire"
)

// TestStuckRenewalDoesNotHoldUpTheNext runs a job whose schedd never
// answers the first renewal of its claim, as when a partition heals while
// that request's connection waits out TCP's retransmission backoff, and
// answers every later one at once. The next renewals go out on their own
// connections and keep the lease: the job runs to its end, reported as
// exited, not killed when the lease would have run out.
func TestStuckRenewalDoesNotHoldUpTheNext(t *testing.T) {
	stuck := make(chan struct{})
	var mu sync.Mutex
	var updates, answered int
	var final *wire.JobReport
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rep wire.JobReport
		if err := json.NewDecoder(r.Body).Decode(&rep); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		first := false
		if rep.Kind == wire.ReportUpdate {
			updates++
			first = updates == 1
		} else if final == nil {
			final = &rep
			close(done)
		}
		mu.Unlock()
		if first {
			select {
			case <-stuck:
			case <-r.Context().Done():
			}
			return
		}
		mu.Lock()
		answered++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte("{}"))
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stuck) })

	// Renewed every 0.2 s, lost after 1 s without a renewal.
	s := newStartd(t, map[string]string{"NUM_CPUS": "1", "MEMORY": "100",
		"ALIVE_INTERVAL": "0.2s", "MAX_CLAIM_ALIVES_MISSED": "5", "STARTER_POLL_INTERVAL": "0.05s"})
	t.Cleanup(s.shutdown)
	var pclaim string
	for id, sl := range s.claims {
		if sl.partitionable {
			pclaim = id
		}
	}
	job := wire.Ad{"Owner": `"alice"`, "RequestCpus": "1", "RequestMemory": "10", "RequestDisk": "10", "Requirements": "true",
		"Cmd": `"/bin/sleep"`, "Arguments": `"2"`}
	claimAndActivate(t, s, pclaim, srv.Listener.Addr().String(), job, "1.0")
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("no report of the job's end after 10 s")
	}
	mu.Lock()
	defer mu.Unlock()
	if final.Kind != wire.ReportExited || final.ExitCode != 0 {
		t.Errorf("the job ended %s (exit %d, signal %d), want exited 0: its lease ran out behind the stuck renewal",
			final.Kind, final.ExitCode, final.Signal)
	}
	if answered < 2 {
		t.Errorf("%d renewals answered during a 2 s job renewed every 0.2 s", answered)
	}
}
