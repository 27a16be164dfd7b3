package console

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/collector"
	"github.com/pond-htc/pond/condor/collector/history"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"

	"net/http/httptest"
)

// hostile is a machine name an attacker who advertises a slot chooses.
const hostile = `<script>alert("pwned")</script>`

// testPool is an agent's mux with a real collector holding a slot of a
// hostile name, its routes behind a verifier, and the console, served
// over TLS.
type testPool struct {
	srv     *httptest.Server
	key     *auth.SigningKey
	revoked atomic.Bool
	url     string
	// mux and coll are the agent's routes and its collector, to which a
	// test adds what it needs.
	mux  *http.ServeMux
	coll *collector.Collector
	v    *auth.Verifier
	// hist is the collector's history database.
	hist *history.Store
}

func newTestPool(t testing.TB) *testPool {
	t.Helper()
	p := &testPool{}
	var err error
	if p.key, err = auth.NewSigningKey(); err != nil {
		t.Fatal(err)
	}
	v := &auth.Verifier{Issuer: "test-pool", Keys: []ed25519.PublicKey{p.key.Public()}, Revoked: func(string) bool { return p.revoked.Load() }}
	hist, err := history.Open(context.Background(), filepath.Join(t.TempDir(), "history.db"), history.Options{Flush: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hist.Close() })
	p.hist = hist
	coll := collector.New(collector.Options{History: hist})
	ad := wire.Ad{"Name": `"slot1@` + strings.ReplaceAll(hostile, `"`, `\"`) + `"`, "Machine": `"` + strings.ReplaceAll(hostile, `"`, `\"`) + `"`,
		"State": `"Unclaimed"`, "Activity": `"Idle"`, "Cpus": "4", "Memory": "8192", "MyType": `"Machine"`}
	if _, err := coll.Update(context.Background(), &wire.UpdateRequest{Type: wire.TypeMachine, Source: "startd@evil", Ads: []wire.Ad{ad}}); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	p.mux, p.coll, p.v = mux, coll, v
	mux.Handle(wire.PathPrefix+"collector/", auth.Require(v, auth.Read, http.StripPrefix(wire.PathPrefix+"collector", coll.Handler())))
	mux.Handle("GET "+api.PathSelf, auth.Require(v, auth.SeaRead, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wire.WriteJSON(w, http.StatusOK, api.Self{Name: "cm", Pool: "test-pool", Role: "cm"})
	})))
	p.srv = httptest.NewUnstartedServer(mux)
	p.srv.StartTLS()
	t.Cleanup(p.srv.Close)
	p.url = p.srv.URL
	clientTLS := p.srv.Client().Transport.(*http.Transport).TLSClientConfig
	c, err := New(Config{Verifier: v, APIAddr: func() string { return p.srv.Listener.Addr().String() }, TLS: clientTLS})
	if err != nil {
		t.Fatal(err)
	}
	c.Register(mux)
	return p
}

// token mints a token of scopes, expiring in d.
func (p *testPool) token(t testing.TB, d time.Duration, scopes ...auth.Scope) string {
	t.Helper()
	tok, err := auth.Mint(p.key, auth.Claims{Issuer: "test-pool", Subject: "alice", Scopes: scopes, IssuedAt: time.Now().Add(-2 * d), Expires: time.Now().Add(d)})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// client is a browser: it keeps no cookies of its own and follows no
// redirect.
func (p *testPool) client() *http.Client {
	c := *p.srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

// login posts the login form as the console's own page would.
func (p *testPool) login(t testing.TB, token string, hdr map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, p.url+Prefix+"login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", p.url)
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := p.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func (p *testPool) get(t testing.TB, path string, ck *http.Cookie) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, p.url+path, nil)
	if ck != nil {
		req.AddCookie(ck)
	}
	resp, err := p.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func sessionCookie(t testing.TB, resp *http.Response) *http.Cookie {
	t.Helper()
	for _, c := range resp.Cookies() {
		if c.Name == CookieName {
			return c
		}
	}
	t.Fatalf("login answered %d without a session cookie", resp.StatusCode)
	return nil
}

func TestPagesRequireLogin(t *testing.T) {
	p := newTestPool(t)
	for _, path := range []string{"/ui/", "/ui/slots", "/ui/history", "/ui/history?machine=x&since=2h", "/ui/jobs", "/ui/sea", "/ui/flocks", "/ui/factory", "/ui/failover", "/ui/credentials"} {
		for _, ck := range []*http.Cookie{nil, {Name: CookieName, Value: "forged"}} {
			resp, body := p.get(t, path, ck)
			if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login" {
				t.Errorf("GET %s (cookie %v): %d %q, want a redirect to /ui/login", path, ck, resp.StatusCode, resp.Header.Get("Location"))
			}
			if strings.Contains(body, "slot1@") {
				t.Errorf("GET %s without a session shows the pool", path)
			}
		}
	}
	// A token in a header or the URL is no session either.
	req, _ := http.NewRequest(http.MethodGet, p.url+"/ui/slots?token="+url.QueryEscape(p.token(t, time.Hour, auth.Read)), nil)
	req.Header.Set("Authorization", "Bearer "+p.token(t, time.Hour, auth.Read))
	resp, err := p.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a bearer token or a token in the URL opened a page: %d", resp.StatusCode)
	}
}

func TestLoginSetsSafeCookieAndEscapes(t *testing.T) {
	p := newTestPool(t)
	tok := p.token(t, time.Hour, auth.Read, auth.SeaRead)
	resp := p.login(t, tok, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != Prefix {
		t.Fatalf("login: %d %q, want a redirect to %s", resp.StatusCode, resp.Header.Get("Location"), Prefix)
	}
	ck := sessionCookie(t, resp)
	if !ck.HttpOnly || !ck.Secure || ck.SameSite != http.SameSiteStrictMode || ck.Path != Prefix {
		t.Errorf("cookie HttpOnly=%v Secure=%v SameSite=%v Path=%q, want HttpOnly, Secure (TLS), SameSite=Strict, Path=%s", ck.HttpOnly, ck.Secure, ck.SameSite, ck.Path, Prefix)
	}
	if strings.Contains(ck.Value, tok) || strings.Contains(tok, ck.Value) {
		t.Error("the cookie carries the token")
	}
	resp2, body := p.get(t, "/ui/slots", ck)
	if resp2.StatusCode != http.StatusOK {
		t.Fatalf("GET /ui/slots: %d\n%s", resp2.StatusCode, body)
	}
	if strings.Contains(body, hostile) || strings.Contains(body, "<script>alert") {
		t.Errorf("the hostile machine name is rendered as markup:\n%s", body)
	}
	if !strings.Contains(body, "&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;") {
		t.Errorf("the slot of the hostile machine is not shown, escaped:\n%s", body)
	}
	if strings.Contains(body, tok) {
		t.Error("a page shows the token")
	}
	if csp := resp2.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	// Revoking the token ends the session at the next page.
	p.revoked.Store(true)
	if resp, _ := p.get(t, "/ui/slots", ck); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a revoked token's session still opens pages: %d", resp.StatusCode)
	}
}

func TestLogout(t *testing.T) {
	p := newTestPool(t)
	ck := sessionCookie(t, p.login(t, p.token(t, time.Hour, auth.Read), nil))
	req, _ := http.NewRequest(http.MethodPost, p.url+Prefix+"logout", nil)
	req.Header.Set("Origin", p.url)
	req.AddCookie(ck)
	resp, err := p.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if c := sessionCookie(t, resp); c.MaxAge >= 0 || c.Value != "" {
		t.Errorf("logout left the cookie %+v", c)
	}
	if resp, _ := p.get(t, "/ui/", ck); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the session outlived its logout: %d", resp.StatusCode)
	}
}

func TestLoginRefused(t *testing.T) {
	p := newTestPool(t)
	good := p.token(t, time.Hour, auth.Read)
	other, _ := auth.NewSigningKey()
	foreign, _ := auth.Mint(other, auth.Claims{Issuer: "test-pool", Subject: "mallory", Scopes: []auth.Scope{auth.Read}, Expires: time.Now().Add(time.Hour)})
	for _, tc := range []struct {
		name  string
		token string
		hdr   map[string]string
		code  int
	}{
		{"cross-site origin", good, map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"cross-site fetch", good, map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"other scheme", good, map[string]string{"Origin": strings.Replace(p.url, "https:", "http:", 1)}, http.StatusForbidden},
		{"foreign key", foreign, nil, http.StatusUnauthorized},
		{"expired", p.token(t, -time.Hour, auth.Read), nil, http.StatusUnauthorized},
		{"no view scope", p.token(t, time.Hour, auth.AdvertiseStartd), nil, http.StatusForbidden},
		{"empty", "", nil, http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := p.login(t, tc.token, tc.hdr)
			if resp.StatusCode != tc.code {
				t.Errorf("login: %d, want %d", resp.StatusCode, tc.code)
			}
			for _, c := range resp.Cookies() {
				if c.Name == CookieName && c.Value != "" {
					t.Error("a refused login set a session cookie")
				}
			}
		})
	}
}

// TestCookieNotSecureOverHTTP: a console served in plain text (an API on
// loopback) sets a cookie the browser sends back over HTTP.
func TestCookieNotSecureOverHTTP(t *testing.T) {
	key, _ := auth.NewSigningKey()
	v := &auth.Verifier{Issuer: "p", Keys: []ed25519.PublicKey{key.Public()}}
	c, err := New(Config{Verifier: v, APIAddr: func() string { return "127.0.0.1:1" }})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	c.Register(mux)
	tok, _ := auth.Mint(key, auth.Claims{Issuer: "p", Subject: "a", Scopes: []auth.Scope{auth.SeaRead}, Expires: time.Now().Add(time.Hour)})
	req := httptest.NewRequest(http.MethodPost, "http://cm:9000/ui/login", strings.NewReader("token="+tok))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://cm:9000")
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, req)
	ck := sessionCookie(t, w.Result())
	if ck.Secure || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
		t.Errorf("cookie over HTTP: %+v", ck)
	}
}

// TestEveryPageRenders: each page renders for a viewer, saying what it
// could not read rather than failing.
func TestEveryPageRenders(t *testing.T) {
	p := newTestPool(t)
	ck := sessionCookie(t, p.login(t, p.token(t, time.Hour, auth.Read, auth.SeaRead), nil))
	for _, path := range []string{"/ui/", "/ui/slots", "/ui/slots?state=Unclaimed&start=5", "/ui/jobs", "/ui/jobs?after=bogus", "/ui/history", "/ui/history?since=bogus", "/ui/history?constraint=((", "/ui/sea", "/ui/flocks", "/ui/factory", "/ui/failover", "/ui/credentials", "/ui/static/console.js"} {
		resp, body := p.get(t, path, ck)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d\n%s", path, resp.StatusCode, body)
		}
	}
	if resp, _ := p.get(t, "/ui/nosuchpage", ck); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /ui/nosuchpage: %d, want 404", resp.StatusCode)
	}
}

// TestSharedReadsKeepScopes: the console shares its reads among the
// viewers whose tokens grant the same scopes, never with a viewer of
// other scopes, who sees only what the API answers their own token.
func TestSharedReadsKeepScopes(t *testing.T) {
	p := newTestPool(t)
	reader := sessionCookie(t, p.login(t, p.token(t, time.Hour, auth.Read, auth.SeaRead), nil))
	if _, body := p.get(t, "/ui/slots", reader); !strings.Contains(body, "slot1@") {
		t.Fatalf("a READ viewer does not see the slots:\n%s", body)
	}
	// A viewer of SEA_READ alone may not read the collector: the slots
	// just read for the other viewer are not theirs to see.
	seaOnly := sessionCookie(t, p.login(t, p.token(t, time.Hour, auth.SeaRead), nil))
	resp, body := p.get(t, "/ui/slots", seaOnly)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /ui/slots as a SEA_READ viewer: %d", resp.StatusCode)
	}
	if strings.Contains(body, "slot1@") {
		t.Errorf("a SEA_READ viewer is shown the slots another viewer's READ token read:\n%s", body)
	}
	if !strings.Contains(body, "the collector&#39;s slots") {
		t.Errorf("the page does not say the slots could not be read:\n%s", body)
	}
}

// TestSlotsFind: the slots page finds a slot among every slot by its
// name, machine or owner, and says how many more follow a page.
func TestSlotsFind(t *testing.T) {
	p := newTestPool(t)
	var ads []wire.Ad
	for i := 0; i < 250; i++ {
		ads = append(ads, wire.Ad{"MyType": `"Machine"`, "Name": fmt.Sprintf(`"slot1@n%03d"`, i), "Machine": fmt.Sprintf(`"n%03d"`, i),
			"State": `"Unclaimed"`, "Activity": `"Idle"`})
	}
	if _, err := p.coll.Update(context.Background(), &wire.UpdateRequest{Type: wire.TypeMachine, Source: "startd@many", Ads: ads}); err != nil {
		t.Fatal(err)
	}
	ck := sessionCookie(t, p.login(t, p.token(t, time.Hour, auth.Read, auth.SeaRead), nil))
	_, body := p.get(t, "/ui/slots", ck)
	if !strings.Contains(body, "next (151 more)") {
		t.Errorf("the first page of 251 slots does not say 151 more follow:\n%s", body)
	}
	_, body = p.get(t, "/ui/slots?q=N207", ck)
	if !strings.Contains(body, "slot1@n207") || strings.Contains(body, "slot1@n000") || !strings.Contains(body, "1 slots") {
		t.Errorf("finding n207 among 251 slots:\n%s", body)
	}
}

// TestHistoryPage: the history page lists the slots' state changes and
// the configuration changes the collector recorded, of one machine and
// a period, selected by a constraint, escaped; and the slots page links
// to it.
func TestHistoryPage(t *testing.T) {
	p := newTestPool(t)
	ctx := context.Background()
	esc := strings.ReplaceAll(hostile, `"`, `\"`)
	busy := wire.Ad{"Name": `"slot1@` + esc + `"`, "Machine": `"` + esc + `"`, "State": `"Claimed"`, "Activity": `"Busy"`,
		"RemoteUser": `"alice@pool"`, "JobId": `"7.0"`, "MyType": `"Machine"`}
	other := wire.Ad{"Name": `"slot1@quiet"`, "Machine": `"quiet"`, "State": `"Owner"`, "Activity": `"Idle"`, "MyType": `"Machine"`}
	for _, u := range []struct {
		src string
		ad  wire.Ad
	}{{"startd@evil", busy}, {"startd@quiet", other}} {
		if _, err := p.coll.Update(ctx, &wire.UpdateRequest{Type: wire.TypeMachine, Source: u.src, Ads: []wire.Ad{u.ad}}); err != nil {
			t.Fatal(err)
		}
	}
	p.hist.ObserveConfig([]history.ConfigChange{{Node: hostile, Knob: "START", Old: "true", New: "false", Who: "admin"}})
	ck := sessionCookie(t, p.login(t, p.token(t, time.Hour, auth.Read, auth.SeaRead), nil))
	if _, body := p.get(t, "/ui/slots", ck); !strings.Contains(body, `href="/ui/history"`) || !strings.Contains(body, `href="/ui/history?machine=%3cscript%3e`) {
		t.Errorf("the slots page does not link to the history, nor a machine to its own:\n%s", body)
	}
	var body string
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, body = p.get(t, "/ui/history?since=1h", ck)
		if strings.Contains(body, "Claimed") && strings.Contains(body, "START") || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	escaped := "&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;"
	for _, want := range []string{"slot1@" + escaped, "Claimed", "alice@pool", "7.0", "slot1@quiet", "Owner", ">START<", ">false<", "admin"} {
		if !strings.Contains(body, want) {
			t.Errorf("the history does not show %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, hostile) {
		t.Errorf("the history renders a machine's name as markup:\n%s", body)
	}
	for _, tc := range []struct {
		name, query string
		want, not   []string
	}{
		{"one machine", "?machine=quiet", []string{"slot1@quiet"}, []string{"alice@pool", ">START<"}},
		{"a constraint", "?constraint=" + url.QueryEscape(`State == "Claimed"`), []string{"alice@pool"}, []string{"slot1@quiet", ">START<"}},
		{"a constraint on changes", "?constraint=" + url.QueryEscape(`Knob == "START"`), []string{">START<"}, []string{"slot1@quiet", "alice@pool"}},
		{"a period before the changes", "?since=3h&until=2h", []string{"0 slot states, 0 configuration changes"}, []string{"slot1@quiet"}},
		{"a bad constraint", "?constraint=" + url.QueryEscape("State =="), []string{"could not read the collector&#39;s history"}, []string{"slot1@quiet"}},
		{"a bad period", "?since=yesterday", []string{"is no duration"}, []string{"slot1@quiet"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := p.get(t, "/ui/history"+tc.query, ck)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /ui/history%s: %d", tc.query, resp.StatusCode)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("lacks %q:\n%s", w, body)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(body, n) {
					t.Errorf("shows %q:\n%s", n, body)
				}
			}
		})
	}
	// The pool as it was: each slot's last machine ad snapshot, every
	// value escaped; a constraint over the snapshots' ads.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, body = p.get(t, "/ui/history?at=0s", ck)
		if strings.Contains(body, "slot1@quiet") && strings.Contains(body, "alice@pool") || time.Now().After(deadline) {
			break
		}
	}
	for _, want := range []string{"the pool at", "slot1@" + escaped, "slot1@quiet", "Owner", "alice@pool", `href="/ui/history?machine=quiet&amp;at=0s"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the pool as it was does not show %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, hostile) {
		t.Errorf("the pool as it was renders a machine's name as markup:\n%s", body)
	}
	for _, tc := range []struct {
		name, query string
		want, not   []string
	}{
		{"a constraint over the ads", "?at=0s&constraint=" + url.QueryEscape(`State == "Owner"`), []string{"slot1@quiet", "1 slots"}, []string{"alice@pool"}},
		{"before any snapshot", "?at=3h", []string{"0 slots"}, []string{"slot1@quiet"}},
		{"a bad time", "?at=yesterday", []string{"is no duration"}, []string{"slot1@quiet"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, body := p.get(t, "/ui/history"+tc.query, ck)
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("lacks %q:\n%s", w, body)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(body, n) {
					t.Errorf("shows %q:\n%s", n, body)
				}
			}
		})
	}
	// A period of more rows than a page: PageSize a page, and how many
	// more follow.
	var many []wire.Ad
	for i := range 150 {
		many = append(many, wire.Ad{"MyType": `"Machine"`, "Name": fmt.Sprintf(`"slot1@m%03d"`, i), "Machine": fmt.Sprintf(`"m%03d"`, i),
			"State": `"Unclaimed"`, "Activity": `"Idle"`})
	}
	if _, err := p.coll.Update(ctx, &wire.UpdateRequest{Type: wire.TypeMachine, Source: "startd@many", Ads: many}); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		_, body = p.get(t, "/ui/history?constraint="+url.QueryEscape(`regexp("^m", Machine)`), ck)
		if strings.Contains(body, "150 slot states") || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(body, "150 slot states") || !strings.Contains(body, "next (50 more)") || !strings.Contains(body, "slot1@m099") || strings.Contains(body, "slot1@m100") {
		t.Errorf("the first page of 150 slot states:\n%s", body)
	}
	if _, body = p.get(t, "/ui/history?start=100&constraint="+url.QueryEscape(`regexp("^m", Machine)`), ck); !strings.Contains(body, "slot1@m149") || strings.Contains(body, "slot1@m099") || !strings.Contains(body, ">previous<") {
		t.Errorf("the second page of 150 slot states:\n%s", body)
	}
	// A viewer whose token may not read the pool is not shown its history.
	sea := sessionCookie(t, p.login(t, p.token(t, time.Hour, auth.SeaRead), nil))
	if _, body := p.get(t, "/ui/history", sea); strings.Contains(body, "alice@pool") {
		t.Errorf("a SEA_READ viewer is shown the pool's history:\n%s", body)
	}
}

// FuzzAgo: the history page's period parser answers every input with a
// duration before now, never negative, or an error naming the field.
func FuzzAgo(f *testing.F) {
	for _, s := range []string{"1h", "7d", "30m", "90", "-1h", "1.5d", "", "d", "9999999999d", "1h30m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ago("since", s)
		if err != nil {
			if !strings.Contains(err.Error(), "since=") {
				t.Errorf("ago(%q): %v does not name the field", s, err)
			}
			return
		}
		if d < 0 {
			t.Errorf("ago(%q) = %v", s, d)
		}
	})
}
