package schedd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// batchOf is a SubmitBatchRequest of the reserved clusters, with sizes[i]
// held jobs of owners[i] in cluster i ("" leaves the Owner out).
func batchOf(clusters []int, owners []string, sizes []int) *wire.SubmitBatchRequest {
	req := &wire.SubmitBatchRequest{}
	for i, n := range sizes {
		r := submitReq(clusters[i], owners[i], n)
		if owners[i] == "" {
			for _, j := range r.Jobs {
				delete(j, "Owner")
			}
		}
		req.Clusters = append(req.Clusters, *r)
	}
	return req
}

func asUser(name string, scopes ...auth.Scope) context.Context {
	return auth.WithClaims(context.Background(), &auth.Claims{Subject: name, Scopes: scopes})
}

// TestSubmitBatch commits batches of clusters on a schedd over a real
// job queue: a batch is queued whole or not at all, the queue limits
// count its jobs together, a batch sent again queues nothing twice, and
// a caller gets no more than Submit gives it.
func TestSubmitBatch(t *testing.T) {
	t.Parallel()
	alice := asUser("alice", auth.Read, auth.Write)
	admin := asUser("condor", auth.Read, auth.Write, auth.Administrator)
	cases := []struct {
		name    string
		knobs   string
		before  map[string]int // owner -> jobs queued first
		ctx     context.Context
		owners  []string
		sizes   []int
		change  func(s *Schedd, req *wire.SubmitBatchRequest)
		wantErr error
		wantMsg string
	}{
		{name: "three clusters", ctx: alice, owners: []string{"", "alice", ""}, sizes: []int{1, 2, 3}},
		{name: "an administrator for others", ctx: admin, owners: []string{"bob", "carol"}, sizes: []int{1, 2}},
		{name: "open pool", ctx: context.Background(), owners: []string{"bob", "carol"}, sizes: []int{1, 2}},
		{name: "another owner in the last cluster", ctx: alice, owners: []string{"", "alice", "bob"}, sizes: []int{1, 1, 1},
			wantErr: wire.ErrForbidden, wantMsg: `names Owner "bob" but the caller is "alice"`},
		{name: "no Owner in an open pool", ctx: context.Background(), owners: []string{"bob", ""}, sizes: []int{1, 1},
			wantErr: wire.ErrBadRequest, wantMsg: "has no Owner"},
		{name: "a job made for another cluster", ctx: alice, owners: []string{"", ""}, sizes: []int{1, 1},
			change:  func(_ *Schedd, r *wire.SubmitBatchRequest) { r.Clusters[1].Jobs[0]["ClusterId"] = "77" },
			wantErr: wire.ErrBadRequest, wantMsg: "was made for cluster 77"},
		{name: "an attribute the store refuses", ctx: alice, owners: []string{"", "", ""}, sizes: []int{2, 2, 2},
			change:  func(_ *Schedd, r *wire.SubmitBatchRequest) { r.Clusters[2].Jobs[1]["Args"] = " " },
			wantMsg: "attribute Args has no value"},
		{name: "a cluster never reserved", ctx: alice, owners: []string{"", ""}, sizes: []int{1, 1},
			change:  func(_ *Schedd, r *wire.SubmitBatchRequest) { r.Clusters[1].Cluster = 999 },
			wantErr: wire.ErrNotFound, wantMsg: "cluster 999"},
		{name: "a cluster twice", ctx: alice, owners: []string{"", ""}, sizes: []int{1, 1},
			change:  func(_ *Schedd, r *wire.SubmitBatchRequest) { r.Clusters[1].Cluster = r.Clusters[0].Cluster },
			wantErr: wire.ErrBadRequest, wantMsg: "twice in the batch"},
		{name: "a cluster another submit committed", ctx: alice, owners: []string{"", ""}, sizes: []int{1, 1},
			change: func(s *Schedd, r *wire.SubmitBatchRequest) {
				if _, err := s.Submit(alice, submitReq(r.Clusters[1].Cluster, "alice", 3)); err != nil {
					panic(err)
				}
			},
			wantErr: wire.ErrConflict, wantMsg: "already committed"},
		{name: "MAX_JOBS_SUBMITTED over the batch", knobs: "MAX_JOBS_SUBMITTED = 6", before: map[string]int{"bob": 2},
			ctx: alice, owners: []string{"", "", ""}, sizes: []int{2, 1, 2}, wantErr: wire.ErrConflict, wantMsg: "MAX_JOBS_SUBMITTED"},
		{name: "MAX_JOBS_SUBMITTED just met", knobs: "MAX_JOBS_SUBMITTED = 7", before: map[string]int{"bob": 2},
			ctx: alice, owners: []string{"", "", ""}, sizes: []int{2, 1, 2}},
		{name: "MAX_JOBS_PER_OWNER over the batch", knobs: "MAX_JOBS_PER_OWNER = 4", before: map[string]int{"alice": 1, "bob": 5},
			ctx: alice, owners: []string{"", "", ""}, sizes: []int{1, 1, 2}, wantErr: wire.ErrConflict, wantMsg: "MAX_JOBS_PER_OWNER"},
		{name: "MAX_JOBS_PER_OWNER of each owner", knobs: "MAX_JOBS_PER_OWNER = 3", before: map[string]int{"bob": 2},
			ctx: admin, owners: []string{"alice", "bob", "alice"}, sizes: []int{2, 2, 1}, wantErr: wire.ErrConflict, wantMsg: "MAX_JOBS_PER_OWNER"},
		{name: "MAX_JOBS_PER_SUBMISSION per cluster", knobs: "MAX_JOBS_PER_SUBMISSION = 2",
			ctx: alice, owners: []string{"", "", ""}, sizes: []int{2, 2, 2}},
		{name: "MAX_JOBS_PER_SUBMISSION over in one cluster", knobs: "MAX_JOBS_PER_SUBMISSION = 2",
			ctx: alice, owners: []string{"", "", ""}, sizes: []int{2, 3, 1}, wantErr: wire.ErrConflict, wantMsg: "MAX_JOBS_PER_SUBMISSION"},
		{
			// A committed cluster repeated in a batch does not make its
			// new clusters a retry that the limits let through.
			name: "a committed cluster repeated with new ones", knobs: "MAX_JOBS_PER_OWNER = 3",
			ctx: alice, owners: []string{"", "", ""}, sizes: []int{1, 2, 2},
			change: func(s *Schedd, r *wire.SubmitBatchRequest) {
				if _, err := s.Submit(alice, &wire.SubmitRequest{Cluster: r.Clusters[0].Cluster, Jobs: r.Clusters[0].Jobs}); err != nil {
					panic(err)
				}
			},
			wantErr: wire.ErrConflict, wantMsg: "MAX_JOBS_PER_OWNER"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := c.ctx
			s := newTestSchedd(t)
			for o, n := range c.before {
				if _, err := submitN(context.Background(), s, o, n); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Reconfig(testConfig(t, c.knobs)); err != nil {
				t.Fatal(err)
			}
			// The schedd is not running: its wake-ups are counted here.
			s.wake = make(chan struct{}, 100)
			nc, err := s.NewClusters(ctx, &wire.NewClustersRequest{Count: len(c.sizes) + 1})
			if err != nil {
				t.Fatal(err)
			}
			req := batchOf(nc.Clusters, c.owners, c.sizes)
			if c.change != nil {
				c.change(s, req)
			}
			before := queued(t, s)
			wakes := len(s.wake)
			resp, err := s.SubmitBatch(ctx, req)
			if c.wantMsg != "" {
				if err == nil || (c.wantErr != nil && !errors.Is(err, c.wantErr)) || !strings.Contains(err.Error(), c.wantMsg) {
					t.Fatalf("SubmitBatch: %v; want %v %q", err, c.wantErr, c.wantMsg)
				}
				if after := queued(t, s); after != before {
					t.Fatalf("the queue went from %d to %d jobs on a refused batch", before, after)
				}
				return
			}
			if err != nil {
				t.Fatalf("SubmitBatch: %v", err)
			}
			total := 0
			for i, n := range c.sizes {
				total += n
				if resp.Clusters[i].Cluster != nc.Clusters[i] || resp.Clusters[i].Jobs != n {
					t.Fatalf("cluster %d answered %+v, want %d jobs of %d", i, resp.Clusters[i], n, nc.Clusters[i])
				}
				jobs, err := s.q.Query(context.Background(), jobqueue.ClusterJobs(nc.Clusters[i]), []string{"Owner"})
				if err != nil || len(jobs) != n {
					t.Fatalf("cluster %d holds %d jobs (%v), want %d", nc.Clusters[i], len(jobs), err, n)
				}
				want := c.owners[i]
				if want == "" {
					want = "alice"
				}
				if jobs[0].Owner != want {
					t.Fatalf("cluster %d is owned by %q, want %q", nc.Clusters[i], jobs[0].Owner, want)
				}
			}
			if got := queued(t, s) - before; got != total {
				t.Fatalf("the batch queued %d jobs, want %d", got, total)
			}
			if got := len(s.wake) - wakes; got != 1 {
				t.Fatalf("a batch of %d clusters woke the schedd %d times, want once", len(c.sizes), got)
			}
			// The cluster reserved and never submitted is not queued.
			spare := nc.Clusters[len(nc.Clusters)-1]
			if jobs, err := s.q.Query(context.Background(), jobqueue.ClusterJobs(spare), nil); err != nil || len(jobs) != 0 {
				t.Fatalf("reserved cluster %d holds %v (%v)", spare, jobs, err)
			}
			// The answer was lost: the same batch again (the limits met
			// now) gets the same answer and queues nothing.
			again, err := s.SubmitBatch(ctx, batchOf(nc.Clusters, c.owners, c.sizes))
			if err != nil || fmt.Sprint(again) != fmt.Sprint(resp) {
				t.Fatalf("the batch again: %+v, %v; want %+v", again, err, resp)
			}
			if got := queued(t, s) - before; got != total {
				t.Fatalf("the batch sent twice queued %d jobs, want %d", got, total)
			}
		})
	}
}

// TestSubmitBatchBounds refuses batches of no cluster or of more than
// wire.MaxSubmitBatch, saying how many it takes.
func TestSubmitBatchBounds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestSchedd(t)
	for _, n := range []int{0, -1, wire.MaxSubmitBatch + 1} {
		if _, err := s.NewClusters(ctx, &wire.NewClustersRequest{Count: n}); !errors.Is(err, wire.ErrBadRequest) ||
			!strings.Contains(err.Error(), fmt.Sprintf("from 1 to %d", wire.MaxSubmitBatch)) {
			t.Errorf("NewClusters(%d): %v", n, err)
		}
	}
	nc, err := s.NewClusters(ctx, &wire.NewClustersRequest{Count: wire.MaxSubmitBatch})
	if err != nil || len(nc.Clusters) != wire.MaxSubmitBatch {
		t.Fatalf("NewClusters(%d): %v", wire.MaxSubmitBatch, err)
	}
	clusters := append(nc.Clusters, nc.Clusters[len(nc.Clusters)-1]+1)
	owners := make([]string, len(clusters))
	sizes := make([]int, len(clusters))
	for i := range clusters {
		owners[i], sizes[i] = "alice", 1
	}
	for _, req := range []*wire.SubmitBatchRequest{{}, batchOf(clusters, owners, sizes)} {
		_, err := s.SubmitBatch(ctx, req)
		if !errors.Is(err, wire.ErrBadRequest) || !strings.Contains(err.Error(), fmt.Sprintf("a batch of %d clusters: from 1 to %d", len(req.Clusters), wire.MaxSubmitBatch)) {
			t.Errorf("SubmitBatch of %d clusters: %v", len(req.Clusters), err)
		}
	}
	if n := queued(t, s); n != 0 {
		t.Fatalf("refused batches queued %d jobs", n)
	}
	// The largest batch is taken.
	if _, err := s.SubmitBatch(ctx, batchOf(clusters[:wire.MaxSubmitBatch], owners[:wire.MaxSubmitBatch], sizes[:wire.MaxSubmitBatch])); err != nil {
		t.Fatal(err)
	}
	if n := queued(t, s); n != wire.MaxSubmitBatch {
		t.Fatalf("a batch of %d clusters queued %d jobs", wire.MaxSubmitBatch, n)
	}
}
