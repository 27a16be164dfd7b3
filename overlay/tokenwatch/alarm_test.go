package tokenwatch

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/schedd"
	"github.com/pond-htc/pond/overlay/knobs"
)

// TestAlarmsThresholds checks that each threshold crossed raises one
// alarm (a WARN line and a webhook, signed), that several crossed between
// two checks raise one, that a threshold no shorter than the credential's
// life raises none, that the ad's attributes and Changed follow, and that
// a renewed credential starts again.
func TestAlarmsThresholds(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	cred := Expiry{Credential: CredToken, File: "/x/node.token", Subject: "node/n1", Issued: t0, Expires: t0.Add(30 * 24 * time.Hour)}
	glidein := Expiry{Credential: CredCert, Subject: "g1", Issued: t0, Expires: t0.Add(5 * time.Hour)}
	var mu sync.Mutex
	var bodies [][]byte
	key := []byte("0123456789abcdef0123")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if !schedd.VerifyWebhook(key, b, r.Header.Get(schedd.WebhookSignatureHeader)) {
			t.Errorf("webhook body not signed: %s", b)
		}
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
	}))
	defer srv.Close()
	var buf syncBuffer
	now := t0
	changes := 0
	var lastAttrs map[string]string
	a := &Alarms{Node: "n1", Pool: "p", Thresholds: DefaultThresholds,
		Sources: []Source{func() (Expiry, bool) { return cred, true }, func() (Expiry, bool) { return glidein, true }},
		Now:     func() time.Time { return now }, Log: slog.New(slog.NewTextHandler(&buf, nil)),
		Notify: func(ctx context.Context, al Alarm) error {
			return schedd.PostWebhook(ctx, srv.Client(), srv.URL, key, "test", al)
		},
		Changed: func(all, alarming []Expiry) { changes++; lastAttrs = AdAttrs(all, alarming) }}
	day := 24 * time.Hour
	for _, step := range []struct {
		name   string
		at     time.Duration
		renew  bool
		alarms int // WARN lines gained
		soon   bool
	}{
		{name: "fresh", at: time.Hour, alarms: 0},
		{name: "8 days left", at: 22 * day, alarms: 0},
		{name: "7 days left", at: 23*day + time.Minute, alarms: 1, soon: true},
		{name: "still within 7 days", at: 23*day + time.Hour, alarms: 0, soon: true},
		// The 5-hour certificate crosses the 1-hour threshold only.
		{name: "past the 1 day and 1 hour thresholds at once", at: 29*day + 23*time.Hour + 30*time.Minute, alarms: 1, soon: true},
		{name: "once", at: 29*day + 23*time.Hour + 40*time.Minute, alarms: 0, soon: true},
		{name: "renewed", at: 29*day + 23*time.Hour + 50*time.Minute, renew: true, alarms: 0, soon: false},
	} {
		if step.renew {
			cred.Issued, cred.Expires = t0.Add(step.at), t0.Add(step.at+30*day)
		}
		now = t0.Add(step.at)
		// A glidein's certificate, fresh at each step: its life is
		// shorter than the 7-day and 1-day thresholds, and it has more
		// than 1h left.
		glidein.Issued, glidein.Expires = now, now.Add(5*time.Hour)
		before := strings.Count(buf.String(), "level=WARN")
		a.Check(context.Background())
		a.notified.Wait()
		if got := strings.Count(buf.String(), "level=WARN") - before; got != step.alarms {
			t.Fatalf("%s: %d alarms, want %d; log:\n%s", step.name, got, step.alarms, buf.String())
		}
		if got := lastAttrs["PondCredentialExpiresSoon"]; got != map[bool]string{true: "true", false: "false"}[step.soon] {
			t.Fatalf("%s: PondCredentialExpiresSoon = %s, want %v", step.name, got, step.soon)
		}
		if got, want := lastAttrs["PondTokenExpiry"], cred.Expires.Unix(); got != strconv.FormatInt(want, 10) {
			t.Fatalf("%s: PondTokenExpiry = %s, want %d", step.name, got, want)
		}
	}
	// The 5-hour certificate, renewed before it came within 1h of its
	// expiry, never alarmed: only the token did, twice.
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 2 {
		t.Fatalf("%d webhooks, want 2", len(bodies))
	}
	var al Alarm
	if err := json.Unmarshal(bodies[1], &al); err != nil {
		t.Fatal(err)
	}
	if al.Event != "credential_expires" || al.Credential != CredToken || al.Threshold != "1h0m0s" || al.Node != "n1" || al.Renew == "" {
		t.Fatalf("webhook body %s", bodies[1])
	}
	if changes == 0 || changes > 10 {
		t.Fatalf("Changed called %d times: want it on changes only", changes)
	}
	if tag := Tag(a.Alarming()); tag != "" {
		t.Fatalf("tag %q after the renewal", tag)
	}
}

// TestAlarmsShortCert checks a credential whose life is shorter than all
// thresholds but the last: it alarms at that one only.
func TestAlarmsShortCert(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	e := Expiry{Credential: CredFactoryCA, Issued: t0, Expires: t0.Add(5 * time.Hour)}
	var buf syncBuffer
	now := t0.Add(time.Minute)
	a := &Alarms{Thresholds: DefaultThresholds, Sources: []Source{func() (Expiry, bool) { return e, true }},
		Now: func() time.Time { return now }, Log: slog.New(slog.NewTextHandler(&buf, nil))}
	a.Check(context.Background())
	if strings.Contains(buf.String(), "WARN") {
		t.Fatalf("a 5-hour CA alarmed at its start: %s", buf.String())
	}
	now = t0.Add(4*time.Hour + 30*time.Minute)
	a.Check(context.Background())
	if !strings.Contains(buf.String(), "the node's factory-ca expires in 30m0s (alarm at 1h0m0s before)") {
		t.Fatalf("no alarm at 1h: %s", buf.String())
	}
	if c, exp, err := ParseTag(Tag(a.Alarming())); err != nil || c != CredFactoryCA || !exp.Equal(e.Expires) {
		t.Fatalf("tag: %s %v %v", c, exp, err)
	}
}

// TestThresholds checks POND_CREDENTIAL_ALARMS.
func TestThresholds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v    string
		want []time.Duration
		err  bool
	}{
		{v: "", want: DefaultThresholds},
		{v: "1h, 168h 24h", want: DefaultThresholds},
		{v: "90", want: []time.Duration{90 * time.Second}},
		{v: "0", want: nil},
		{v: "1h,1h", want: []time.Duration{time.Hour}},
		{v: "7d", err: true},
	} {
		got, err := Thresholds(knobs.Reader(func(string) (string, bool) { return tc.v, true }))
		if (err != nil) != tc.err {
			t.Fatalf("%q: err %v", tc.v, err)
		}
		if err == nil && !equalDurations(got, tc.want) {
			t.Fatalf("%q: %v, want %v", tc.v, got, tc.want)
		}
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestWatchAlarmed checks that the token's watch leaves the warning
// before expiry to the alarms when they are on, and still says when the
// token expired.
func TestWatchAlarmed(t *testing.T) {
	t.Parallel()
	key := mustKey(t)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tok, err := auth.Mint(key, auth.Claims{Issuer: "sea-1", Subject: "node/n1", Scopes: []auth.Scope{auth.Daemon},
		ID: "a", IssuedAt: t0, Expires: t0.Add(10 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	var buf syncBuffer
	now := t0.Add(9*time.Hour + 30*time.Minute)
	w := &Watch{Path: "node.token", Token: func() string { return tok }, Now: func() time.Time { return now },
		Log: slog.New(slog.NewTextHandler(&buf, nil)), Alarmed: true}
	w.Check()
	if buf.String() != "" {
		t.Fatalf("the watch warned beside the alarms: %s", buf.String())
	}
	now = t0.Add(11 * time.Hour)
	w.Check()
	if !strings.Contains(buf.String(), "level=ERROR msg=\"the node's token has expired") {
		t.Fatalf("no error once expired: %s", buf.String())
	}
}
