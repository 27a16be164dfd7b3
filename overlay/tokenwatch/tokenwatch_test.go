package tokenwatch

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
)

// TestTokenWatch checks that the agent warns once when its token nears its
// expiry (a tenth of its lifetime, at most a day, before), says once that
// it expired, starts over for a new token written over the file, and never
// logs the token.
func TestTokenWatch(t *testing.T) {
	key := mustKey(t)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	mint := func(id string, life time.Duration) string {
		tok, err := auth.Mint(key, auth.Claims{Issuer: "sea-1", Subject: "node/n1", Scopes: []auth.Scope{auth.Daemon},
			ID: id, IssuedAt: t0, Expires: t0.Add(life)})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	path := filepath.Join(t.TempDir(), "node.token")
	write := func(tok string) {
		t.Helper()
		if err := os.WriteFile(path+".new", []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
	}
	short, long := mint("short", 10*time.Hour), mint("long", 30*24*time.Hour)
	write(short)
	token, err := auth.TokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var buf syncBuffer
	now := t0
	w := &Watch{Path: path, Token: token, Now: func() time.Time { return now }, Log: slog.New(slog.NewTextHandler(&buf, nil))}
	for _, step := range []struct {
		name  string
		at    time.Duration // since t0
		write string        // a token written over the file first
		want  string        // what the log gains ("" nothing)
	}{
		{name: "fresh", at: time.Hour},
		{name: "a tenth of its life left", at: 9*time.Hour + 30*time.Minute, want: "level=WARN msg=\"the node's token expires in 30m0s; write a new token"},
		{name: "warned once", at: 9*time.Hour + 50*time.Minute},
		{name: "expired", at: 10*time.Hour + time.Second, want: "level=ERROR msg=\"the node's token has expired"},
		{name: "said once", at: 11 * time.Hour},
		{name: "refreshed", at: 11 * time.Hour, write: long},
		{name: "three days left, more than a day", at: 27 * 24 * time.Hour},
		{name: "a day left", at: 29*24*time.Hour + time.Minute, want: "level=WARN msg=\"the node's token expires in 23h59m0s"},
		{name: "unreadable", at: 29*24*time.Hour + 2*time.Minute, write: "x.y.z", want: "the node's token cannot be read"},
	} {
		if step.write != "" {
			write(step.write)
		}
		now = t0.Add(step.at)
		before := buf.String()
		w.Check()
		gained := strings.TrimPrefix(buf.String(), before)
		if step.want == "" && gained != "" || !strings.Contains(gained, step.want) {
			t.Fatalf("%s: the log gained %q, want %q", step.name, gained, step.want)
		}
		if step.want != "" && !strings.Contains(gained, "docs/security.md") {
			t.Errorf("%s: %q does not say how to refresh the token", step.name, gained)
		}
	}
	for _, tok := range []string{short, long} {
		if strings.Contains(buf.String(), tok) {
			t.Errorf("the log shows a token:\n%s", buf.String())
		}
	}
	if !strings.Contains(buf.String(), "subject=node/n1 id=short expires=2030-01-01T10:00:00Z") {
		t.Errorf("the log does not name the token:\n%s", buf.String())
	}
}

// TestTokenWatchGlideinEnd checks that a glidein warns once for each token
// that would expire before the glidein's end, and not for one that
// outlives it, as a factory refreshes the token file in place.
func TestTokenWatchGlideinEnd(t *testing.T) {
	key := mustKey(t)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "node.token")
	write := func(id string, life time.Duration) {
		t.Helper()
		tok, err := auth.Mint(key, auth.Claims{Issuer: "sea-1", Subject: "node/g1", Scopes: []auth.Scope{auth.Daemon},
			ID: id, IssuedAt: t0, Expires: t0.Add(life)})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path+".new", []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
	}
	write("short", 2*time.Hour)
	token, err := auth.TokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var buf syncBuffer
	w := &Watch{Path: path, Token: token, Now: func() time.Time { return t0.Add(time.Minute) },
		Log: slog.New(slog.NewTextHandler(&buf, nil)), End: t0.Add(4 * time.Hour)}
	const said = "expires before the glidein ends (at 2030-01-01T04:00:00Z)"
	for _, step := range []struct {
		name     string
		id       string // a token written over the file first
		life     time.Duration
		wantWarn bool
	}{
		{name: "expires two hours before the end", wantWarn: true},
		{name: "said once"},
		{name: "refreshed past the end", id: "long", life: 8 * time.Hour},
		{name: "refreshed short again", id: "mid", life: 3 * time.Hour, wantWarn: true},
		{name: "exactly at the end", id: "exact", life: 4 * time.Hour},
	} {
		if step.id != "" {
			write(step.id, step.life)
		}
		before := buf.String()
		w.Check()
		gained := strings.TrimPrefix(buf.String(), before)
		if got := strings.Contains(gained, said); got != step.wantWarn {
			t.Fatalf("%s: warned %v, want %v; the log gained %q", step.name, got, step.wantWarn, gained)
		}
	}
}

func mustKey(t testing.TB) *auth.SigningKey {
	t.Helper()
	k, err := auth.NewSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
