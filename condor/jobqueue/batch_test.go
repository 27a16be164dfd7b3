package jobqueue

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestSubmitClusters commits batches of reserved clusters: a batch one of
// whose clusters fails queues none of its jobs, and a batch sent again
// with the same submissions queues nothing twice.
func TestSubmitClusters(t *testing.T) {
	bad := ads(1, "a")
	bad[0]["Args"] = " " // an attribute without a value, refused by the store
	cases := []struct {
		name    string
		batch   func(c []int) []ClusterSubmit // c are 4 reserved clusters
		wantErr error
		wantMsg string
		jobs    int // queued after the batch
	}{
		{name: "all committed", jobs: 5, batch: func(c []int) []ClusterSubmit {
			return []ClusterSubmit{{c[0], ads(2, "a"), "s0"}, {c[1], ads(3, "b"), "s1"}}
		}},
		{name: "last cluster's job is bad", wantMsg: "attribute Args has no value", batch: func(c []int) []ClusterSubmit {
			return []ClusterSubmit{{c[0], ads(2, "a"), "s0"}, {c[1], ads(3, "b"), "s1"}, {c[2], bad, "s2"}}
		}},
		{name: "last cluster was never reserved", wantErr: ErrNoCluster, wantMsg: "cluster 99", batch: func(c []int) []ClusterSubmit {
			return []ClusterSubmit{{c[0], ads(2, "a"), "s0"}, {99, ads(1, "b"), "s1"}}
		}},
		{name: "a cluster without jobs", wantMsg: "zero jobs", batch: func(c []int) []ClusterSubmit {
			return []ClusterSubmit{{c[0], ads(2, "a"), "s0"}, {c[1], nil, "s1"}}
		}},
		{name: "a cluster twice", wantErr: ErrClusterCommitted, wantMsg: "cluster 2", batch: func(c []int) []ClusterSubmit {
			return []ClusterSubmit{{c[1], ads(2, "a"), "s0"}, {c[1], ads(1, "a"), "s1"}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			q := openT(t)
			c, err := q.NewClusters(ctx, 4)
			if err != nil || len(c) != 4 {
				t.Fatalf("NewClusters(4) = %v, %v", c, err)
			}
			batch := tc.batch(c)
			retry, err := q.SubmitClusters(ctx, batch)
			if n := countJobs(t, q); n != tc.jobs {
				t.Fatalf("%d jobs queued after the batch (err %v), want %d", n, err, tc.jobs)
			}
			if tc.wantMsg != "" || tc.wantErr != nil {
				if err == nil || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) || !strings.Contains(err.Error(), tc.wantMsg) {
					t.Fatalf("err = %v, want %v %q", err, tc.wantErr, tc.wantMsg)
				}
				return
			}
			if err != nil || len(retry) != len(batch) || retry[0] || retry[1] {
				t.Fatalf("SubmitClusters = %v, %v", retry, err)
			}
			// The answer was lost: the same batch again is a retry.
			retry, err = q.SubmitClusters(ctx, batch)
			if err != nil || !retry[0] || !retry[1] {
				t.Fatalf("the batch again: %v, %v; want retries", retry, err)
			}
			if n := countJobs(t, q); n != tc.jobs {
				t.Fatalf("%d jobs queued after the batch again, want %d", n, tc.jobs)
			}
			// A retry with a cluster changed, or one more, commits none.
			again := append(append([]ClusterSubmit(nil), batch...), ClusterSubmit{c[3], ads(1, "a"), "s3"})
			again[0].Submission = "other"
			if _, err := q.SubmitClusters(ctx, again); !errors.Is(err, ErrClusterCommitted) {
				t.Fatalf("a changed batch: %v, want ErrClusterCommitted", err)
			}
			if n := countJobs(t, q); n != tc.jobs {
				t.Fatalf("%d jobs queued after a changed batch, want %d", n, tc.jobs)
			}
			// A reserved cluster never submitted is not in the queue.
			got, err := q.Query(ctx, ClusterJobs(c[2]), nil)
			if err != nil || len(got) != 0 {
				t.Fatalf("reserved cluster %d: %v, %v; want no jobs", c[2], got, err)
			}
		})
	}
	if _, err := openT(t).NewClusters(context.Background(), 0); err == nil {
		t.Fatal("NewClusters(0) reserved clusters")
	}
}

func countJobs(t *testing.T, q *Queue) int {
	t.Helper()
	counts, err := q.Counts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}
