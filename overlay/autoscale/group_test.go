package autoscale

import (
	"context"
	"testing"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/overlay/query"

	"github.com/pond-htc/pond/overlay/api"
)

func jobAd(t testing.TB, src string) *classad.Ad {
	t.Helper()
	ad, err := classad.ParseOldAd(src)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	return ad
}

const (
	bigJob   = "Requirements = (TARGET.Memory >= RequestMemory) && Site == \"sea\"\nRequestMemory = 2048\nRank = TARGET.Memory\nOwner = \"alice\"\nCmd = \"/bin/a\"\n"
	bigJob2  = "Requirements = (TARGET.Memory >= RequestMemory) && Site == \"sea\"\nRequestMemory = 2048\nRank = TARGET.Memory\nOwner = \"bob\"\nCmd = \"/bin/b\"\n"
	smallJob = "Requirements = (TARGET.Memory >= RequestMemory) && Site == \"sea\"\nRequestMemory = 512\nRank = TARGET.Memory\nOwner = \"alice\"\n"
	otherReq = "Requirements = HasGPU =?= true\nRequestMemory = 2048\nOwner = \"alice\"\n"
)

func TestGroupJobs(t *testing.T) {
	tests := []struct {
		name  string
		jobs  []Job
		sizes [][2]int // idle, running per group, in order
	}{
		{name: "alike jobs form one group whatever their other attributes", jobs: []Job{
			{ID: "1.0", Ad: jobAd(t, bigJob)}, {ID: "1.1", Ad: jobAd(t, bigJob2)}, {ID: "1.2", Ad: jobAd(t, bigJob), Running: true}},
			sizes: [][2]int{{2, 1}}},
		{name: "a different request is another group", jobs: []Job{
			{ID: "1.0", Ad: jobAd(t, bigJob)}, {ID: "2.0", Ad: jobAd(t, smallJob)}, {ID: "2.1", Ad: jobAd(t, smallJob)}},
			sizes: [][2]int{{2, 0}, {1, 0}}},
		{name: "different requirements are another group", jobs: []Job{
			{ID: "1.0", Ad: jobAd(t, bigJob)}, {ID: "3.0", Ad: jobAd(t, otherReq)}},
			sizes: [][2]int{{1, 0}, {1, 0}}},
		{name: "no jobs", sizes: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gs := groupJobs(tt.jobs)
			if len(gs) != len(tt.sizes) {
				t.Fatalf("%d groups, want %d", len(gs), len(tt.sizes))
			}
			for i, g := range gs {
				if got := [2]int{g.idle, g.running}; got != tt.sizes[i] {
					t.Errorf("group %d: idle, running = %v, want %v", i, got, tt.sizes[i])
				}
			}
		})
	}
}

// TestQueryExpr checks that a job's Requirements and Rank, shipped alone in
// a tree query, still see the job attributes they refer to.
func TestQueryExpr(t *testing.T) {
	job := jobAd(t, "Requirements = (TARGET.Memory >= RequestMemory) && (TARGET.Disk >= MY.RequestDisk) && Site == \"sea\"\n"+
		"RequestMemory = Base * 2\nBase = 1024\nRequestDisk = 100\nRank = TARGET.Memory - RequestMemory\n")
	q := &api.Query{Requirements: queryExpr(job, "Requirements"), Rank: queryExpr(job, "Rank")}
	tests := []struct {
		name    string
		machine string
		match   bool
		rank    float64
	}{
		{"enough memory", "Requirements = true\nMemory = 4096\nDisk = 1000\nSite = \"sea\"\n", true, 2048},
		{"too little memory", "Requirements = true\nMemory = 1024\nDisk = 1000\nSite = \"sea\"\n", false, 0},
		{"another site", "Requirements = true\nMemory = 4096\nDisk = 1000\nSite = \"campus\"\n", false, 0},
		{"no disk", "Requirements = true\nMemory = 4096\nSite = \"sea\"\n", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := jobAd(t, tt.machine)
			res, ok, err := query.NewEvaluator(func() *classad.Ad { return m }).Match(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tt.match || (ok && res.Rank != tt.rank) {
				t.Fatalf("match=%v rank=%v, want %v %v (query %s)", ok, res.Rank, tt.match, tt.rank, q.Requirements)
			}
			if direct := classad.Match(job, m); direct != ok {
				t.Fatalf("the query says %v, matching the job ad itself says %v", ok, direct)
			}
		})
	}
	if got := queryExpr(jobAd(t, "Requirements = TARGET.Cpus > 1\n"), "Requirements"); got != "TARGET.Cpus > 1" {
		t.Fatalf("self-contained expression rewritten: %s", got)
	}
	if got := queryExpr(jobAd(t, "Owner = \"a\"\n"), "Rank"); got != "" {
		t.Fatalf("missing Rank gave %q", got)
	}
}
