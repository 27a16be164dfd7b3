package console

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
)

// TestProxy: the loopback proxy forwards the console's paths only, logs
// in at the agent from its own pages, refuses another origin's form, and
// hands back a cookie without Secure for its plain-HTTP leg.
func TestProxy(t *testing.T) {
	p := newTestPool(t)
	clientTLS := p.srv.Client().Transport.(*http.Transport).TLSClientConfig
	px := httptest.NewServer(Proxy(p.srv.Listener.Addr().String(), clientTLS))
	t.Cleanup(px.Close)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	resp, err := noFollow.Get(px.URL + "/v1/self")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /v1/self through the proxy: %d, want 404", resp.StatusCode)
	}

	tok := p.token(t, time.Hour, auth.Read, auth.SeaRead)
	post := func(origin string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, px.URL+Prefix+"login", strings.NewReader(url.Values{"token": {tok}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", origin)
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if resp := post("http://evil.example"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a cross-site login through the proxy: %d, want 403", resp.StatusCode)
	}
	resp = post(px.URL)
	ck := sessionCookie(t, resp)
	if ck.Secure || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
		t.Errorf("the proxy's cookie: %+v, want HttpOnly, SameSite=Strict, not Secure", ck)
	}
	req, _ := http.NewRequest(http.MethodGet, px.URL+"/ui/slots", nil)
	req.AddCookie(ck)
	resp, err = noFollow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "slot1@") {
		t.Errorf("GET /ui/slots through the proxy: %d\n%s", resp.StatusCode, body)
	}
}

func TestCheckLoopback(t *testing.T) {
	for addr, ok := range map[string]bool{"127.0.0.1:0": true, "[::1]:8080": true, "localhost:1": true,
		"0.0.0.0:8080": false, ":8080": false, "10.0.0.1:80": false, "nonsense": false} {
		if err := CheckLoopback(addr); (err == nil) != ok {
			t.Errorf("CheckLoopback(%q) = %v", addr, err)
		}
	}
}
