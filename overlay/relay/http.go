package relay

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/auth"

	"github.com/pond-htc/pond/overlay/api"
)

// Protocol is the Upgrade token of a tunnel's HTTP request.
const Protocol = "pond-relay/1"

// HeaderAddrs is the header of the relay's 101 answer that holds the
// worker's Addrs, as JSON.
const HeaderAddrs = "Pond-Relay-Addrs"

// NodeSubjectPrefix begins the subject of a node's token: "node/NAME".
const NodeSubjectPrefix = "node/"

// maxWant bounds the body of an attach request.
const maxWant = 4096

// ServeAttach is the HTTP handler of the attach route: a worker's POST with
// "Upgrade: pond-relay/1", ?name=NAME and the addresses it had before as
// a JSON body (Addrs, empty at its first attach). The caller must have put
// the request's verified token claims in its context (auth.Require); the
// token's subject must be the worker's node, node/NAME, or the relay
// refuses: only a node tunnels for itself. The relay answers
// 101 Switching Protocols with the worker's addresses in HeaderAddrs and
// serves the tunnel on the connection until it ends.
func (r *Relay) ServeAttach(ctx context.Context) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		name := req.URL.Query().Get("name")
		if name == "" {
			writeError(w, http.StatusBadRequest, errors.New("relay: attach: name the worker with ?name=NAME"))
			return
		}
		if ctx.Err() != nil {
			// A relay that stops would drop the tunnel at once: the
			// worker tries again, and finds the relay that follows.
			writeError(w, http.StatusServiceUnavailable, errors.New("relay: attach: the relay is stopping"))
			return
		}
		claims, ok := auth.FromContext(req.Context())
		if !ok {
			writeError(w, http.StatusForbidden, errors.New("relay: attach: the relay serves only nodes that present their node token"))
			return
		}
		if claims.Subject != NodeSubjectPrefix+name {
			writeError(w, http.StatusForbidden, fmt.Errorf("relay: attach: %s's token may not tunnel for node %s: only node/%s's may", claims.Subject, name, name))
			return
		}
		if !claims.Expires.After(time.Now()) {
			// Within the verifier's leeway for clocks, but a tunnel would
			// end at once: the worker must bring its renewed token.
			writeError(w, http.StatusUnauthorized, fmt.Errorf("relay: attach: %s's token has expired", claims.Subject))
			return
		}
		if !strings.EqualFold(req.Header.Get("Upgrade"), Protocol) {
			writeError(w, http.StatusBadRequest, fmt.Errorf("relay: attach: want Upgrade: %s", Protocol))
			return
		}
		var want api.RelayAddrs
		body, err := io.ReadAll(io.LimitReader(req.Body, maxWant))
		if err == nil && len(strings.TrimSpace(string(body))) > 0 {
			err = json.Unmarshal(body, &want)
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Errorf("relay: attach: body: %v", err))
			return
		}
		hj, ok := w.(http.Hijacker)
		if !ok {
			writeError(w, http.StatusInternalServerError, errors.New("relay: attach: the connection cannot be taken over (HTTP/2?)"))
			return
		}
		upgraded := false
		// The tunnel lasts no longer than its token.
		tctx, cancel := context.WithDeadline(ctx, claims.Expires)
		defer cancel()
		if r.cfg.Recheck != nil {
			tok := auth.BearerToken(req)
			go r.recheck(tctx, cancel, name, tok)
		}
		err = r.Attach(tctx, name, want, func(a api.RelayAddrs) (net.Conn, error) {
			raw, err := json.Marshal(a)
			if err != nil {
				return nil, err
			}
			conn, rw, err := hj.Hijack()
			if err != nil {
				return nil, err
			}
			upgraded = true
			conn.SetDeadline(time.Time{})
			fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: %s\r\nConnection: Upgrade\r\n%s: %s\r\n\r\n", Protocol, HeaderAddrs, raw)
			if err := rw.Flush(); err != nil {
				conn.Close()
				return nil, err
			}
			return bufferedConn{Conn: conn, r: rw.Reader}, nil
		})
		if err != nil && !upgraded {
			code := http.StatusServiceUnavailable
			if errors.Is(err, ErrPortsTaken) {
				code = http.StatusConflict
			}
			writeError(w, code, err)
		}
	}
}

// recheck checks tok again every Config.RecheckEvery until ctx is done,
// and cancels the tunnel when it no longer passes.
func (r *Relay) recheck(ctx context.Context, cancel context.CancelFunc, name, tok string) {
	t := time.NewTicker(r.cfg.RecheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := r.cfg.Recheck(tok); err != nil {
			r.logger.Warn("closing a tunnel whose token no longer passes", "worker", name, "err", err)
			cancel()
			return
		}
	}
}

// bufferedConn reads first what a bufio.Reader already holds.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func writeError(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}

// Dialer opens tunnels to a relay.
type Dialer struct {
	// Relay is the relay's API address, HOST:PORT.
	Relay string
	// Name is the worker's node name.
	Name string
	// TLS is the sea's client TLS; nil speaks plain HTTP.
	TLS *tls.Config
	// Token gives the worker's node token.
	Token func() string
	// Timeout bounds the connection and the upgrade (10 s when 0).
	Timeout time.Duration
}

// refuseClear refuses to send the worker's token in clear to a relay that
// is not on this machine.
func (d *Dialer) refuseClear() error {
	if d.TLS != nil || d.Token == nil || d.Token() == "" {
		return nil
	}
	h, _, err := net.SplitHostPort(d.Relay)
	if err != nil {
		return fmt.Errorf("relay address %q: %w", d.Relay, err)
	}
	if ip := net.ParseIP(h); h == "localhost" || ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("relay %s: refusing to send the node's token in clear: give the agent the sea's certificates (-tls-cert, -tls-key, -tls-ca)", d.Relay)
}

// StatusError is an attach refused by the relay with an HTTP status.
type StatusError struct {
	Status int
	Msg    string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("relay answered %d: %s", e.Status, e.Msg)
}

// Dial opens a tunnel: it connects to the relay, asks for the addresses of
// want (those it had, or none) and returns the upgraded connection and the
// worker's addresses.
func (d *Dialer) Dial(ctx context.Context, want api.RelayAddrs) (net.Conn, api.RelayAddrs, error) {
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	if err := d.refuseClear(); err != nil {
		return nil, api.RelayAddrs{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var nd net.Dialer
	conn, err := nd.DialContext(ctx, "tcp", d.Relay)
	if err != nil {
		return nil, api.RelayAddrs{}, fmt.Errorf("relay %s: %w", d.Relay, err)
	}
	scheme := "http"
	if d.TLS != nil {
		cfg := d.TLS.Clone()
		cfg.NextProtos = []string{"http/1.1"}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, api.RelayAddrs{}, fmt.Errorf("relay %s: TLS: %w", d.Relay, err)
		}
		conn, scheme = tc, "https"
	}
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	body, err := json.Marshal(want)
	if err != nil {
		conn.Close()
		return nil, api.RelayAddrs{}, err
	}
	u := url.URL{Scheme: scheme, Host: d.Relay, Path: api.PathRelayAttach, RawQuery: url.Values{"name": {d.Name}}.Encode()}
	req, err := http.NewRequest(http.MethodPost, u.String(), strings.NewReader(string(body)))
	if err != nil {
		conn.Close()
		return nil, api.RelayAddrs{}, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", Protocol)
	req.Header.Set("Content-Type", "application/json")
	if d.Token != nil {
		if tok := d.Token(); tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
	}
	if err := req.Write(conn); err != nil {
		conn.Close()
		return nil, api.RelayAddrs{}, fmt.Errorf("relay %s: %w", d.Relay, err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		conn.Close()
		return nil, api.RelayAddrs{}, fmt.Errorf("relay %s: %w", d.Relay, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer conn.Close()
		var e struct {
			Error string `json:"error"`
		}
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if json.Unmarshal(raw, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(raw))
		}
		return nil, api.RelayAddrs{}, &StatusError{Status: resp.StatusCode, Msg: e.Error}
	}
	var got api.RelayAddrs
	if err := json.Unmarshal([]byte(resp.Header.Get(HeaderAddrs)), &got); err != nil {
		conn.Close()
		return nil, api.RelayAddrs{}, fmt.Errorf("relay %s: %s: %w", d.Relay, HeaderAddrs, err)
	}
	conn.SetDeadline(time.Time{})
	return bufferedConn{Conn: conn, r: br}, got, nil
}
