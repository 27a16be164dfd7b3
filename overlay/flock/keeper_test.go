package flock

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
)

// keeperNode is a Node in a sea of members whose tags it sets, with the
// collectors' machine ads the test gives it.
type keeperNode struct {
	sea        *sea
	name       string
	condorHost string
	mu         sync.Mutex
	machines   map[string][]wire.Ad // by collector address, "" the node's own
}

func (n *keeperNode) Members() []Member                                  { return n.sea.list() }
func (n *keeperNode) SetTags(t map[string]string) error                  { return n.sea.setTags(n.name)(t) }
func (n *keeperNode) Proven(context.Context, api.FlockAnnouncement) bool { return true }
func (n *keeperNode) RTT(string) (time.Duration, bool)                   { return 0, false }
func (n *keeperNode) APIAddr() string                                    { return n.name + ":1" }
func (n *keeperNode) CondorHost() string                                 { return n.condorHost }

func (n *keeperNode) FetchStatus(context.Context, string) (*api.FlockStatus, error) {
	return nil, errors.New("no manager here")
}

func (n *keeperNode) Machines(_ context.Context, addr string, req *wire.QueryAdsRequest) ([]wire.Ad, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	ads, ok := n.machines[addr]
	if !ok {
		return nil, errors.New("collector down")
	}
	return ads, nil
}

// newKeeperSea returns a sea with a central manager of pool spare (the
// node the Keeper runs on), a member of spare and schedds of pools busy
// and other, and that manager's Keeper.
func newKeeperSea(t *testing.T, knob map[string]string) (*Keeper, *keeperNode) {
	t.Helper()
	s := &sea{members: map[string]Member{}}
	for _, m := range []struct{ name, pool, cm string }{
		{"spare-0", "spare", ""}, {"spare-1", "Spare", ""}, {"busy-0", "busy", ""}, {"other-0", "other", ""},
		{"guest-0", "guest", "spare-0:1"},
	} {
		s.members[m.name] = Member{Name: m.name, Status: "alive", Tags: map[string]string{"pool": m.pool, "api": m.name + ":1", "cm": m.cm}}
	}
	n := &keeperNode{sea: s, name: "spare-0", condorHost: "spare-0:1", machines: map[string][]wire.Ad{}}
	k := NewKeeper(t.Context(), Config{Pool: "spare", Name: "spare-0", Role: "cm", Knob: func(name string) (string, bool) {
		v, ok := knob[name]
		return v, ok
	}}, n)
	return k, n
}

// TestKeeperAccept: the collector of a manager whose flocks accept pool
// busy takes the submitters of busy's schedds, of its own pool's and of
// those that report to it, and of unknown nodes, not of other pools'; a
// node that manages no pool, or whose flocks name no pool to accept,
// takes every one.
func TestKeeperAccept(t *testing.T) {
	k, _ := newKeeperSea(t, nil)
	if err := k.Accept("other-0"); err != nil {
		t.Fatalf("no manager running: %v", err)
	}
	if err := k.Run(nil, false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Stop)
	if err := k.Accept("other-0"); err != nil {
		t.Fatalf("no flock names a pool to accept: %v", err)
	}
	if err := k.Manager().Set(api.FlockConfig{Name: "in", In: &api.FlockIn{From: []string{"BUSY"}}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ node, want string }{
		{"busy-0", ""},
		{"spare-1", ""},
		{"guest-0", ""},
		{"gone-0", ""},
		{"other-0", `pool spare takes flocked jobs only from BUSY, not from pool "other"`},
	} {
		err := k.Accept(tc.node)
		if (tc.want == "") != (err == nil) || err != nil && err.Error() != tc.want {
			t.Errorf("Accept(%s) = %v, want %q", tc.node, err, tc.want)
		}
	}
}

// TestKeeperCapacityAndCount measures a pool's spare capacity from its
// collector's unclaimed slots (a partitionable slot counting a slot per
// free cpu) and counts the slots of another collector that the pool's
// other schedds claim.
func TestKeeperCapacityAndCount(t *testing.T) {
	k, n := newKeeperSea(t, nil)
	n.machines[""] = []wire.Ad{
		{"Cpus": "8", "Memory": "16000", "GPUs": "1", "PartitionableSlot": "true"},
		{"Cpus": "2", "Memory": "4000"},
		{"Cpus": "8", "Memory": "8000"},
		{"Cpus": "(("},
	}
	c, err := k.spareCapacity(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := (api.FlockCapacity{IdleSlots: 10, Cpus: 8, Memory: 16000, Gpus: 1}); c != want {
		t.Errorf("capacity %+v, want %+v", c, want)
	}
	n.machines["busy-0:1"] = []wire.Ad{
		{"ClientMachine": `"slot1@spare-1"`}, {"ClientMachine": `"SPARE-1"`}, {"ClientMachine": `"busy-0"`}, {"ClientMachine": `oops`},
	}
	f := keeperFollower{k}
	mine := f.PoolMembers()
	if len(mine) != 1 || !mine["spare-1"] {
		t.Fatalf("pool members %v, want spare-1 alone", mine)
	}
	if got, err := f.CountClaimed(t.Context(), "busy-0:1", mine); err != nil || got != 2 {
		t.Errorf("claimed %d, %v; want 2", got, err)
	}
	if _, err := f.CountClaimed(t.Context(), "down:1", mine); err == nil {
		t.Error("a collector that does not answer counted")
	}
	if cm := f.CentralManager(); cm != "" {
		t.Errorf("the manager follows %q", cm)
	}
	n.condorHost = "other:1"
	if cm := f.CentralManager(); cm != "other:1" {
		t.Errorf("a member follows %q, want other:1", cm)
	}
}

// TestKeeperRoutes serves the flock routes: 409 on a node that manages no
// pool, and the flocks of the running Manager, which Stop ends, its
// announcement withdrawn.
func TestKeeperRoutes(t *testing.T) {
	k, n := newKeeperSea(t, map[string]string{"POND_FLOCK_INTERVAL": "50ms", "POND_FLOCK_TTL": "1s"})
	mux := http.NewServeMux()
	for p, h := range k.Routes() {
		mux.HandleFunc(p, h)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := do("GET", api.PathFlock, ""); code != http.StatusConflict || !strings.Contains(body, "spare-0 is not a pool's central manager") {
		t.Fatalf("GET without a manager: %d %s", code, body)
	}
	if code, _ := do("PUT", api.PathFlocks+"x", `{"name": "x"}`); code != http.StatusConflict {
		t.Fatalf("PUT without a manager: %d", code)
	}
	n.machines[""] = []wire.Ad{{"Cpus": "1", "Memory": "512"}}
	if err := k.Start(true, false); err != nil {
		t.Fatal(err)
	}
	if code, body := do("PUT", api.PathFlocks+"x", `{"name": "y", "out": {"to": ["busy"]}}`); code != http.StatusBadRequest || !strings.Contains(body, `the path names`) {
		t.Fatalf("PUT of another name: %d %s", code, body)
	}
	if code, body := do("PUT", api.PathFlocks+"x", `{"name": "x", "in": {"from": ["busy"]}}`); code != http.StatusOK || !strings.Contains(body, `"busy"`) {
		t.Fatalf("PUT: %d %s", code, body)
	}
	if got := string(k.Configs()); !strings.Contains(got, `"x"`) {
		t.Errorf("configs %s", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for tag(n.sea, "spare-0", TagAccept) == "" {
		if time.Now().After(deadline) {
			t.Fatal("the manager never announced its accept list")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, _ := do("DELETE", api.PathFlocks+"x", ""); code != http.StatusOK {
		t.Fatalf("DELETE: %d", code)
	}
	k.Stop()
	if v := tag(n.sea, "spare-0", TagSpare) + tag(n.sea, "spare-0", TagAccept); v != "" {
		t.Errorf("the announcement stays after Stop: %q", v)
	}
	if k.Manager() != nil || k.Configs() != nil {
		t.Error("a manager runs after Stop")
	}
	if code, _ := do("GET", api.PathFlock, ""); code != http.StatusConflict {
		t.Errorf("GET after Stop: %d", code)
	}
}

func tag(s *sea, node, name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.members[node].Tags[name]
}

// TestKeeperKnobs: a TTL no longer than the interval is refused at
// start, and a node of no pool does not flock.
func TestKeeperKnobs(t *testing.T) {
	k, _ := newKeeperSea(t, map[string]string{"POND_FLOCK_INTERVAL": "10s", "POND_FLOCK_TTL": "10s"})
	if err := k.Start(true, true); err == nil || !strings.Contains(err.Error(), "POND_FLOCK_TTL (10s) must be more than POND_FLOCK_INTERVAL") {
		t.Errorf("Start: %v", err)
	}
	k.cfg.Pool = ""
	if err := k.Start(true, true); err != nil || k.Manager() != nil {
		t.Errorf("a node of no pool flocks: %v", err)
	}
}
