// Package wire is the protocol spoken between the daemons of a pond pool:
// versioned HTTP+JSON requests under PathPrefix, authenticated with the
// caller's scoped token (condor/auth) as a bearer token, carrying ClassAds
// as maps of attribute name to ClassAd expression text.
//
// Each daemon's messages and typed client are in a file of its own
// (collector.go, schedd.go, startd.go, negotiator.go, master.go), over the
// one Client. Client, Handle, ReadJSON, WriteJSON, WriteError and Error
// serve any API in the same JSON-over-HTTP style, such as a node agent's.
package wire

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/classad"
)

// Version is the protocol version; it is part of every request path.
const Version = "v1"

// PathPrefix is the path under which a node's daemons are served.
const PathPrefix = "/condor/" + Version + "/"

// TokenHeader carries the caller's token ("Bearer TOKEN") on every
// request.
const TokenHeader = "Authorization"

// Ad is a ClassAd on the wire: attribute name -> expression text.
type Ad = map[string]string

// Authorize checks that the caller of a request may do what needs the
// scope need: that the claims the daemons' handler verified (see
// auth.FromContext) grant it. A request without claims comes from an open
// pool, whose node trusts no keys, and is let through. The error wraps
// ErrForbidden (HTTP 403).
func Authorize(ctx context.Context, need auth.Scope) error {
	c, ok := auth.FromContext(ctx)
	if !ok || c.Allows(need) {
		return nil
	}
	return fmt.Errorf("%w: %s's token does not grant %s", ErrForbidden, c.Subject, need.Name())
}

// Error is an error answered by a remote daemon or API; find it with
// errors.As.
type Error struct {
	Status int    // HTTP status
	Msg    string // the server's message
}

// Error implements error.
func (e *Error) Error() string { return fmt.Sprintf("%s (HTTP %d)", e.Msg, e.Status) }

type errorBody struct {
	Error string `json:"error"`
}

// WriteJSON answers v as JSON with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteError answers err as a JSON error body.
func WriteError(w http.ResponseWriter, status int, err error) {
	WriteJSON(w, status, errorBody{Error: err.Error()})
}

// MaxBody bounds how much of a request body ReadJSON reads, and how much
// of an answer a Client reads. LimitBody sets a lower bound for a server.
const MaxBody = 1 << 30

// ReadJSON decodes a request body into v. A body over the server's limit
// (LimitBody) gives an error wrapping *http.MaxBytesError.
func ReadJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, MaxBody))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decoding %s request: %w", r.URL.Path, err)
	}
	return nil
}

// LimitBody wraps h so that the request bodies it reads are cut at limit
// bytes: ReadJSON then fails and Handle answers 413.
func LimitBody(limit int64, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		h.ServeHTTP(w, r)
	})
}

// readRequest decodes the JSON body of a POST into a new In; it answers
// any other method, a body that does not decode and one over its limit
// itself, and then reports false.
func readRequest[In any](w http.ResponseWriter, r *http.Request) (*In, bool) {
	if r.Method != http.MethodPost {
		WriteError(w, http.StatusMethodNotAllowed, fmt.Errorf("%s needs POST", r.URL.Path))
		return nil, false
	}
	in := new(In)
	if err := ReadJSON(r, in); err != nil {
		WriteError(w, BodyErrorStatus(err), err)
		return nil, false
	}
	return in, true
}

// BodyErrorStatus is the HTTP status that answers a request whose body
// could not be read or decoded: 413 for a body over the server's limit
// (LimitBody), 400 otherwise.
func BodyErrorStatus(err error) int {
	if tooLarge := new(http.MaxBytesError); errors.As(err, &tooLarge) {
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusBadRequest
}

// Handle adapts a typed request handler to an http.HandlerFunc: it decodes
// the JSON body of a POST into a new In, calls f and answers its result or
// its error with the status ErrorStatus gives.
func Handle[In, Out any](f func(ctx context.Context, in *In) (Out, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		in, ok := readRequest[In](w, r)
		if !ok {
			return
		}
		out, err := f(r.Context(), in)
		if err != nil {
			WriteError(w, ErrorStatus(err), err)
			return
		}
		WriteJSON(w, http.StatusOK, out)
	}
}

// ErrorStatus is the HTTP status that answers a handler's error: 400 for
// errors wrapping ErrBadRequest, 403 for ErrForbidden, 404 for
// ErrNotFound, 409 for ErrConflict, 412 for ErrResend, 500 otherwise.
func ErrorStatus(err error) int {
	switch {
	case errors.Is(err, ErrBadRequest):
		return http.StatusBadRequest
	case errors.Is(err, ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, ErrConflict):
		return http.StatusConflict
	case errors.Is(err, ErrResend):
		return http.StatusPreconditionFailed
	}
	return http.StatusInternalServerError
}

// Errors handlers wrap to choose the HTTP status.
var (
	ErrBadRequest = errors.New("bad request")
	ErrForbidden  = errors.New("forbidden")
	ErrNotFound   = errors.New("not found")
	ErrConflict   = errors.New("conflict")
	// ErrResend (HTTP 412) answers a job's final report whose outputs
	// the schedd does not hold (it was restarted since they arrived):
	// the starter sends them again, then the report.
	ErrResend = errors.New("the outputs the report lists did not arrive")
)

// Client calls the daemons of one node (an agent's API address), or any
// other JSON-over-HTTP API in the same style. A Client may be shared by
// goroutines.
type Client struct {
	// Addr is the host:port of the node's API, or its base URL
	// (http://host:port).
	Addr string
	// Token is the token presented (see condor/auth); a client without
	// one sends no Authorization header.
	Token string
	// HTTP is the HTTP client used (nil: one sharing a transport with
	// every other client).
	HTTP *http.Client
	// Timeout bounds each call, on top of its context; zero means no
	// bound but the context's.
	Timeout time.Duration
	// TLS, when set, makes the client speak HTTPS with it (and only
	// HTTPS: an Addr with an http:// scheme is refused). Clients
	// sharing one TLS configuration share a transport, unless HTTP is
	// set.
	TLS *tls.Config
	// HandshakeTimeout bounds a new connection's TLS handshake; zero
	// means DefaultHandshakeTimeout. Clients of one TLS configuration and
	// handshake timeout share a transport.
	HandshakeTimeout time.Duration
}

// DefaultHandshakeTimeout bounds a daemon's TLS handshakes with its
// peers: a peer that accepts a connection and does not finish its
// handshake in time is taken as unreachable. A command a person or a
// script runs waits longer for a busy daemon (ToolHandshakeTimeout).
const DefaultHandshakeTimeout = 5 * time.Second

// ToolHandshakeTimeout bounds the TLS handshakes of the condor tools: a
// central manager saturated by thousands of slots may take more than
// DefaultHandshakeTimeout to get to a new connection, and a command
// given up on then fails a submission that a few more seconds would have
// made.
const ToolHandshakeTimeout = 30 * time.Second

// sharedTransport is used by clients without their own HTTP client; it keeps
// enough idle connections per host for a busy schedd and startd.
var sharedTransport = &http.Transport{
	Proxy:               nil,
	DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	MaxIdleConns:        256,
	MaxIdleConnsPerHost: 64,
	IdleConnTimeout:     90 * time.Second,
}

// NewClient returns a client of the node at addr (host:port or a base URL),
// without a timeout.
func NewClient(addr, token string) *Client {
	return &Client{Addr: addr, Token: token, HTTP: &http.Client{Transport: sharedTransport}}
}

// tlsTransports holds the transport of each TLS configuration and
// handshake timeout clients were given, so that the clients of one
// configuration share connections.
var tlsTransports sync.Map // transportKey -> *http.Transport

// transportKey names a transport of tlsTransports.
type transportKey struct {
	cfg       *tls.Config
	handshake time.Duration
}

// tlsTransport is the transport of the clients of cfg whose handshakes
// are bounded by handshake (zero: DefaultHandshakeTimeout).
func tlsTransport(cfg *tls.Config, handshake time.Duration) *http.Transport {
	if handshake <= 0 {
		handshake = DefaultHandshakeTimeout
	}
	key := transportKey{cfg, handshake}
	if t, ok := tlsTransports.Load(key); ok {
		return t.(*http.Transport)
	}
	t := sharedTransport.Clone()
	t.TLSClientConfig = cfg
	t.TLSHandshakeTimeout = handshake
	t.ForceAttemptHTTP2 = false
	actual, _ := tlsTransports.LoadOrStore(key, t)
	return actual.(*http.Transport)
}

// WithTLS returns a copy of c that speaks HTTPS with cfg (see
// Client.TLS); nil gives a copy that speaks plain HTTP.
func (c *Client) WithTLS(cfg *tls.Config) *Client {
	cp := *c
	cp.TLS = cfg
	if cp.HTTP != nil && cp.HTTP.Transport == sharedTransport {
		cp.HTTP = nil
	}
	return &cp
}

// WithHandshakeTimeout returns a copy of c whose TLS handshakes are
// bounded by d (zero: DefaultHandshakeTimeout).
func (c *Client) WithHandshakeTimeout(d time.Duration) *Client {
	cp := *c
	cp.HandshakeTimeout = d
	return &cp
}

// WithTimeout returns a copy of c whose calls are bounded by d; zero
// gives a copy without a timeout, for long calls such as a drain.
func (c *Client) WithTimeout(d time.Duration) *Client {
	cp := *c
	cp.Timeout = d
	return &cp
}

// Call posts in as JSON to the daemon endpoint path (relative to PathPrefix,
// e.g. "collector/query") and decodes the answer into out (unless nil).
func (c *Client) Call(ctx context.Context, path string, in, out any) error {
	return c.Do(ctx, http.MethodPost, PathPrefix+path, in, out)
}

// Do sends a request with method to path (from the root of the API, e.g.
// "/v1/health"), with in as its JSON body unless in is nil, and decodes a
// 200 answer into out (unless nil). Another status gives an error wrapping
// an *Error with the status and the server's message.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	contentType := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encoding %s request: %w", path, err)
		}
		body, contentType = bytes.NewReader(b), "application/json"
	}
	return c.do(ctx, method, path, contentType, body, out)
}

// do sends a request with method to path with body (of contentType, none
// when empty) and decodes a 200 answer into out (unless nil).
func (c *Client) do(ctx context.Context, method, path, contentType string, body io.Reader, out any) error {
	return c.send(ctx, method, path, contentType, body, func(url string, r io.Reader) error {
		r = io.LimitReader(r, MaxBody)
		if out == nil {
			_, _ = io.Copy(io.Discard, r)
			return nil
		}
		if err := json.NewDecoder(r).Decode(out); err != nil {
			return fmt.Errorf("decoding answer of %s: %w", url, err)
		}
		return nil
	})
}

// CallStream posts in as JSON to the daemon endpoint path (relative to
// PathPrefix) and hands a 200 answer's body to read as it arrives (see
// HandleStream); another status gives an error as Call's. The body is
// not bounded: read consumes it as it comes.
func (c *Client) CallStream(ctx context.Context, path string, in any, read func(io.Reader) error) error {
	b, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("encoding %s request: %w", path, err)
	}
	return c.send(ctx, http.MethodPost, PathPrefix+path, "application/json", bytes.NewReader(b), func(_ string, r io.Reader) error {
		return read(r)
	})
}

// send sends a request with method to path with body (of contentType, none
// when empty) and hands a 200 answer's body to read.
func (c *Client) send(ctx context.Context, method, path, contentType string, body io.Reader, read func(url string, r io.Reader) error) error {
	base, err := c.baseURL()
	if err != nil {
		return err
	}
	url := base + path
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return fmt.Errorf("calling %s: %w", url, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.Token != "" {
		if c.TLS == nil && !loopback(req.URL.Hostname()) && req.URL.Scheme != "https" {
			return fmt.Errorf("calling %s: %w", url, ErrTokenInClear)
		}
		req.Header.Set(TokenHeader, "Bearer "+c.Token)
	}
	hc := c.HTTP
	switch {
	case hc != nil:
	case c.TLS != nil:
		hc = &http.Client{Transport: tlsTransport(c.TLS, c.HandshakeTimeout)}
	default:
		hc = &http.Client{Transport: sharedTransport}
	}
	// Whether the request went out whole: a call that fails before it
	// did (no connection, a handshake that failed, a pooled connection
	// the server had closed) was not taken by the server.
	var wrote atomic.Bool
	req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err == nil {
			wrote.Store(true)
		}
	}}))
	resp, err := hc.Do(req)
	if err != nil {
		if c.TLS != nil && isNotTLS(err) {
			return fmt.Errorf("calling %s: %w: the server at %s does not speak TLS (an agent started without -tls-cert?) while this client holds the sea's CA and speaks only TLS", url, ErrNotTLS, c.Addr)
		}
		if !wrote.Load() || writeFailed(err) {
			return fmt.Errorf("calling %s: %w: %w", url, ErrNotSent, err)
		}
		return fmt.Errorf("calling %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		ae := answerError(resp)
		if c.TLS == nil && resp.StatusCode == http.StatusBadRequest && strings.Contains(ae.Msg, "HTTP request to an HTTPS server") {
			return fmt.Errorf("calling %s: %w: the server speaks TLS; give this client the sea's CA (the working directory's .pond/auth/ca.pem, or POND_TLS_CA)", url, ErrPlainToTLS)
		}
		return fmt.Errorf("calling %s: %w", url, ae)
	}
	return read(url, resp.Body)
}

// writeFailed reports whether err is that of a request whose bytes did
// not all go out. The transport buffers a small request whole and writes
// it to the connection after the trace's WroteRequest: a write that fails
// then (a pooled connection the server had reset: broken pipe) leaves the
// request cut short, and a body cut short is not read whole by the
// server, which takes nothing of it.
func writeFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "write"
}

// loopback reports whether host (an IP address or a name) is this machine
// only.
func loopback(host string) bool {
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	return host == "localhost"
}

func (c *Client) baseURL() (string, error) {
	addr := strings.TrimRight(c.Addr, "/")
	scheme, rest, ok := strings.Cut(addr, "://")
	switch {
	case !ok && c.TLS != nil:
		return "https://" + addr, nil
	case !ok:
		return "http://" + addr, nil
	case c.TLS != nil && scheme == "http":
		return "", fmt.Errorf("calling %s: %w: this client holds the sea's CA and speaks only TLS", addr, ErrNotTLS)
	case c.TLS != nil:
		return "https://" + rest, nil
	}
	return addr, nil
}

// Errors of a client and a server that disagree about TLS.
var (
	// ErrNotTLS is the error of a client with TLS whose server speaks
	// plain HTTP.
	ErrNotTLS = errors.New("the server does not speak TLS")
	// ErrTokenInClear is the error of a client without TLS that would send
	// its token over plain HTTP to an address other than a loopback one,
	// where anyone on the way could read it.
	ErrTokenInClear = errors.New("refusing to send a token in clear to an address other hosts can reach: give this client the sea's CA (the working directory's .pond/auth/ca.pem, or POND_TLS_CA)")
	// ErrNotSent wraps the error of a call that failed before its request
	// went out whole (no connection, a TLS handshake that failed, a
	// pooled connection the server had closed): the server did not take
	// it, and sending it again cannot make it happen twice.
	ErrNotSent = errors.New("the request was not sent")
	// ErrPlainToTLS is the error of a client without TLS whose server
	// speaks TLS.
	ErrPlainToTLS = errors.New("a plain HTTP client called a TLS server")
)

// isNotTLS reports whether err is that of a TLS client whose server
// answered in plain text.
func isNotTLS(err error) bool {
	var rh tls.RecordHeaderError
	return errors.As(err, &rh) || strings.Contains(err.Error(), "does not look like a TLS handshake") ||
		strings.Contains(err.Error(), "server gave HTTP response to HTTPS client")
}

// answerError reads a non-200 answer: its {"error": ...} message, else its
// body's text.
func answerError(resp *http.Response) *Error {
	var eb errorBody
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if json.Unmarshal(b, &eb) != nil || eb.Error == "" {
		eb.Error = strings.TrimSpace(string(b))
	}
	if eb.Error == "" {
		eb.Error = http.StatusText(resp.StatusCode)
	}
	return &Error{Status: resp.StatusCode, Msg: eb.Error}
}

// ToClassAd parses a wire ad into a ClassAd, in sorted attribute order.
func ToClassAd(a Ad) (*classad.Ad, error) {
	ad := classad.NewAdSize(len(a))
	names := make([]string, 0, len(a))
	for k := range a {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if err := ad.SetExpr(k, a[k]); err != nil {
			return nil, fmt.Errorf("attribute %s: %w", k, err)
		}
	}
	return ad, nil
}

// FromClassAd renders a ClassAd as a wire ad.
func FromClassAd(ad *classad.Ad) Ad {
	out := make(Ad, ad.Len())
	for _, n := range ad.Names() {
		e, _ := ad.Lookup(n)
		out[n] = e.String()
	}
	return out
}

// Project returns the attributes of a named in attrs (all when attrs is
// empty); names match case-insensitively.
func Project(a Ad, attrs []string) Ad {
	if len(attrs) == 0 {
		return a
	}
	// Most names are asked for as the ad spells them: those are looked
	// up, and the ad is searched without regard to case only for the
	// others (a slot ad has a hundred attributes; a projection, a few).
	out := make(Ad, len(attrs))
	var rest []string
	for _, n := range attrs {
		if v, ok := a[n]; ok {
			out[n] = v
		} else {
			rest = append(rest, n)
		}
	}
	if len(rest) == 0 {
		return out
	}
	for k, v := range a {
		if _, ok := out[k]; ok {
			continue
		}
		for _, n := range rest {
			if strings.EqualFold(k, n) {
				out[k] = v
				break
			}
		}
	}
	return out
}

// Constraint compiles a constraint expression ("" means true) and returns a
// predicate over ads; the error wraps ErrBadRequest.
func Constraint(src string) (func(*classad.Ad) bool, error) {
	if strings.TrimSpace(src) == "" {
		return func(*classad.Ad) bool { return true }, nil
	}
	p, err := classad.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("%w: constraint %q: %w", ErrBadRequest, src, err)
	}
	return func(ad *classad.Ad) bool { return p.EvalBool(ad, nil) }, nil
}
