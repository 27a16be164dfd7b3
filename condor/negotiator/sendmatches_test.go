package negotiator

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/wire"
)

// TestMatchesSentInBoundedRequests: a cycle's matches reach their schedd
// in requests of matchesPerRequest at most, every one once with the
// cycle's epoch; a schedd that fails a request is sent no more of them.
func TestMatchesSentInBoundedRequests(t *testing.T) {
	for _, c := range []struct {
		name     string
		matches  int
		failFrom int // the first request refused, 0 for none
		requests int
	}{
		{"one request", matchesPerRequest, 0, 1},
		{"several", 2*matchesPerRequest + 3, 0, 3},
		{"the schedd fails", 3 * matchesPerRequest, 2, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var sizes []int
			got := map[string]int{}
			mux := http.NewServeMux()
			mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
				var req wire.MatchesRequest
				if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
					http.Error(w, err.Error(), http.StatusBadRequest)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				sizes = append(sizes, len(req.Matches))
				if c.failFrom > 0 && len(sizes) >= c.failFrom {
					http.Error(w, "busy", http.StatusInternalServerError)
					return
				}
				for _, m := range req.Matches {
					if m.Epoch != 7 || m.Slot["Name"] == "" {
						t.Errorf("match %s: epoch %d, slot %v", m.JobID, m.Epoch, m.Slot)
					}
					got[m.JobID]++
				}
				_ = json.NewEncoder(w).Encode(struct{}{})
			})
			srv := httptest.NewServer(mux)
			defer srv.Close()
			addr := srv.Listener.Addr().String()
			n, err := New(Options{Config: config.New(config.Options{}), Name: "cm1", Address: addr, Collector: func() string { return addr }})
			if err != nil {
				t.Fatal(err)
			}
			var matches []Match
			for i := range c.matches {
				ad := classad.NewAd()
				ad.SetString("Name", fmt.Sprintf("slot%d@exec", i))
				matches = append(matches, Match{Schedd: addr, Job: Job{ID: fmt.Sprintf("1.%d", i)},
					Slot: &Slot{Ad: ad, Name: fmt.Sprintf("slot%d@exec", i), Startd: "127.0.0.1:1", ClaimID: fmt.Sprint(i)}})
			}
			n.sendMatches(context.Background(), matches, 7)
			if len(sizes) != c.requests {
				t.Fatalf("%d requests of %v matches, want %d", len(sizes), sizes, c.requests)
			}
			for _, s := range sizes {
				if s > matchesPerRequest {
					t.Errorf("a request of %d matches, more than %d", s, matchesPerRequest)
				}
			}
			want := c.matches
			if c.failFrom > 0 {
				want = (c.failFrom - 1) * matchesPerRequest
			}
			if len(got) != want {
				t.Errorf("%d matches taken, want %d", len(got), want)
			}
			for id, k := range got {
				if k != 1 {
					t.Errorf("match of job %s sent %d times", id, k)
				}
			}
		})
	}
}
