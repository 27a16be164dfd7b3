package schedd_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/wire"
)

// FuzzQuery checks how the schedd reads condor_q's and condor_history's
// arguments (cluster, cluster.proc or owner, here separated by spaces) and
// constraint: whatever they are, it answers either a bad request or jobs
// of its own, each once.
func FuzzQuery(f *testing.F) {
	n := start(f)
	n.submitFile("alice", threeJobs)
	n.submitFile("bob", "executable = /bin/true\nqueue 2\n")
	if _, err := n.c.Act(context.Background(), &wire.ActRequest{Action: wire.ActRemove, Args: []string{"2.1"}}); err != nil {
		f.Fatal(err)
	}
	queries := []struct {
		name string
		run  func(context.Context, *wire.QueryJobsRequest) (*wire.QueryJobsResponse, error)
		jobs map[string]bool // those it may answer
	}{
		{"query", n.s.QueryJobs, map[string]bool{"1.0": true, "1.1": true, "1.2": true, "2.0": true}},
		{"history", n.s.History, map[string]bool{"2.1": true}},
	}
	for _, seed := range [][2]string{
		{"", ""}, {"1", ""}, {"1.2 bob", "ProcId > 0"}, {"alice", `Owner == "alice" && JobStatus == 1`},
		{"0", ""}, {"1.x", ""}, {"-1", ""}, {"1.-1", ""}, {"99999999999999999999", ""}, {`"bob"`, ""}, {"a  b", ""},
		{"", "Owner =="}, {"", "ProcId / 0"}, {"", `regexp("(", Owner)`}, {"", "Out =?= undefined"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, args, constraint string) {
		var argv []string
		if args != "" {
			argv = strings.Split(args, " ")
		}
		req := &wire.QueryJobsRequest{Args: argv, Constraint: constraint}
		for _, q := range queries {
			resp, err := q.run(context.Background(), req)
			if err != nil {
				if !errors.Is(err, wire.ErrBadRequest) {
					t.Fatalf("%s %q %q: %v, want a bad request or jobs", q.name, argv, constraint, err)
				}
				continue
			}
			seen := map[string]bool{}
			for _, j := range resp.Jobs {
				if seen[j.ID] {
					t.Fatalf("%s %q %q: job %s twice", q.name, argv, constraint, j.ID)
				}
				seen[j.ID] = true
				if !q.jobs[j.ID] {
					t.Fatalf("%s %q %q: job %s is not one of the schedd's", q.name, argv, constraint, j.ID)
				}
			}
		}
	})
}
