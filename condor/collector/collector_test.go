package collector

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
	// Client paths are relative to wire.PathPrefix; mount accordingly.
	srv := httptest.NewServer(wire.RequireToken(wire.Token("pw"), http.StripPrefix(wire.PathPrefix+"collector", c.Handler())))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	ok := wire.NewClient(addr, wire.Token("pw"))
	if err := ok.Collector().Update(context.Background(), &wire.UpdateRequest{Type: wire.TypeMachine, Source: "s", Ads: []wire.Ad{{"Name": `"n"`}}}); err != nil {
		t.Fatal(err)
	}
	ads, err := ok.Collector().Query(context.Background(), &wire.QueryAdsRequest{Type: wire.TypeMachine})
	if err != nil || len(ads) != 1 {
		t.Fatalf("query: %v %v", ads, err)
	}
	bad := wire.NewCollector(addr, wire.Token("other"))
	if _, err := bad.Query(context.Background(), &wire.QueryAdsRequest{Type: wire.TypeMachine}); err == nil {
		t.Fatal("query with another pool's token succeeded")
	}
}
