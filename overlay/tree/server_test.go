package tree

import (
	"context"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/ring"
)

func TestNode(t *testing.T) {
	const n = 12
	ads := map[string]map[string]float64{}
	var nodes []*Server
	var ms []ring.Member
	for i := range n {
		name := nodeName(i)
		ads[name] = map[string]float64{"Memory": float64(1000 * i)}
		nd, err := NewServer(ServerConfig{Name: name, Evaluator: adEvaluator{ads[name]}})
		if err != nil {
			t.Fatal(err)
		}
		defer nd.Close()
		nodes = append(nodes, nd)
		ms = append(ms, ring.NewMember(name, nd.Addr()))
	}
	for _, nd := range nodes {
		nd.SetMembers(ms)
	}
	q := api.Query{K: 3, Rank: "Memory", Attrs: []string{"Memory"}}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	a, err := nodes[4].Query(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	checkAnswer(t, ads, q, a)
	if a.Matches[0].Addr != nodes[n-1].Addr() {
		t.Errorf("best match address %q, want %q", a.Matches[0].Addr, nodes[n-1].Addr())
	}
	if _, err := NewServer(ServerConfig{}); err == nil {
		t.Error("NewServer accepted an empty name")
	}
	if _, err := NewServer(ServerConfig{Name: "x", Listen: "256.0.0.1:99999", Evaluator: adEvaluator{}}); err == nil {
		t.Error("NewServer accepted a bad listen address")
	}
}

// TestKeepConnected checks that a server opens connections to the members
// of its routing table before any query needs them.
func TestKeepConnected(t *testing.T) {
	var nodes []*Server
	var ms []ring.Member
	for i := range 16 {
		nd, err := NewServer(ServerConfig{Name: nodeName(i), Evaluator: adEvaluator{}})
		if err != nil {
			t.Fatal(err)
		}
		defer nd.Close()
		nodes = append(nodes, nd)
		ms = append(ms, ring.NewMember(nodeName(i), nd.Addr()))
	}
	for _, nd := range nodes {
		nd.SetMembers(ms)
	}
	n := nodes[3]
	table := n.Router.Table()
	if len(table) < 2 {
		t.Fatalf("routing table of %d members", len(table))
	}
	for _, m := range table {
		if n.Transport.Connected(m.Addr) {
			t.Fatalf("connected to %s before any query or KeepConnected", m.Name)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.KeepConnected(ctx, time.Hour)
	deadline := time.Now().Add(5 * time.Second)
	for _, m := range table {
		if m.Name == n.Router.Self().Name {
			continue
		}
		for !n.Transport.Connected(m.Addr) {
			if time.Now().After(deadline) {
				t.Fatalf("no connection to %s of the routing table", m.Name)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
