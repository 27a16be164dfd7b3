package schedd

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/wire"
)

// TestSubmitterOf: a job counts for its AccountingGroup when it names
// one, else for its owner.
func TestSubmitterOf(t *testing.T) {
	t.Parallel()
	tests := []struct{ ad, want string }{
		{`[Owner = "alice"]`, "alice"},
		{`[AccountingGroup = "physics.alice"]`, "physics.alice"},
		{`[AccountingGroup = "group_cms.prod.bob"]`, "group_cms.prod.bob"},
		{`[AccountingGroup = "nice-user.alice"]`, "nice-user.alice"},
		{`[AccountingGroup = ""]`, "alice"},
		{`[AccountingGroup = "a@b"]`, "alice"},
		{`[AccountingGroup = "a b"]`, "alice"},
		{`[AccountingGroup = 3]`, "alice"},
		{`[AccountingGroup = strcat("physics.", "carol")]`, "physics.carol"},
	}
	for _, tt := range tests {
		ad, err := classad.ParseNewAd(tt.ad)
		if err != nil {
			t.Fatal(err)
		}
		if got := submitterOf("alice", ad); got != tt.want {
			t.Errorf("submitterOf(%s) = %q, want %q", tt.ad, got, tt.want)
		}
	}
}

// TestAccountingGroupSubmitters: the jobs of an accounting group are
// offered, and advertised, as their own submitter's, apart from the
// owner's other jobs.
func TestAccountingGroupSubmitters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newTestSchedd(t)
	job := func(group string) wire.Ad {
		a := wire.Ad{"Owner": `"alice"`, "Cmd": `"/bin/true"`, "JobUniverse": "5", "RequestCpus": "1", "JobStatus": "1"}
		if group != "" {
			a["AcctGroup"] = `"` + group + `"`
			a["AcctGroupUser"] = `"alice"`
			a["AccountingGroup"] = `"` + group + `.alice"`
		}
		return a
	}
	nc, err := s.NewCluster(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(ctx, &wire.SubmitRequest{Cluster: nc.Cluster,
		Jobs: []wire.Ad{job(""), job("physics"), job("physics"), job("cms")}}); err != nil {
		t.Fatal(err)
	}
	for owner, want := range map[string][]string{
		"alice":         {"1.0"},
		"physics.alice": {"1.1", "1.2"},
		"cms.alice":     {"1.3"},
	} {
		resp, err := s.Idle(ctx, &wire.IdleRequest{Owner: owner, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ac := range resp.Clusters {
			got = append(got, ac.IDs...)
		}
		if !cmp.Equal(got, want) {
			t.Errorf("idle jobs of submitter %s: %v, want %v", owner, got, want)
		}
	}
	per := map[string]*jobCounts{"alice": {idle: 4, held: 1}}
	s.mu.Lock()
	splitGroups(per, s.groupCountsLocked())
	s.mu.Unlock()
	want := map[string]jobCounts{"alice": {idle: 1, held: 1}, "physics.alice": {idle: 2}, "cms.alice": {idle: 1}}
	if len(per) != len(want) {
		t.Errorf("submitters %v, want %v", per, want)
	}
	for sub, w := range want {
		if c := per[sub]; c == nil || *c != w {
			t.Errorf("submitter %s: %+v, want %+v", sub, c, w)
		}
	}
}
