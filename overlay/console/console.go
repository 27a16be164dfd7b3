// Package console serves the web console of a central manager's agent at
// /ui/: server-rendered pages of the pool's slots and jobs, the sea's
// members and ponds, flocks, the pilot factory, fail-over and the expiry
// of credentials. It reads everything through the clients the command
// line uses (overlay/api for the agent's routes, condor/wire for the
// daemons'), presenting the viewer's own token, so that the console shows
// a viewer exactly what the API would answer them and nothing more.
//
// A viewer logs in with a token of the API (POST /ui/login); the console
// keeps it in memory under a random session ID, which it sets in an
// HttpOnly, SameSite=Strict cookie (Secure over TLS), and checks the
// token again with the agent's verifier on every request.
package console

import (
	"crypto/rand"
	"crypto/tls"
	"embed"
	"encoding/base64"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pond-htc/pond/condor/auth"
)

// Prefix is where the console is served.
const Prefix = "/ui/"

// CookieName names the console's session cookie.
const CookieName = "pond_console"

// Session bounds.
const (
	// MaxSessions bounds the sessions kept at once: a login past it
	// replaces the session closest to its end.
	MaxSessions = 1024
	// SessionLifetime bounds a session; the token's expiry ends it
	// earlier.
	SessionLifetime = 12 * time.Hour
	// maxForm bounds the body of the login form.
	maxForm = 64 << 10
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// viewScopes are the scopes of which a token must grant one to log in:
// reading the pool (READ) or the sea (SEA_READ). Each page's reads are
// then authorized by the routes they call.
var viewScopes = []auth.Scope{auth.Read, auth.SeaRead}

// Config is what the console needs from its agent.
type Config struct {
	// Verifier checks the viewers' tokens: the agent's own. Nil when the
	// agent's API is open to anyone: so is the console, without login.
	Verifier *auth.Verifier
	// APIAddr is the agent's API address, which the console calls as the
	// command line does.
	APIAddr func() string
	// TLS is the sea's client TLS (nil for plain HTTP), with which the
	// console calls the agent and the pool's daemons.
	TLS *tls.Config
	// Logger logs logins and logouts (nil: slog's default).
	Logger *slog.Logger
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Console serves the web console.
type Console struct {
	cfg   Config
	pages map[string]*template.Template
	login *template.Template

	mu       sync.Mutex
	sessions map[string]*session

	reads sharedReads
}

// session is a logged-in viewer: the token the console presents for them.
type session struct {
	token   string
	subject string
	expires time.Time
	// scopes names the token's scopes (scopeKey): the console shares
	// its reads among the viewers of the same.
	scopes string
}

// New returns a console with cfg.
func New(cfg Config) (*Console, error) {
	if cfg.APIAddr == nil {
		return nil, errors.New("console: no API address")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Console{cfg: cfg, pages: map[string]*template.Template{}, sessions: map[string]*session{}}
	base, err := template.New("layout.html").Funcs(funcs(cfg.Now)).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return nil, err
	}
	for _, p := range pageNames {
		t, err := base.Clone()
		if err != nil {
			return nil, err
		}
		if c.pages[p], err = t.ParseFS(templateFS, "templates/"+p+".html"); err != nil {
			return nil, err
		}
	}
	if c.login, err = template.New("login.html").ParseFS(templateFS, "templates/login.html"); err != nil {
		return nil, err
	}
	return c, nil
}

// pageNames are the console's pages, each a template and a path under
// Prefix ("overview" at Prefix itself).
var pageNames = []string{"overview", "slots", "history", "jobs", "sea", "flocks", "factory", "failover", "credentials"}

// Register adds the console's routes under Prefix to mux.
func (c *Console) Register(mux *http.ServeMux) {
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET "+Prefix+"static/", c.headers(http.StripPrefix(Prefix+"static/", http.FileServerFS(static))))
	mux.Handle("GET "+Prefix+"login", c.headers(http.HandlerFunc(c.loginPage)))
	mux.Handle("POST "+Prefix+"login", c.headers(http.HandlerFunc(c.doLogin)))
	mux.Handle("POST "+Prefix+"logout", c.headers(http.HandlerFunc(c.doLogout)))
	mux.Handle("GET "+Prefix+"{$}", c.headers(c.page("overview")))
	for _, p := range pageNames[1:] {
		mux.Handle("GET "+Prefix+p, c.headers(c.page(p)))
	}
	mux.Handle(Prefix, c.headers(http.NotFoundHandler()))
	mux.Handle("GET /ui", http.RedirectHandler(Prefix, http.StatusMovedPermanently))
}

// headers sets the console's security headers: no script, style or frame
// but its own, no caching of pages that hold the pool's state, no
// referrer leaving the console.
func (c *Console) headers(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "same-origin")
		hd.Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

// viewer returns the session of the request's cookie, its token verified
// again (it may have been revoked or have expired since the login), or
// nil. Without a verifier every request is a viewer's.
func (c *Console) viewer(r *http.Request) *session {
	if c.cfg.Verifier == nil {
		return &session{subject: "(open API)", scopes: scopeKey(nil)}
	}
	ck, err := r.Cookie(CookieName)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	s, ok := c.sessions[ck.Value]
	if ok && !c.cfg.Now().Before(s.expires) {
		delete(c.sessions, ck.Value)
		ok = false
	}
	c.mu.Unlock()
	if !ok {
		return nil
	}
	cl, err := c.cfg.Verifier.Verify(s.token)
	if err != nil || !slices.ContainsFunc(viewScopes, cl.Allows) {
		c.mu.Lock()
		delete(c.sessions, ck.Value)
		c.mu.Unlock()
		return nil
	}
	return s
}

// toLogin redirects to the login page.
func toLogin(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
}

// loginData is what the login page shows.
type loginData struct {
	Error string
	Open  bool
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Verifier == nil {
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
		return
	}
	c.renderLogin(w, http.StatusOK, "")
}

func (c *Console) renderLogin(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	if err := c.login.Execute(w, loginData{Error: msg}); err != nil {
		c.cfg.Logger.Warn("console: rendering the login page", "err", err)
	}
}

// sameOrigin reports whether a state-changing request comes from the
// console's own pages: its Origin (or, without one, its Referer) names
// the host it was sent to, and the browser does not call it cross-site.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	src := r.Header.Get("Origin")
	if src == "" || src == "null" {
		src = r.Header.Get("Referer")
	}
	if src == "" {
		// A browser that sends neither says where the request comes from
		// in Sec-Fetch-Site, which no page can set; a command-line client
		// that sends none of them carries no cookie to abuse.
		site := r.Header.Get("Sec-Fetch-Site")
		return site == "" || site == "same-origin"
	}
	u, err := url.Parse(src)
	if err != nil {
		return false
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return u.Scheme == scheme && strings.EqualFold(u.Host, r.Host)
}

// doLogin takes the token of the login form, verifies it and, when it
// grants a view scope, opens a session.
func (c *Console) doLogin(w http.ResponseWriter, r *http.Request) {
	if c.cfg.Verifier == nil {
		http.Redirect(w, r, Prefix, http.StatusSeeOther)
		return
	}
	if !sameOrigin(r) {
		c.renderLogin(w, http.StatusForbidden, "The login came from another site: open the console's own login page.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		c.renderLogin(w, http.StatusBadRequest, "The login form could not be read.")
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	if token == "" {
		c.renderLogin(w, http.StatusUnauthorized, "Paste a token: pondctl token create -subject NAME -scope READ,SEA_READ makes one.")
		return
	}
	cl, err := c.cfg.Verifier.Verify(token)
	if err != nil {
		msg := "The token is not valid here."
		for _, e := range []error{auth.ErrExpired, auth.ErrRevoked, auth.ErrInvalid} {
			if errors.Is(err, e) {
				msg = "The token is not valid here: " + e.Error() + "."
				break
			}
		}
		c.cfg.Logger.Info("console: login refused", "remote", r.RemoteAddr, "err", err)
		c.renderLogin(w, http.StatusUnauthorized, msg)
		return
	}
	if !slices.ContainsFunc(viewScopes, cl.Allows) {
		c.cfg.Logger.Info("console: login refused", "remote", r.RemoteAddr, "subject", cl.Subject, "err", "no view scope")
		c.renderLogin(w, http.StatusForbidden, "The token of "+cl.Subject+" grants neither READ nor SEA_READ.")
		return
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		c.renderLogin(w, http.StatusInternalServerError, "No session could be made.")
		return
	}
	id := base64.RawURLEncoding.EncodeToString(b[:])
	now := c.cfg.Now()
	s := &session{token: token, subject: cl.Subject, expires: now.Add(SessionLifetime), scopes: scopeKey(cl)}
	if !cl.Expires.IsZero() && cl.Expires.Before(s.expires) {
		s.expires = cl.Expires
	}
	c.mu.Lock()
	c.prune(now)
	c.sessions[id] = s
	c.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: id, Path: Prefix, Expires: s.expires,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	c.cfg.Logger.Info("console: login", "remote", r.RemoteAddr, "subject", cl.Subject)
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
}

// prune drops the sessions that ended and, at MaxSessions, the one that
// ends first. c.mu is held.
func (c *Console) prune(now time.Time) {
	for id, s := range c.sessions {
		if !now.Before(s.expires) {
			delete(c.sessions, id)
		}
	}
	for len(c.sessions) >= MaxSessions {
		first := ""
		for id, s := range c.sessions {
			if first == "" || s.expires.Before(c.sessions[first].expires) {
				first = id
			}
		}
		delete(c.sessions, first)
	}
}

// doLogout ends the session of the request's cookie and clears it.
func (c *Console) doLogout(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "cross-site request refused", http.StatusForbidden)
		return
	}
	if ck, err := r.Cookie(CookieName); err == nil {
		c.mu.Lock()
		if s, ok := c.sessions[ck.Value]; ok {
			c.cfg.Logger.Info("console: logout", "remote", r.RemoteAddr, "subject", s.subject)
		}
		delete(c.sessions, ck.Value)
		c.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: Prefix, MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	toLogin(w, r)
}
