package reach

import (
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/pond-htc/pond/overlay/api"
)

func TestMode(t *testing.T) {
	for _, tt := range []struct {
		in, want string
		ok       bool
	}{
		{"", Auto, true}, {"auto", Auto, true}, {"direct", Direct, true},
		{"relay", Relay, true}, {api.ReachReverse, Relay, true}, {"tunnel", "", false},
	} {
		if got, ok := Mode(tt.in); got != tt.want || ok != tt.ok {
			t.Errorf("Mode(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// TestCheckPorts: the connect-back check tests the tree port the node
// then serves on and the gossip port serf then binds, chosen free for TCP
// and UDP when the bind address asks for any.
func TestCheckPorts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c := &Config{Addrs: Advertiser{Bind: "127.0.0.1:0"}, Logger: slog.New(slog.DiscardHandler)}
	l := &Listeners{}
	also, release := c.checkPorts(t.Context(), ln, l)
	defer release()
	if l.Tree == nil {
		t.Fatal("no tree listener bound")
	}
	defer l.Tree.Close()
	if len(also) != 2 || also[0] != l.Tree.Addr().String() || also[1] != l.GossipBind || strings.HasSuffix(l.GossipBind, ":0") {
		t.Fatalf("the check's other addresses: %v (tree %s, gossip %q), want the tree's and gossip's", also, l.Tree.Addr(), l.GossipBind)
	}
	// The gossip port is held until release, then left for serf.
	if _, err := net.Listen("tcp", l.GossipBind); err == nil {
		t.Error("the gossip port is not held until release")
	}
	release()
	g, err := net.Listen("tcp", l.GossipBind)
	if err != nil {
		t.Fatalf("the gossip port is still held after release: %v", err)
	}
	g.Close()
	if u, err := net.ListenPacket("udp", l.GossipBind); err != nil {
		t.Errorf("the gossip port is not free for UDP: %v", err)
	} else {
		u.Close()
	}
}

// TestChooseWithoutCandidate: a central manager, a node without a relay
// candidate and one without a token to ask with are reached directly,
// without binding anything more.
func TestChooseWithoutCandidate(t *testing.T) {
	for _, c := range []*Config{
		{Name: "cm", Role: api.RoleCM, Relay: "127.0.0.1:1", CanAsk: true},
		{Name: "w1", Role: "node", CanAsk: true},
		{Name: "w2", Role: "node", Relay: "127.0.0.1:1"},
	} {
		if got, l := c.Choose(t.Context(), nil); got != Direct || l.Tree != nil || l.GossipBind != "" {
			t.Errorf("%s: %q %+v, want direct and nothing bound", c.Name, got, l)
		}
	}
}

func TestAdvertiser(t *testing.T) {
	ad := Advertiser{PeerTarget: "127.0.0.1:9", Bind: "0.0.0.0:7946"}
	if got := ad.Addr(t.Context(), "0.0.0.0:80"); got != "127.0.0.1:80" {
		t.Errorf("Addr(0.0.0.0:80) = %s, want 127.0.0.1:80", got)
	}
	if got := ad.Addr(t.Context(), "10.1.2.3:80"); got != "10.1.2.3:80" {
		t.Errorf("Addr(10.1.2.3:80) = %s, want itself", got)
	}
	if got := ad.Gossip(t.Context(), ""); got != "127.0.0.1:7946" {
		t.Errorf("Gossip = %s, want 127.0.0.1:7946", got)
	}
	if got := ad.Gossip(t.Context(), "0.0.0.0:5000"); got != "127.0.0.1:5000" {
		t.Errorf("Gossip with a chosen port = %s, want 127.0.0.1:5000", got)
	}
	if got := (Advertiser{Bind: "10.0.0.1:7946"}).Gossip(t.Context(), ""); got != "" {
		t.Errorf("Gossip of a specific bind address = %q, want serf's choice", got)
	}
}
