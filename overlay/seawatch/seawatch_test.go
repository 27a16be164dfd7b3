package seawatch

import (
	"slices"
	"testing"

	"github.com/hashicorp/serf/serf"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/gossip"
	"github.com/pond-htc/pond/overlay/ring"
	"github.com/pond-htc/pond/overlay/tree"
)

func TestRoutedMembers(t *testing.T) {
	member := func(name, addr, status, pond string) serf.Member {
		tags := map[string]string{api.TagVersion: gossip.ProtocolVersion, api.TagTree: addr}
		if addr == "" {
			delete(tags, api.TagTree)
		}
		if pond != "" {
			tags[api.TagPond] = pond
		}
		st := serf.StatusAlive
		if status == "failed" {
			st = serf.StatusFailed
		}
		return serf.Member{Name: name, Tags: tags, Status: st}
	}
	old := func(m serf.Member) serf.Member {
		m.Tags[api.TagVersion] = "1"
		return m
	}
	plain := serf.Member{Name: "serf-only", Tags: map[string]string{"role": "web"}, Status: serf.StatusAlive}
	routed := map[string]ring.Member{}
	// Each step sees the sea as given, after the steps before it.
	steps := []struct {
		name        string
		members     []serf.Member
		want        []string
		wantChanged bool
	}{
		{"first view", []serf.Member{member("a", "1:1", "alive", ""), member("b", "1:2", "alive", ""), plain},
			[]string{"a=1:1", "b=1:2"}, true},
		{"same view", []serf.Member{member("a", "1:1", "alive", ""), member("b", "1:2", "alive", ""), plain},
			[]string{"a=1:1", "b=1:2"}, false},
		{"a pond tag changes nothing", []serf.Member{member("a", "1:1", "alive", "pond.x"), member("b", "1:2", "alive", ""), plain},
			[]string{"a=1:1", "b=1:2"}, false},
		{"a node without a tree address yet", []serf.Member{member("a", "1:1", "alive", ""), member("b", "1:2", "alive", ""), member("c", "", "alive", "")},
			[]string{"a=1:1", "b=1:2"}, false},
		{"its tree address arrives", []serf.Member{member("a", "1:1", "alive", ""), member("b", "1:2", "alive", ""), member("c", "1:3", "alive", "")},
			[]string{"a=1:1", "b=1:2", "c=1:3"}, true},
		{"a restarts on another port", []serf.Member{member("a", "1:9", "alive", ""), member("b", "1:2", "alive", ""), member("c", "1:3", "alive", "")},
			[]string{"a=1:9", "b=1:2", "c=1:3"}, true},
		{"b fails", []serf.Member{member("a", "1:9", "alive", ""), member("b", "1:2", "failed", ""), member("c", "1:3", "alive", "")},
			[]string{"a=1:9", "c=1:3"}, true},
		{"b is reaped", []serf.Member{member("a", "1:9", "alive", ""), member("c", "1:3", "alive", "")},
			[]string{"a=1:9", "c=1:3"}, false},
		{"b is back", []serf.Member{member("a", "1:9", "alive", ""), member("b", "1:2", "alive", ""), member("c", "1:3", "alive", "")},
			[]string{"a=1:9", "b=1:2", "c=1:3"}, true},
		{"c runs protocol version 1", []serf.Member{member("a", "1:9", "alive", ""), member("b", "1:2", "alive", ""), old(member("c", "1:3", "alive", ""))},
			[]string{"a=1:9", "b=1:2", "c=" + tree.JSONAddr("1:3")}, true},
	}
	for _, st := range steps {
		ms, changed := routedMembers(st.members, routed)
		var got []string
		for _, m := range ms {
			if m.ID != ring.IDOf(m.Name) {
				t.Errorf("%s: %s has ring ID %v, want the hash of its name", st.name, m.Name, m.ID)
			}
			got = append(got, m.Name+"="+m.Addr)
		}
		if !slices.Equal(got, st.want) || changed != st.wantChanged {
			t.Errorf("%s: routed %v (changed %v), want %v (changed %v)", st.name, got, changed, st.want, st.wantChanged)
		}
		if len(routed) != len(st.want) {
			t.Errorf("%s: remembers %d members, want %d", st.name, len(routed), len(st.want))
		}
	}
}
