package schedd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/wire"
)

func TestLoadLimits(t *testing.T) {
	t.Parallel()
	cases := []struct {
		knobs string
		want  limits
		err   string
	}{
		{knobs: "", want: limits{maxRunning: 10000, maxSubmitted: 2147483647, maxPerOwner: 100000, maxPerSubmission: 2147483647, startCount: 1, historyBytes: 3 * 20 << 20}},
		{knobs: "MAX_JOBS_RUNNING = 2\nJOB_START_COUNT = 3\nJOB_START_DELAY = 5\nMAX_JOBS_SUBMITTED = 0\n",
			want: limits{maxRunning: 2, maxSubmitted: 0, maxPerOwner: 100000, maxPerSubmission: 2147483647, startCount: 3, startDelay: 5 * time.Second, historyBytes: 3 * 20 << 20}},
		{knobs: "MAX_JOBS_RUNNING = -1\n", err: "MAX_JOBS_RUNNING = -1"},
		{knobs: "JOB_START_COUNT = 0\n", err: "JOB_START_COUNT = 0"},
		{knobs: "MAX_JOBS_PER_OWNER = many\n", err: "MAX_JOBS_PER_OWNER"},
		{knobs: "JOB_START_DELAY = -3\n", err: "JOB_START_DELAY"},
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.knobs, "\n", ";"), func(t *testing.T) {
			l, err := loadLimits(testConfig(t, c.knobs))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("loadLimits = %+v, %v; want an error with %q", l, err, c.err)
				}
				return
			}
			if err != nil || *l != c.want {
				t.Fatalf("loadLimits = %+v, %v; want %+v", l, err, c.want)
			}
		})
	}
}

// TestAdmit checks MAX_JOBS_RUNNING and JOB_START_COUNT per
// JOB_START_DELAY on a sequence of start attempts.
func TestAdmit(t *testing.T) {
	t.Parallel()
	type try struct {
		at      time.Duration // since the start
		running int
		want    bool
	}
	cases := []struct {
		name  string
		knobs string
		tries []try
	}{
		{name: "max running", knobs: "MAX_JOBS_RUNNING = 2", tries: []try{
			{0, 0, true}, {0, 1, true}, {0, 2, false}, {0, 5, false}, {time.Hour, 1, true}}},
		{name: "none at all", knobs: "MAX_JOBS_RUNNING = 0", tries: []try{{0, 0, false}}},
		{name: "rate", knobs: "JOB_START_COUNT = 2\nJOB_START_DELAY = 10", tries: []try{
			{0, 0, true}, {time.Second, 1, true}, {2 * time.Second, 2, false}, {9 * time.Second, 2, false},
			{10 * time.Second, 2, true}, {11 * time.Second, 3, true}, {12 * time.Second, 4, false}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newTestSchedd(t)
			if err := s.Reconfig(testConfig(t, c.knobs)); err != nil {
				t.Fatal(err)
			}
			base := time.Now()
			var now time.Time
			s.now = func() time.Time { return now }
			for i, tr := range c.tries {
				now = base.Add(tr.at)
				s.mu.Lock()
				got := s.admitLocked(tr.running)
				s.mu.Unlock()
				if got != tr.want {
					t.Fatalf("try %d (%+v): admitted %v", i, tr, got)
				}
			}
			s.mu.Lock()
			if s.gate.timer != nil {
				s.gate.timer.Stop()
			}
			s.mu.Unlock()
		})
	}
}

// TestQueueLimits submits over MAX_JOBS_SUBMITTED, MAX_JOBS_PER_OWNER and
// MAX_JOBS_PER_SUBMISSION: the submit is refused whole with HTCondor's
// message, and the queue holds what it held.
func TestQueueLimits(t *testing.T) {
	t.Parallel()
	cases := []struct {
		knobs   string
		before  map[string]int // owner -> jobs queued first
		owner   string
		jobs    int
		refused string
	}{
		{knobs: "MAX_JOBS_SUBMITTED = 3", before: map[string]int{"bob": 2}, owner: "alice", jobs: 2, refused: "MAX_JOBS_SUBMITTED"},
		{knobs: "MAX_JOBS_SUBMITTED = 4", before: map[string]int{"bob": 2}, owner: "alice", jobs: 2},
		{knobs: "MAX_JOBS_SUBMITTED = 0", owner: "alice", jobs: 1, refused: "MAX_JOBS_SUBMITTED"},
		{knobs: "MAX_JOBS_PER_OWNER = 3", before: map[string]int{"alice": 2, "bob": 5}, owner: "alice", jobs: 2, refused: "MAX_JOBS_PER_OWNER"},
		{knobs: "MAX_JOBS_PER_OWNER = 3", before: map[string]int{"bob": 5}, owner: "alice", jobs: 3},
		{knobs: "MAX_JOBS_PER_OWNER = 3", owner: "alice", jobs: 4, refused: "MAX_JOBS_PER_OWNER"},
		{knobs: "MAX_JOBS_PER_SUBMISSION = 2", owner: "alice", jobs: 3, refused: "MAX_JOBS_PER_SUBMISSION"},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%v+%d", c.knobs, c.before, c.jobs), func(t *testing.T) {
			ctx := context.Background()
			s := newTestSchedd(t)
			for o, n := range c.before {
				if _, err := submitN(ctx, s, o, n); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Reconfig(testConfig(t, c.knobs)); err != nil {
				t.Fatal(err)
			}
			before := queued(t, s)
			cluster, err := submitN(ctx, s, c.owner, c.jobs)
			if c.refused == "" {
				if err != nil {
					t.Fatalf("submit refused: %v", err)
				}
				return
			}
			want := "Number of submitted jobs would exceed " + c.refused
			if err == nil || err.Error() != want || !errors.Is(err, wire.ErrConflict) {
				t.Fatalf("submit: %v; want %q", err, want)
			}
			if after := queued(t, s); after != before {
				t.Fatalf("the queue went from %d to %d jobs on a refused submit", before, after)
			}
			// A retry of a committed submit is answered, not refused.
			if err := s.Reconfig(testConfig(t, "")); err != nil {
				t.Fatal(err)
			}
			req := submitReq(cluster, c.owner, c.jobs)
			if _, err := s.Submit(ctx, req); err != nil {
				t.Fatal(err)
			}
			if err := s.Reconfig(testConfig(t, c.knobs)); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Submit(ctx, req); err != nil {
				t.Fatalf("retry of a committed submit refused: %v", err)
			}
		})
	}
}

func submitReq(cluster int, owner string, n int) *wire.SubmitRequest {
	req := &wire.SubmitRequest{Cluster: cluster}
	for i := 0; i < n; i++ {
		req.Jobs = append(req.Jobs, wire.Ad{"Owner": classad.QuoteString(owner), "Cmd": `"/bin/true"`,
			"JobUniverse": "5", "RequestCpus": "1", "JobStatus": "5"})
	}
	return req
}

// submitN submits n held jobs of owner as one cluster.
func submitN(ctx context.Context, s *Schedd, owner string, n int) (int, error) {
	nc, err := s.NewCluster(ctx, nil)
	if err != nil {
		return 0, err
	}
	_, err = s.Submit(ctx, submitReq(nc.Cluster, owner, n))
	return nc.Cluster, err
}

func queued(t *testing.T, s *Schedd) int {
	t.Helper()
	counts, err := s.q.Counts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

func TestSameLimits(t *testing.T) {
	t.Parallel()
	ad := func(limits string) *classad.Ad {
		a := classad.NewAd()
		if limits != "-" {
			a.SetString("ConcurrencyLimits", limits)
		}
		return a
	}
	cases := []struct {
		a, b string
		want bool
	}{
		{"-", "-", true}, {"-", "", true}, {"XSW", "xsw", true}, {"a, b:2", "a,b:2", true},
		{"xsw", "-", false}, {"-", "xsw", false}, {"a", "a:2", false},
	}
	for _, c := range cases {
		if got := sameLimits(ad(c.a), ad(c.b)); got != c.want {
			t.Errorf("sameLimits(%q, %q) = %v", c.a, c.b, got)
		}
	}
	if sameLimits(nil, ad("xsw")) || !sameLimits(nil, ad("-")) {
		t.Error("a claim whose job is unknown may take a job with limits, or no job without")
	}
}

// TestLimitAttrs checks the schedd's ad shows its limits, and when a full
// JOB_START_COUNT window lets jobs start again.
func TestLimitAttrs(t *testing.T) {
	t.Parallel()
	s := newTestSchedd(t)
	if err := s.Reconfig(testConfig(t, "MAX_JOBS_RUNNING = 2\nJOB_START_COUNT = 1\nJOB_START_DELAY = 60")); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	s.now = func() time.Time { return now }
	ad := wire.Ad{}
	s.limitAttrs(ad)
	if ad["MaxJobsRunning"] != "2" || ad[AttrJobsStarted] != "0" || ad[AttrJobStartCount] != "1" || ad[AttrJobStartDelay] != "60" {
		t.Errorf("limits in the ad: %v", ad)
	}
	if _, ok := ad[AttrStartsResume]; ok {
		t.Errorf("%s before any start: %v", AttrStartsResume, ad)
	}
	s.mu.Lock()
	first, second := s.admitLocked(0), s.admitLocked(1)
	if s.gate.timer != nil {
		s.gate.timer.Stop()
	}
	s.mu.Unlock()
	if !first || second {
		t.Fatalf("admitted %v then %v; want one start in the window", first, second)
	}
	ad = wire.Ad{}
	s.limitAttrs(ad)
	if got, want := ad[AttrStartsResume], fmt.Sprint(now.Unix()+60); got != want {
		t.Errorf("%s = %q; want %s", AttrStartsResume, got, want)
	}
	now = now.Add(time.Minute)
	ad = wire.Ad{}
	s.limitAttrs(ad)
	if _, ok := ad[AttrStartsResume]; ok {
		t.Errorf("%s after the window: %v", AttrStartsResume, ad)
	}
}
