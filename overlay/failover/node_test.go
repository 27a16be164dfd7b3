package failover

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/overlay/api"
)

// TestPush checks who may replicate a pool's state to a member: only the
// manager's node token, for the member's own pool, at an epoch no lower
// than the member knows; what it takes is stored in its data directory.
func TestPush(t *testing.T) {
	dir := t.TempDir()
	n := &keeperNode{}
	k := NewKeeper(Config{Pool: "campus", Name: "campus-1", Replicas: 1}, n, nil)
	n.k = k
	p := &Push{Keeper: k, Pool: "campus", Verified: true, DataDir: dir, Logger: slog.New(slog.DiscardHandler)}
	state := func(pool string, epoch int64) api.FailoverState {
		return api.FailoverState{Pool: pool, Epoch: epoch, Manager: "campus-0", ManagerAPI: "10.0.0.1:9000"}
	}
	for _, tt := range []struct {
		name    string
		subject string // "" for no token
		st      api.FailoverState
		want    int
	}{
		{"no token", "", state("campus", 2), http.StatusForbidden},
		{"another node's token", "node/campus-2", state("campus", 2), http.StatusForbidden},
		{"another pool", "node/campus-0", state("other", 2), http.StatusConflict},
		{"the manager", "node/campus-0", state("campus", 2), http.StatusOK},
		{"an older epoch", "node/campus-0", state("campus", 1), http.StatusConflict},
		{"not a state", "node/campus-0", api.FailoverState{Pool: "campus"}, http.StatusBadRequest},
	} {
		body, _ := json.Marshal(tt.st)
		r := httptest.NewRequest("PUT", api.PathFailover, strings.NewReader(string(body)))
		if tt.subject != "" {
			r = r.WithContext(auth.WithClaims(context.Background(), &auth.Claims{Subject: tt.subject}))
		}
		w := httptest.NewRecorder()
		p.ServeHTTP(w, r)
		if w.Code != tt.want {
			t.Errorf("%s: status %d (%s), want %d", tt.name, w.Code, w.Body, tt.want)
		}
	}
	st, err := ReadState(filepath.Join(dir, StateFile))
	if err != nil || st == nil || st.Epoch != 2 || st.Manager != "campus-0" {
		t.Fatalf("stored state %+v, %v; want epoch 2 of campus-0", st, err)
	}
}

// TestFromKnobs checks that a pool without replicas keeps no Keeper, that
// a bad timing names its knob, and that a stored state of another pool is
// not taken.
func TestFromKnobs(t *testing.T) {
	dir := t.TempDir()
	if err := WriteState(dir, &api.FailoverState{Pool: "other", Epoch: 5, Manager: "o-0", ManagerAPI: "o:1"}); err != nil {
		t.Fatal(err)
	}
	reader := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	cfg := Config{Pool: "campus", Name: "campus-1", Logger: slog.New(slog.DiscardHandler)}
	if k, err := FromKnobs(reader(map[string]string{}), cfg, dir, &keeperNode{}); k != nil || err != nil {
		t.Fatalf("no replicas: %v, %v; want nil, nil", k, err)
	}
	if _, err := FromKnobs(reader(map[string]string{"POND_CM_REPLICAS": "1", "POND_CM_TAKEOVER_STEP": "soon"}), cfg, dir, &keeperNode{}); err == nil || !strings.Contains(err.Error(), "POND_CM_TAKEOVER_STEP") {
		t.Fatalf("bad step: %v, want an error naming POND_CM_TAKEOVER_STEP", err)
	}
	k, err := FromKnobs(reader(map[string]string{"POND_CM_REPLICAS": "1"}), cfg, dir, &keeperNode{})
	if err != nil || k == nil {
		t.Fatalf("one replica: %v, %v", k, err)
	}
	var st api.FailoverStatus
	k.Status(&st)
	if st.Epoch == 5 || st.State != nil {
		t.Errorf("took the stored state of another pool: %+v", st)
	}
}

// TestActingManager: a pond follows the member that acts for the central
// manager it was given, not the one it was given, once another acts at a
// higher epoch.
func TestActingManager(t *testing.T) {
	member := func(name, api_, pool, epoch, status string) api.Member {
		return api.Member{Name: name, Status: status, Tags: map[string]string{api.TagAPI: api_, api.TagPool: pool, api.TagEpoch: epoch}}
	}
	c := &Claims{Self: "free"}
	for _, tt := range []struct {
		name string
		ms   []api.Member
		addr string
		want string
	}{
		{"the manager acts", []api.Member{member("cm", "a0", "campus", "1", api.StatusAlive), member("r", "a1", "campus", "", api.StatusAlive)}, "a0", ""},
		{"a replica took over", []api.Member{member("cm", "a0", "campus", "1", api.StatusFailed), member("r", "a1", "campus", "2", api.StatusAlive)}, "a0", "a1"},
		{"asked for the acting one", []api.Member{member("cm", "a0", "campus", "1", api.StatusFailed), member("r", "a1", "campus", "2", api.StatusAlive)}, "a1", ""},
		{"no pool", []api.Member{member("x", "a9", "", "", api.StatusAlive)}, "a9", ""},
		{"unknown address", []api.Member{member("cm", "a0", "campus", "1", api.StatusAlive)}, "a5", ""},
	} {
		if got := c.ActingManager(t.Context(), tt.ms, "", tt.addr); got != tt.want {
			t.Errorf("%s: ActingManager(%s) = %q, want %q", tt.name, tt.addr, got, tt.want)
		}
	}
}
