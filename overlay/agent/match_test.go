package agent

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/overlay/seaquery"
)

// startMatchSea runs n in-process agents, each answering pond-match queries
// against an ad with Slot = i and Even = (i is even), and waits until the
// first sees them all.
func startMatchSea(t *testing.T, n int) []*Agent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var agents []*Agent
	done := make(chan struct{}, n)
	t.Cleanup(func() {
		cancel()
		for range agents {
			<-done
		}
	})
	for i := range n {
		cfg := &Config{Name: fmt.Sprintf("m%d", i), Bind: "127.0.0.1:0", API: "127.0.0.1:0", GossipProfile: "fast", Role: "node"}
		if i > 0 {
			cfg.Join = []string{agents[0].Sea().GossipAddr()}
		}
		a, err := New(ctx, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		ad := classad.NewAd()
		ad.SetInt("Slot", int64(i))
		ad.SetBool("Even", i%2 == 0)
		a.ServeMatchQueries(ctx, seaquery.NewEvaluator(func() *classad.Ad { return ad }))
		agents = append(agents, a)
		go func() { a.Run(ctx); done <- struct{}{} }()
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, a := range agents {
		for len(a.Sea().Members()) < n {
			if time.Now().After(deadline) {
				t.Fatalf("%s sees %d of %d members after 20s", a.Self().Name, len(a.Sea().Members()), n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return agents
}

func TestMatchQuery(t *testing.T) {
	agents := startMatchSea(t, 4)
	client := NewClient(agents[1].APIAddr())
	tests := []struct {
		name    string
		req     MatchRequest
		want    []string
		wantErr string
	}{
		{name: "best two by rank", req: MatchRequest{Requirements: "TARGET.Slot >= 0", Rank: "TARGET.Slot", K: 2}, want: []string{"m3", "m2"}},
		{name: "only matching members", req: MatchRequest{Requirements: "TARGET.Even", Rank: "TARGET.Slot", K: 10}, want: []string{"m2", "m0"}},
		{name: "no match", req: MatchRequest{Requirements: "TARGET.Slot > 99", K: 1}, want: nil},
		{name: "every match with k 0, ties by name", req: MatchRequest{K: 0}, want: []string{"m0", "m1", "m2", "m3"}},
		{name: "bad requirements", req: MatchRequest{Requirements: "Slot >"}, wantErr: "requirements"},
		{name: "negative timeout", req: MatchRequest{Timeout: -time.Second}, wantErr: "timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.req.Timeout == 0 {
				// The query returns as soon as every member answered;
				// the timeout bounds one that does not.
				tt.req.Timeout = 2 * time.Second
			}
			// Serf disseminates a query by gossip, each node passing it
			// on a few times to random others: in a sea of four it can
			// miss a member. The answer then says so, and the query is
			// asked again.
			var ans *MatchAnswer
			for attempt := 0; attempt < 8; attempt++ {
				var err error
				ans, err = client.Match(context.Background(), tt.req)
				if tt.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
						t.Fatalf("want an error about %q, got %v", tt.wantErr, err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if ans.Members != 4 {
					t.Fatalf("want 4 members expected to answer, got %+v", ans)
				}
				if ans.Complete != (ans.Replies == ans.Members) {
					t.Fatalf("complete %v with %d of %d replies", ans.Complete, ans.Replies, ans.Members)
				}
				if ans.Complete {
					break
				}
				t.Logf("attempt %d: %d of %d members answered", attempt+1, ans.Replies, ans.Members)
			}
			if !ans.Complete {
				t.Fatalf("no complete answer in 8 queries: %+v", ans)
			}
			var got []string
			for _, m := range ans.Matches {
				got = append(got, m.Name)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("matches %v, want %v", got, tt.want)
			}
		})
	}
}
