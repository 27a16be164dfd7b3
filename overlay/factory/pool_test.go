package factory_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/pond-htc/pond/condor/collector"
	"github.com/pond-htc/pond/condor/schedd/scheddtest"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/factory"
)

// TestWirePoolIdleIsAPeek runs a real collector and schedd with idle
// jobs, and checks that the factory reads them all, and that its reads of
// the idle jobs are peeks: the schedd must not take the factory's look
// for its pool's negotiator having considered the jobs, which would let
// them flock to other pools sooner than FLOCK_IDLE_TIME after a real
// cycle.
func TestWirePoolIdleIsAPeek(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := scheddtest.New(t)
	coll := collector.New(collector.Options{})
	var mu sync.Mutex
	var idleReqs []wire.IdleRequest
	sp := wire.PathPrefix + "schedd"
	sh := s.Handler()
	addr := scheddtest.Serve(t, map[string]http.Handler{
		sp: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/idle" {
				body, _ := io.ReadAll(r.Body)
				var req wire.IdleRequest
				if err := json.Unmarshal(body, &req); err != nil {
					t.Errorf("an idle request's body %q: %v", body, err)
				}
				mu.Lock()
				idleReqs = append(idleReqs, req)
				mu.Unlock()
				r.Body = io.NopCloser(bytes.NewReader(body))
			}
			sh.ServeHTTP(w, r)
		}),
		wire.PathPrefix + "collector": coll.Handler(),
	})
	scheddtest.Submit(t, addr, "alice", "executable = /bin/true\nrequest_memory = 1G\nqueue 7\n")
	if _, err := coll.Update(ctx, &wire.UpdateRequest{Type: wire.TypeSubmitter, Source: "submit", Ads: []wire.Ad{{
		"MyType": `"Submitter"`, "Name": `"alice@example.org"`, "Owner": `"alice"`, "PondAddress": strconv.Quote(addr),
		"IdleJobs": "7", "RunningJobs": "0"}}}); err != nil {
		t.Fatal(err)
	}

	subs, err := (&factory.WirePool{CentralManager: func() string { return addr }}).Idle(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(subs) != 1 || len(subs[0].Jobs) != 7 {
		t.Fatalf("the factory read %+v; want alice's 7 idle jobs", subs)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(idleReqs) == 0 {
		t.Fatal("the factory read no idle jobs from the schedd")
	}
	for _, r := range idleReqs {
		if !r.Peek {
			t.Errorf("the factory read the idle jobs as a negotiation cycle (%+v), not as a peek", r)
		}
	}
}
