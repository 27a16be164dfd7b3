package console

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
)

// Proxy serves the console of the agent at target (its API address) to a
// browser on this host, in plain HTTP on a loopback address, calling the
// agent with tlsCfg (the sea's client TLS; nil for plain HTTP). Browsers
// do not speak TLS with the sea's Ed25519 certificates: an operator opens
// the console through pondctl sea console, which runs this proxy.
//
// The proxy forwards only the console's paths and adds nothing of its
// own to a request (no token, no client certificate beyond tlsCfg's): the
// viewer logs in at the agent as they would directly. It keeps the
// agent's origin check: a form it forwards must come from the proxy's own
// pages, and reaches the agent as from the agent's. The session cookie
// loses its Secure flag on the way back, the browser's leg being plain
// HTTP on loopback.
func Proxy(target string, tlsCfg *tls.Config) http.Handler {
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
	}
	u := &url.URL{Scheme: scheme, Host: target}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Header.Del("Authorization")
			pr.Out.Header.Del("Referer")
			if pr.Out.Header.Get("Origin") != "" {
				pr.Out.Header.Set("Origin", u.String())
			}
		},
		ModifyResponse: func(resp *http.Response) error {
			cookies := resp.Header.Values("Set-Cookie")
			resp.Header.Del("Set-Cookie")
			for _, c := range cookies {
				resp.Header.Add("Set-Cookie", withoutSecure(c))
			}
			return nil
		},
	}
	if tlsCfg != nil {
		rp.Transport = &http.Transport{TLSClientConfig: tlsCfg, ForceAttemptHTTP2: false}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ui" && !strings.HasPrefix(r.URL.Path, Prefix) {
			if r.URL.Path == "/" {
				http.Redirect(w, r, Prefix, http.StatusSeeOther)
				return
			}
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !sameOrigin(r) {
			http.Error(w, "cross-site request refused", http.StatusForbidden)
			return
		}
		rp.ServeHTTP(w, r)
	})
}

// withoutSecure drops the Secure attribute of a Set-Cookie value.
func withoutSecure(c string) string {
	parts := strings.Split(c, ";")
	out := parts[:0]
	for _, p := range parts {
		if !strings.EqualFold(strings.TrimSpace(p), "Secure") {
			out = append(out, p)
		}
	}
	return strings.Join(out, ";")
}

// CheckLoopback refuses a proxy listen address that is not on loopback:
// the proxy's cookies travel in plain text.
func CheckLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return errors.New(addr + " is not a loopback address: the console's proxy serves plain HTTP, for a browser on this host only")
	}
	return nil
}
