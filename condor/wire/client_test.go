package wire

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestClientForOtherAPIs checks what a JSON API other than the daemons'
// (an agent's own) needs of Client: any method and path, a base URL, no
// Authorization header without a token, the status and message of an
// error, and a timeout that one call can lift.
func TestClientForOtherAPIs(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(TokenHeader) != "" || r.Header.Get("Content-Type") != "" {
			WriteError(w, http.StatusBadRequest, errors.New("unexpected headers"))
			return
		}
		WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("PUT /v1/tags", func(w http.ResponseWriter, r *http.Request) {
		var tags map[string]string
		if err := ReadJSON(r, &tags); err != nil {
			WriteError(w, http.StatusBadRequest, err)
			return
		}
		WriteJSON(w, http.StatusOK, tags)
	})
	mux.HandleFunc("GET /v1/missing", func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, http.StatusNotFound, errors.New("no such thing"))
	})
	mux.HandleFunc("POST /v1/slow", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(200 * time.Millisecond)
		WriteJSON(w, http.StatusOK, struct{}{})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ctx := context.Background()

	for _, addr := range []string{srv.Listener.Addr().String(), srv.URL, srv.URL + "/"} {
		var h map[string]string
		if err := NewClient(addr, "").Do(ctx, http.MethodGet, "/v1/health", nil, &h); err != nil || h["status"] != "ok" {
			t.Errorf("GET /v1/health at %s: %v, %v", addr, h, err)
		}
	}
	c := NewClient(srv.URL, "")
	var tags map[string]string
	if err := c.Do(ctx, http.MethodPut, "/v1/tags", map[string]string{"a": "1"}, &tags); err != nil || tags["a"] != "1" {
		t.Errorf("PUT /v1/tags: %v, %v", tags, err)
	}
	err := c.Do(ctx, http.MethodGet, "/v1/missing", nil, nil)
	var we *Error
	if !errors.As(err, &we) || we.Status != http.StatusNotFound || we.Msg != "no such thing" {
		t.Errorf("GET /v1/missing: %v, want a 404 *Error with the server's message", err)
	}

	short := c.WithTimeout(50 * time.Millisecond)
	if err := short.Do(ctx, http.MethodPost, "/v1/slow", struct{}{}, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("slow call with a 50 ms timeout: %v, want a deadline error", err)
	}
	if err := short.WithTimeout(0).Do(ctx, http.MethodPost, "/v1/slow", struct{}{}, nil); err != nil {
		t.Errorf("slow call without a timeout: %v", err)
	}
	if short.Timeout != 50*time.Millisecond {
		t.Errorf("WithTimeout changed the client it was called on")
	}
}

func TestLimitBody(t *testing.T) {
	type in struct{ S string }
	h := Handle(func(ctx context.Context, r *in) (int, error) { return len(r.S), nil })
	srv := httptest.NewServer(LimitBody(100, h))
	defer srv.Close()
	c := NewClient(srv.URL, "")
	var n int
	if err := c.Do(context.Background(), http.MethodPost, "/", &in{S: "short"}, &n); err != nil || n != 5 {
		t.Errorf("small body: %d, %v", n, err)
	}
	err := c.Do(context.Background(), http.MethodPost, "/", &in{S: strings.Repeat("x", 200)}, &n)
	var we *Error
	if !errors.As(err, &we) || we.Status != http.StatusRequestEntityTooLarge {
		t.Errorf("large body: %v, want HTTP 413", err)
	}
}

// TestTypedClientPaths pins the endpoint each typed client calls, so that
// nodes of different versions keep understanding each other.
func TestTypedClientPaths(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+strings.TrimPrefix(r.URL.Path, PathPrefix))
		mu.Unlock()
		WriteJSON(w, http.StatusOK, struct{}{})
	}))
	defer srv.Close()
	ctx := context.Background()
	c := NewClient(srv.Listener.Addr().String(), "t")
	calls := []func() error{
		func() error { return c.Collector().Update(ctx, &UpdateRequest{}) },
		func() error { return c.Collector().Invalidate(ctx, &InvalidateRequest{}) },
		func() error { _, err := c.Collector().Query(ctx, &QueryAdsRequest{}); return err },
		func() error { _, err := c.Schedd().NewCluster(ctx); return err },
		func() error { _, err := c.Schedd().Submit(ctx, &SubmitRequest{}); return err },
		func() error { _, err := c.Schedd().Queue(ctx, &QueryJobsRequest{}); return err },
		func() error { _, err := c.Schedd().History(ctx, &QueryJobsRequest{}); return err },
		func() error { _, err := c.Schedd().Act(ctx, &ActRequest{}); return err },
		func() error { _, err := c.Schedd().Idle(ctx, &IdleRequest{}); return err },
		func() error { return c.Schedd().Matches(ctx, &MatchesRequest{}) },
		func() error { return c.Schedd().JobReport(ctx, &JobReport{}) },
		func() error { _, err := c.Schedd().ClaimInfo(ctx, &ClaimInfoRequest{}); return err },
		func() error { _, err := c.Startd().Claim(ctx, &ClaimRequest{}); return err },
		func() error { return c.Startd().Activate(ctx, &ActivateRequest{}) },
		func() error { return c.Startd().Release(ctx, &ReleaseRequest{}) },
		func() error { return c.Startd().Vacate(ctx, &VacateRequest{}) },
		func() error { _, err := c.Startd().ClaimInfo(ctx, &ClaimInfoRequest{}); return err },
		func() error { _, err := c.Startd().Quarantine(ctx, &QuarantineRequest{}); return err },
		func() error { return c.Negotiator().Reschedule(ctx) },
		func() error { _, err := c.Master().Info(ctx); return err },
		func() error { _, err := c.Master().Reconfig(ctx); return err },
	}
	for i, call := range calls {
		if err := call(); err != nil {
			t.Errorf("call %d: %v", i, err)
		}
	}
	want := []string{
		"POST collector/update", "POST collector/invalidate", "POST collector/query",
		"POST schedd/newcluster", "POST schedd/submit", "POST schedd/query", "POST schedd/history", "POST schedd/act", "POST schedd/idle",
		"POST schedd/matches", "POST schedd/jobreport", "POST schedd/claiminfo",
		"POST startd/claim", "POST startd/activate", "POST startd/release", "POST startd/vacate", "POST startd/claiminfo",
		"POST startd/quarantine", "POST negotiator/reschedule", "POST master/info", "POST master/reconfig",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("paths (-want +got)\n%s", diff)
	}
}

// TestFieldNames pins the JSON names of the messages' fields, so that nodes
// of different versions keep understanding each other.
func TestFieldNames(t *testing.T) {
	names := func(v any) string {
		typ := reflect.TypeOf(v)
		var out []string
		for i := range typ.NumField() {
			out = append(out, typ.Field(i).Tag.Get("json"))
		}
		return strings.Join(out, " ")
	}
	for _, tt := range []struct {
		v    any
		want string
	}{
		{UpdateRequest{}, "type source ads private,omitempty lifetime,omitempty partial,omitempty removed,omitempty"},
		{UpdateResponse{}, "partial,omitempty"},
		{InvalidateRequest{}, "type source"},
		{QueryAdsRequest{}, "type constraint,omitempty projection,omitempty with_private,omitempty"},
		{QueryAdsResponse{}, "ads"},
		{NewClusterResponse{}, "cluster owner,omitempty schedd_name uid_domain filesystem_domain"},
		{SubmitRequest{}, "cluster jobs"},
		{SubmitResponse{}, "cluster jobs factory,omitempty"},
		{SubmitFactoryRequest{}, "cluster digest max_materialize,omitempty max_idle,omitempty"},
		{QueryJobsRequest{}, "args,omitempty status,omitempty constraint,omitempty projection,omitempty limit,omitempty"},
		{QueueSummaryResponse{}, "groups factories,omitempty"},
		{QueueFactory{}, "cluster owner total next"},
		{QueueGroup{}, "cluster owner batch_name,omitempty status jobs first_proc last_proc qdate"},
		{QueryJobsResponse{}, "jobs"},
		{Job{}, "id ad"},
		{ActRequest{}, "action args,omitempty constraint,omitempty all,omitempty reason,omitempty"},
		{ActResponse{}, "changed count"},
		{IdleRequest{}, "negotiator,omitempty owner,omitempty significant_attrs,omitempty limit,omitempty peek,omitempty"},
		{IdleResponse{}, "clusters"},
		{IdleCluster{}, "ad ids count"},
		{MatchesRequest{}, "negotiator matches"},
		{Match{}, "job_id slot_name startd claim_id slot epoch,omitempty preempt,omitempty preempts,omitempty"},
		{JobReport{}, "claim_id job_id kind startd slot_name exit_code signal,omitempty hold_reason,omitempty " +
			"hold_code,omitempty hold_subcode,omitempty image_size_kb,omitempty resident_kb,omitempty " +
			"user_cpu,omitempty sys_cpu,omitempty wall_clock,omitempty memory_usage_mb,omitempty cpus_usage,omitempty " +
			"outputs,omitempty received_bytes,omitempty reason,omitempty claim_closed,omitempty checkpoint,omitempty"},
		{ClaimRequest{}, "claim_id job schedd schedd_name epoch,omitempty preempts,omitempty"},
		{ClaimResponse{}, "claim_id slot"},
		{ActivateRequest{}, "claim_id job_id job inputs,omitempty"},
		{TransferHeader{}, "claim_id job_id name,omitempty stream,omitempty size executable,omitempty checkpoint,omitempty"},
		{FileInfo{}, "name,omitempty stream,omitempty size sha256"},
		{ReleaseRequest{}, "claim_id"},
		{VacateRequest{}, "claim_id job_id"},
		{ClaimInfoRequest{}, "claim_id schedd,omitempty schedd_name,omitempty"},
		{ClaimInfoResponse{}, "exists job_id,omitempty active machine,omitempty"},
		{QuarantineRequest{}, "lift,omitempty why,omitempty"},
		{QuarantineResponse{}, "machine quarantined reason,omitempty since,omitzero until,omitzero lifted,omitempty end_time,omitzero"},
		{MasterInfo{}, "name address condor_host daemons start_time"},
	} {
		if got := names(tt.v); got != tt.want {
			t.Errorf("%T: fields %q, want %q", tt.v, got, tt.want)
		}
	}
}

// TestTokenNeverInClear checks that a client without TLS refuses to send
// its token to an address other hosts can reach, before it connects, and
// still sends it to a loopback address.
func TestTokenNeverInClear(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := NewClient("192.0.2.1:9", "secret-token").Do(ctx, http.MethodGet, "/x", nil, nil)
	if !errors.Is(err, ErrTokenInClear) {
		t.Fatalf("a token to 192.0.2.1 in clear: %v, want ErrTokenInClear", err)
	}
	if err := NewClient("192.0.2.1:9", "").Do(ctx, http.MethodGet, "/x", nil, nil); errors.Is(err, ErrTokenInClear) {
		t.Fatalf("a call without a token was refused as one: %v", err)
	}
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("Authorization")
		WriteJSON(w, http.StatusOK, struct{}{})
	}))
	defer srv.Close()
	if err := NewClient(srv.Listener.Addr().String(), "loopback-token").Do(context.Background(), http.MethodGet, "/x", nil, nil); err != nil {
		t.Fatal(err)
	}
	if got != "Bearer loopback-token" {
		t.Fatalf("the loopback server got %q", got)
	}
}

// TestPartialUpdateIgnored checks that a partial update a collector
// answers without taking it as one (a collector that predates partial
// updates, which replaced all of the source's ads) is an error the source
// can tell, while a full update to it is not.
func TestPartialUpdateIgnored(t *testing.T) {
	for _, tt := range []struct {
		name    string
		answer  any
		partial bool
		want    error
	}{
		{"an older collector, partial", struct{}{}, true, ErrPartialIgnored},
		{"an older collector, full", struct{}{}, false, nil},
		{"a collector taking partial updates", UpdateResponse{Partial: true}, true, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				WriteJSON(w, http.StatusOK, tt.answer)
			}))
			defer srv.Close()
			err := NewCollector(srv.Listener.Addr().String(), "").Update(context.Background(),
				&UpdateRequest{Type: TypeMachine, Source: "startd@a", Partial: tt.partial})
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}
