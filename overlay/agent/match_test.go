package agent

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/api"
)

// startMatchSea runs n in-process agents, each answering pond-match queries
// against its machine ad, with Slot = i and Even = (i is even), and waits
// until every agent sees them all.
func startMatchSea(t *testing.T, n int) []*Agent {
	t.Helper()
	var cfgs []*Config
	for i := range n {
		cfgs = append(cfgs, &Config{Name: fmt.Sprintf("m%d", i), Role: "node", Attrs: map[string]any{"Slot": int64(i), "Even": i%2 == 0}})
	}
	agents := startAgents(t, cfgs...)
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
	t.Parallel()
	agents := startMatchSea(t, 4)
	client := api.NewClient(agents[1].APIAddr())
	tests := []struct {
		name    string
		req     api.MatchRequest
		want    []string
		wantErr string
	}{
		{name: "best two by rank", req: api.MatchRequest{Requirements: "TARGET.Slot >= 0", Rank: "TARGET.Slot", K: 2}, want: []string{"m3", "m2"}},
		{name: "only matching members", req: api.MatchRequest{Requirements: "TARGET.Even", Rank: "TARGET.Slot", K: 10}, want: []string{"m2", "m0"}},
		{name: "no match", req: api.MatchRequest{Requirements: "TARGET.Slot > 99", K: 1}, want: nil},
		{name: "every match with k 0, ties by name", req: api.MatchRequest{K: 0}, want: []string{"m0", "m1", "m2", "m3"}},
		{name: "bad requirements", req: api.MatchRequest{Requirements: "Slot >"}, wantErr: "requirements"},
		{name: "negative timeout", req: api.MatchRequest{Timeout: -time.Second}, wantErr: "timeout"},
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
			var ans *api.MatchAnswer
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
				if ans.Complete != (ans.Replies == ans.Members) {
					t.Fatalf("complete %v with %d of %d replies", ans.Complete, ans.Replies, ans.Members)
				}
				if ans.Complete && ans.Members == 4 {
					break
				}
				// On a loaded host gossip may take a member for failed
				// a while: the query then expects fewer answers.
				t.Logf("attempt %d: %d of %d members answered", attempt+1, ans.Replies, ans.Members)
				time.Sleep(250 * time.Millisecond)
			}
			if !ans.Complete || ans.Members != 4 {
				t.Fatalf("no complete answer of the 4 members in 8 queries: %+v", ans)
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

// TestTreeQueryRoute runs tree queries through an agent's API, as pondctl
// sea query does: the agent roots the query and its evaluator matches the
// members' live machine ads.
func TestTreeQueryRoute(t *testing.T) {
	t.Parallel()
	agents := startMatchSea(t, 4)
	client := api.NewClient(agents[2].APIAddr())
	var ans *api.Answer
	// Tree tags spread by gossip: the first queries may not reach everyone.
	for deadline := time.Now().Add(15 * time.Second); ; {
		var err error
		ans, err = client.Query(t.Context(), api.Query{Requirements: "TARGET.Even", Rank: "TARGET.Slot", K: 10, Attrs: []string{"Slot", "PondAPI"}})
		if err != nil {
			t.Fatal(err)
		}
		if ans.Stats.Completeness == 1 && ans.Stats.Members == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no complete answer: %+v", ans.Stats)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var got []string
	for _, m := range ans.Matches {
		got = append(got, m.Name)
	}
	if strings.Join(got, ",") != "m2,m0" {
		t.Fatalf("matches %v, want m2,m0", got)
	}
	if api, _ := ans.Matches[0].Attrs["PondAPI"].(string); api != agents[2].APIAddr() {
		t.Fatalf("m2's PondAPI = %q, want %s", api, agents[2].APIAddr())
	}
	if _, err := client.Query(t.Context(), api.Query{Requirements: "Slot >"}); err == nil || !strings.Contains(err.Error(), "requirements") {
		t.Fatalf("a bad query was not refused: %v", err)
	}
}
