package tools_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pond-htc/pond/condor/tools"
	"github.com/pond-htc/pond/condor/wire"
)

// TestQAgainstEarlierSchedd: a schedd of an earlier version answers only
// the whole query; condor q streams and counts from that answer.
func TestQAgainstEarlierSchedd(t *testing.T) {
	jobs := []wire.Job{
		{ID: "1.0", Ad: wire.Ad{"ClusterId": "1", "ProcId": "0", "Owner": `"alice"`, "JobStatus": "1", "QDate": "100", "JobBatchName": `"b"`}},
		{ID: "1.1", Ad: wire.Ad{"ClusterId": "1", "ProcId": "1", "Owner": `"alice"`, "JobStatus": "1", "QDate": "100", "JobBatchName": `"b"`}},
		{ID: "1.2", Ad: wire.Ad{"ClusterId": "1", "ProcId": "2", "Owner": `"alice"`, "JobStatus": "5", "QDate": "100", "JobBatchName": `"b"`}},
		{ID: "2.0", Ad: wire.Ad{"ClusterId": "2", "ProcId": "0", "Owner": `"bob"`, "JobStatus": "2", "QDate": "200"}},
	}
	mux := http.NewServeMux()
	mux.HandleFunc(wire.PathPrefix+"schedd/query", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(wire.QueryJobsResponse{Jobs: jobs})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	sc := wire.NewSchedd(srv.Listener.Addr().String(), "")
	var streamed []wire.Job
	if err := sc.QueueEach(context.Background(), &wire.QueryJobsRequest{}, func(j wire.Job) error { streamed = append(streamed, j); return nil }); err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(streamed, jobs) {
		t.Errorf("streamed %v, want %v", streamed, jobs)
	}
	groups, _, err := tools.Summary(context.Background(), sc, &wire.QueryJobsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := []wire.QueueGroup{
		{Cluster: 1, Owner: "alice", BatchName: "b", Status: 1, Jobs: 2, FirstProc: 0, LastProc: 1, QDate: 100},
		{Cluster: 1, Owner: "alice", BatchName: "b", Status: 5, Jobs: 1, FirstProc: 2, LastProc: 2, QDate: 100},
		{Cluster: 2, Owner: "bob", Status: 2, Jobs: 1, FirstProc: 0, LastProc: 0, QDate: 200},
	}
	if !cmp.Equal(groups, want) {
		t.Errorf("summary %+v, want %+v", groups, want)
	}
}
