package factory_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/pond-htc/pond/condor/collector"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/schedd"
	"github.com/pond-htc/pond/condor/submit"
	"github.com/pond-htc/pond/condor/tools"
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
	cfg := config.New(config.Options{Host: config.HostInfo{FullHostname: "submit.example.org", Hostname: "submit",
		IPAddress: "127.0.0.1", CPUs: 1, MemoryMB: 1024}})
	if err := cfg.ParseInto("test.cfg", []byte("UID_DOMAIN = example.org\nFILESYSTEM_DOMAIN = fs.example.org\n")); err != nil {
		t.Fatal(err)
	}
	s, err := schedd.New(ctx, schedd.Options{Config: cfg, Name: "schedd@submit", Address: "submit.example.org:9618", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	coll := collector.New(collector.Options{})
	var mu sync.Mutex
	var idleReqs []wire.IdleRequest
	mux := http.NewServeMux()
	sp, cp := wire.PathPrefix+"schedd", wire.PathPrefix+"collector"
	sh := http.StripPrefix(sp, s.Handler())
	mux.Handle(sp+"/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == sp+"/idle" {
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
	}))
	mux.Handle(cp+"/", http.StripPrefix(cp, coll.Handler()))
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	addr := srv.Listener.Addr().String()
	dir := t.TempDir()
	f, err := submit.Parse(filepath.Join(dir, "job.sub"), []byte("executable = /bin/true\nrequest_memory = 1G\nqueue 7\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tools.SubmitFile(ctx, wire.NewSchedd(addr, ""), f, submit.Options{Owner: "alice", SubmitDir: dir,
		Env: []string{}, LookupEnv: func(string) (string, bool) { return "", false }}); err != nil {
		t.Fatalf("submit: %v", err)
	}
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
