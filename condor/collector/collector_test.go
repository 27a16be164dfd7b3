package collector

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/wire"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func names(resp *wire.QueryAdsResponse) []string {
	out := []string{}
	for _, a := range resp.Ads {
		out = append(out, a["Name"])
	}
	return out
}

func TestCollector(t *testing.T) {
	ck := &clock{t: time.Unix(1_800_000_000, 0)}
	c := New(Options{Lifetime: time.Minute, Now: ck.now})
	ctx := context.Background()
	update := func(typ, src string, lifetime int, ads ...wire.Ad) {
		t.Helper()
		if _, err := c.Update(ctx, &wire.UpdateRequest{Type: typ, Source: src, Ads: ads, Lifetime: lifetime,
			Private: map[string]wire.Ad{"slot1@a": {"ClaimId": `"secret"`}}}); err != nil {
			t.Fatal(err)
		}
	}
	update(wire.TypeMachine, "startd@a", 0, wire.Ad{"Name": `"slot1@a"`, "Memory": "1024"}, wire.Ad{"Name": `"slot2@a"`, "Memory": "2048"})
	update(wire.TypeMachine, "startd@b", 300, wire.Ad{"Name": `"slot1@b"`, "Memory": "512"})
	update(wire.TypeSchedd, "schedd@a", 0, wire.Ad{"Name": `"a"`})

	tests := []struct {
		name string
		q    wire.QueryAdsRequest
		want []string
	}{
		{"all machines", wire.QueryAdsRequest{Type: wire.TypeMachine}, []string{`"slot1@a"`, `"slot1@b"`, `"slot2@a"`}},
		{"any", wire.QueryAdsRequest{Type: wire.TypeAny}, []string{`"slot1@a"`, `"slot1@b"`, `"slot2@a"`, `"a"`}},
		{"constraint", wire.QueryAdsRequest{Type: wire.TypeMachine, Constraint: "Memory >= 1024"}, []string{`"slot1@a"`, `"slot2@a"`}},
		{"type case", wire.QueryAdsRequest{Type: "scheduler"}, []string{`"a"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := c.Query(ctx, &tt.q)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, names(resp)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}

	// Projection, private attributes only on request.
	resp, _ := c.Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeMachine, Constraint: `Name == "slot1@a"`, Projection: []string{"memory"}})
	if diff := cmp.Diff([]wire.Ad{{"Memory": "1024"}}, resp.Ads); diff != "" {
		t.Errorf("projection (-want +got)\n%s", diff)
	}
	resp, _ = c.Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeMachine, Constraint: `Name == "slot1@a"`, Projection: []string{"Name"}, WithPrivate: true})
	if resp.Ads[0]["ClaimId"] != `"secret"` {
		t.Errorf("private attributes missing: %v", resp.Ads)
	}

	// A new update from a source replaces its ads; invalidation drops them.
	update(wire.TypeMachine, "startd@a", 0, wire.Ad{"Name": `"slot1@a"`, "Memory": "1024"})
	if _, err := c.Invalidate(ctx, &wire.InvalidateRequest{Type: wire.TypeSchedd, Source: "schedd@a"}); err != nil {
		t.Fatal(err)
	}
	resp, _ = c.Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeAny})
	if diff := cmp.Diff([]string{`"slot1@a"`, `"slot1@b"`}, names(resp)); diff != "" {
		t.Errorf("after replace and invalidate (-want +got)\n%s", diff)
	}

	// Lifetime: the default (a minute) expires before the ad's own 300 s.
	ck.t = ck.t.Add(2 * time.Minute)
	resp, _ = c.Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeMachine})
	if diff := cmp.Diff([]string{`"slot1@b"`}, names(resp)); diff != "" {
		t.Errorf("after expiry (-want +got)\n%s", diff)
	}
	if n := c.Expire(); n != 1 {
		t.Errorf("Expire dropped %d ads, want 1", n)
	}
}

func TestCollectorBadInput(t *testing.T) {
	c := New(Options{})
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		err  func() error
	}{
		{"no source", func() error { _, err := c.Update(ctx, &wire.UpdateRequest{Type: wire.TypeMachine}); return err }},
		{"bad expression", func() error {
			_, err := c.Update(ctx, &wire.UpdateRequest{Type: wire.TypeMachine, Source: "x", Ads: []wire.Ad{{"A": "1 +"}}})
			return err
		}},
		{"bad constraint", func() error { _, err := c.Query(ctx, &wire.QueryAdsRequest{Constraint: "Memory >"}); return err }},
	} {
		if err := tt.err(); err == nil {
			t.Errorf("%s: no error", tt.name)
		}
	}
}

func TestCollectorOverHTTP(t *testing.T) {
	c := New(Options{})
	// Client paths are relative to wire.PathPrefix; mount accordingly, as
	// the master does: any advertising scope passes, and the collector
	// asks for the one of the ad type.
	key, err := auth.NewSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	v := &auth.Verifier{Issuer: "pool", Keys: []ed25519.PublicKey{key.Public()}}
	token := func(subject string, scopes ...auth.Scope) string {
		tok, err := auth.Mint(key, auth.Claims{Issuer: "pool", Subject: subject, Scopes: scopes, Expires: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	scopes := []auth.Scope{auth.AdvertiseStartd, auth.AdvertiseSchedd, auth.AdvertiseMaster, auth.Read}
	srv := httptest.NewServer(auth.RequireAny(v, scopes, http.StripPrefix(wire.PathPrefix+"collector", c.Handler())))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	ctx := context.Background()
	startd := wire.NewClient(addr, token("node/a", auth.AdvertiseStartd, auth.Read))
	machine := &wire.UpdateRequest{Type: wire.TypeMachine, Source: "startd@a", Ads: []wire.Ad{{"Name": `"slot1@a"`}},
		Private: map[string]wire.Ad{"slot1@a": {"ClaimId": `"secret-claim"`}}}
	if err := startd.Collector().Update(ctx, machine); err != nil {
		t.Fatal(err)
	}
	ads, err := startd.Collector().Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeMachine})
	if err != nil || len(ads) != 1 {
		t.Fatalf("query: %v %v", ads, err)
	}
	// A schedd's token does not advertise machines, nor a startd's
	// schedds.
	schedd := wire.NewClient(addr, token("node/b", auth.AdvertiseSchedd))
	if err := schedd.Collector().Update(ctx, machine); !isStatus(err, 403) {
		t.Errorf("machine ad with ADVERTISE_SCHEDD: %v, want 403", err)
	}
	if err := schedd.Collector().Invalidate(ctx, &wire.InvalidateRequest{Type: wire.TypeMachine, Source: "startd@a"}); !isStatus(err, 403) {
		t.Errorf("invalidating machine ads with ADVERTISE_SCHEDD: %v, want 403", err)
	}
	if err := startd.Collector().Update(ctx, &wire.UpdateRequest{Type: wire.TypeSchedd, Source: "s", Ads: []wire.Ad{{"Name": `"x"`}}}); !isStatus(err, 403) {
		t.Errorf("schedd ad with ADVERTISE_STARTD: %v, want 403", err)
	}
	// Private attributes are the negotiator's alone.
	if _, err := startd.Collector().Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeMachine, WithPrivate: true}); !isStatus(err, 403) {
		t.Errorf("private query with READ: %v, want 403", err)
	}
	neg := wire.NewCollector(addr, token("node/cm", auth.Daemon))
	ads, err = neg.Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeMachine, WithPrivate: true})
	if err != nil || len(ads) != 1 || ads[0]["ClaimId"] != `"secret-claim"` {
		t.Errorf("private query with DAEMON: %v, %v", ads, err)
	}
	bad := wire.NewCollector(addr, "not-a-token")
	if _, err := bad.Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeMachine}); !isStatus(err, 401) {
		t.Fatalf("query with a bad token: %v, want 401", err)
	}
	if ads, _ := neg.Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeAny}); len(ads) != 1 {
		t.Errorf("refused updates changed the collector: %v", ads)
	}
}

func isStatus(err error, status int) bool {
	var we *wire.Error
	return errors.As(err, &we) && we.Status == status
}

// TestUpdateSharesRepeatedText: the ads the collector keeps share one copy
// of each attribute name and value they repeat, whichever update brought
// them (a pool's slots repeat most of theirs), and the ads still read as
// sent.
func TestUpdateSharesRepeatedText(t *testing.T) {
	ctx := context.Background()
	c := New(Options{})
	start := "(Memory >= RequestMemory) && (TARGET.RequestCpus <= 1)"
	// Each ad's text its own, as decoded from an update's body.
	ad := func(n int) wire.Ad {
		a := wire.Ad{}
		for k, v := range map[string]string{"Name": strconv.Quote(fmt.Sprintf("slot%d@n", n)), "Start": start, "OpSys": `"LINUX"`} {
			a[strings.Clone(k)] = strings.Clone(v)
		}
		return a
	}
	for n := range 2 {
		if _, err := c.Update(ctx, &wire.UpdateRequest{Type: wire.TypeMachine, Source: fmt.Sprintf("startd@n%d", n), Ads: []wire.Ad{ad(n)}}); err != nil {
			t.Fatal(err)
		}
	}
	var kept []wire.Ad
	c.mu.RLock()
	for _, es := range c.ads[wire.TypeMachine] {
		for _, e := range es {
			kept = append(kept, e.wire)
		}
	}
	c.mu.RUnlock()
	if len(kept) != 2 {
		t.Fatalf("%d ads kept, want 2", len(kept))
	}
	keyOf := func(a wire.Ad, name string) string {
		for k := range a {
			if k == name {
				return k
			}
		}
		t.Fatalf("no %s in %v", name, a)
		return ""
	}
	for _, name := range []string{"Start", "OpSys"} {
		if unsafe.StringData(kept[0][name]) != unsafe.StringData(kept[1][name]) {
			t.Errorf("the two ads' %s values are two copies", name)
		}
		if unsafe.StringData(keyOf(kept[0], name)) != unsafe.StringData(keyOf(kept[1], name)) {
			t.Errorf("the two ads' %s names are two copies", name)
		}
	}
	resp, err := c.Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeMachine})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range resp.Ads {
		if a["Start"] != start || a["OpSys"] != `"LINUX"` {
			t.Errorf("an ad reads %v", a)
		}
	}
}
