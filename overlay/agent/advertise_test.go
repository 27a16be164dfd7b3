package agent

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/pond-htc/pond/overlay/api"
)

// TestAdvertiseWhenBoundToEveryAddress: an agent bound to 0.0.0.0 (a
// glidein on a machine whose addresses it cannot know) advertises, for
// its API and its gossip, the address of the interface it reaches the
// agent it joins from (here loopback), never 0.0.0.0 nor another
// interface's address, and its peer sees it there.
func TestAdvertiseWhenBoundToEveryAddress(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	key, _ := api.GossipKeyGen()
	a := startAgent(t, base, "a", "-encrypt", key)
	b := startAgent(t, base, "b", "-encrypt", key, "-bind", "0.0.0.0:0", "-api", "0.0.0.0:0", "-join", a.info.Gossip)
	for what, addr := range map[string]string{"API": b.info.API, "gossip": b.info.Gossip} {
		if !strings.HasPrefix(addr, "127.0.0.1:") || strings.HasSuffix(addr, ":0") {
			t.Errorf("b's %s address is %s, want 127.0.0.1 and its port", what, addr)
		}
	}
	waitStatus(t, a, "b", api.StatusAlive)
	ms, err := a.client.Members(context.Background(), api.MembersFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Name == "b" && (net.JoinHostPort(m.Addr, strconv.Itoa(int(m.Port))) != b.info.Gossip || m.Tags[api.TagAPI] != b.info.API) {
			t.Errorf("a sees b at %s:%d with API %s, want %s and %s", m.Addr, m.Port, m.Tags[api.TagAPI], b.info.Gossip, b.info.API)
		}
	}
}
