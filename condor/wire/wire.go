// Package wire is the protocol spoken between the daemons of a pond pool:
// versioned HTTP+JSON requests under PathPrefix, authenticated with a token
// derived from the pool's shared secret, carrying ClassAds as maps of
// attribute name to ClassAd expression text.
package wire

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
)

// Version is the protocol version; it is part of every request path.
const Version = "v1"

// PathPrefix is the path under which a node's daemons are served.
const PathPrefix = "/condor/" + Version + "/"

// TokenHeader carries the pool token on every request.
const TokenHeader = "Authorization"

// Ad is a ClassAd on the wire: attribute name -> expression text.
type Ad = map[string]string

// Token derives the bearer token of a pool from its shared secret: the
// hex HMAC-SHA256 of a fixed label keyed with the secret, so that the secret
// itself never crosses the network. An empty secret yields an empty token
// (an open pool).
func Token(secret string) string {
	if secret == "" {
		return ""
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("pond-condor-pool/" + Version))
	return hex.EncodeToString(m.Sum(nil))
}

// PoolToken reads the pool secret from POOL_PASSWORD or the file named by
// SEC_POOL_PASSWORD_FILE and returns its token.
func PoolToken(cfg *config.Config) (string, error) {
	if cfg == nil {
		return "", nil
	}
	if p, ok := cfg.Get("POOL_PASSWORD"); ok && p != "" {
		return Token(p), nil
	}
	if f, ok := cfg.Get("SEC_POOL_PASSWORD_FILE"); ok && f != "" {
		p, err := ReadSecretFile(f)
		if err != nil {
			return "", fmt.Errorf("SEC_POOL_PASSWORD_FILE: %w", err)
		}
		return Token(p), nil
	}
	return "", nil
}

// RequireToken wraps h so that requests without the pool's token are refused
// with 401. An empty token accepts every request.
func RequireToken(token string, h http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get(TokenHeader)), want) != 1 {
			WriteError(w, http.StatusUnauthorized, errors.New("not a member of this pool: missing or wrong pool token"))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Error is an error answered by a remote daemon.
type Error struct {
	Status int    // HTTP status
	Msg    string // the daemon's message
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

// ReadJSON decodes a request body into v.
func ReadJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<30))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decoding %s request: %w", r.URL.Path, err)
	}
	return nil
}

// Handle adapts a typed request handler to an http.HandlerFunc: it decodes
// the JSON body into a new In, calls f and answers its result or error (400
// for errors wrapping ErrBadRequest, 404 for ErrNotFound, 500 otherwise).
func Handle[In, Out any](f func(ctx context.Context, in *In) (Out, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			WriteError(w, http.StatusMethodNotAllowed, fmt.Errorf("%s needs POST", r.URL.Path))
			return
		}
		in := new(In)
		if err := ReadJSON(r, in); err != nil {
			WriteError(w, http.StatusBadRequest, err)
			return
		}
		out, err := f(r.Context(), in)
		if err != nil {
			status := http.StatusInternalServerError
			switch {
			case errors.Is(err, ErrBadRequest):
				status = http.StatusBadRequest
			case errors.Is(err, ErrNotFound):
				status = http.StatusNotFound
			case errors.Is(err, ErrConflict):
				status = http.StatusConflict
			}
			WriteError(w, status, err)
			return
		}
		WriteJSON(w, http.StatusOK, out)
	}
}

// Errors handlers wrap to choose the HTTP status.
var (
	ErrBadRequest = errors.New("bad request")
	ErrNotFound   = errors.New("not found")
	ErrConflict   = errors.New("conflict")
)

// Client calls the daemons of one node (an agent's API address).
type Client struct {
	Addr  string // host:port of the node's API
	Token string // pool token
	HTTP  *http.Client
}

// sharedTransport is used by clients without their own HTTP client; it keeps
// enough idle connections per host for a busy schedd and startd.
var sharedTransport = &http.Transport{
	Proxy:               nil,
	DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	MaxIdleConns:        256,
	MaxIdleConnsPerHost: 64,
	IdleConnTimeout:     90 * time.Second,
}

// NewClient returns a client of the node at addr.
func NewClient(addr, token string) *Client {
	return &Client{Addr: addr, Token: token, HTTP: &http.Client{Transport: sharedTransport}}
}

// Call posts in as JSON to the daemon endpoint path (relative to PathPrefix,
// e.g. "collector/query") and decodes the answer into out (unless nil).
func (c *Client) Call(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("encoding %s request: %w", path, err)
	}
	url := "http://" + c.Addr + PathPrefix + path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("calling %s: %w", url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.Token != "" {
		req.Header.Set(TokenHeader, "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Transport: sharedTransport}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("calling %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var eb errorBody
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(b, &eb) != nil || eb.Error == "" {
			eb.Error = strings.TrimSpace(string(b))
		}
		return fmt.Errorf("calling %s: %w", url, &Error{Status: resp.StatusCode, Msg: eb.Error})
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decoding answer of %s: %w", url, err)
	}
	return nil
}

// ToClassAd parses a wire ad into a ClassAd, in sorted attribute order.
func ToClassAd(a Ad) (*classad.Ad, error) {
	ad := classad.NewAd()
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
	want := make(map[string]bool, len(attrs))
	for _, n := range attrs {
		want[strings.ToLower(n)] = true
	}
	out := make(Ad, len(attrs))
	for k, v := range a {
		if want[strings.ToLower(k)] {
			out[k] = v
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

// SecretFile is where a working directory keeps the secret of the pools
// pond's local provider runs from it, relative to that directory. The
// provider creates it (mode 0600) and names it in every node's
// SEC_POOL_PASSWORD_FILE; the tools find it from the directory they run in.
const SecretFile = ".pond/pool_password"

// FindSecretFile returns the path of the SecretFile of dir or of its
// nearest parent that has one, or "" when none has.
func FindSecretFile(dir string) string {
	if dir == "" {
		return ""
	}
	dir = filepath.Clean(dir)
	for {
		p := filepath.Join(dir, filepath.FromSlash(SecretFile))
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// ReadSecretFile reads a pool secret from path: the file's content
// without its final line break.
func ReadSecretFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the pool secret: %w", err)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", fmt.Errorf("reading the pool secret: %s is empty", path)
	}
	return s, nil
}
