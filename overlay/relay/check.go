package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"time"

	"github.com/pond-htc/pond/condor/auth"

	"github.com/pond-htc/pond/overlay/api"
)

// checkTimeout bounds the relay's connection back to a worker.
const checkTimeout = 2 * time.Second

// CheckRequest asks a relay whether it can connect to the worker's API
// address, and to the other TCP addresses it would advertise (Also: its
// tree address and its gossip address, at most MaxCheckAlso).
type CheckRequest struct {
	Name string   `json:"name"`
	API  string   `json:"api"`
	Also []string `json:"also,omitempty"`
}

// MaxCheckAlso bounds CheckRequest.Also.
const MaxCheckAlso = 4

// CheckResult is the relay's answer: Reachable when every address
// answered; Unreachable lists those that did not, Error says why for the
// first.
type CheckResult struct {
	Reachable   bool     `json:"reachable"`
	Error       string   `json:"error,omitempty"`
	Unreachable []string `json:"unreachable,omitempty"`
}

// ServeCheck is the HTTP handler of the connect-back check: a node, with
// its own token (node/NAME), asks whether the relay can open a TCP
// connection to its API address and to up to MaxCheckAlso other
// addresses of its own (its tree and gossip addresses), each an IP:PORT.
// The relay only connects and closes, all at once within two seconds, and
// answers yes or no with the addresses it could not reach; it dials only
// the host the request comes from (any other is answered "no": the node
// is behind a NAT), so that no node can use it to probe other hosts'
// ports.
func ServeCheck() http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		var in CheckRequest
		if err := json.NewDecoder(io.LimitReader(req.Body, maxWant)).Decode(&in); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Errorf("relay: check: body: %v", err))
			return
		}
		claims, ok := auth.FromContext(req.Context())
		if !ok || claims.Subject != NodeSubjectPrefix+in.Name {
			writeError(w, http.StatusForbidden, fmt.Errorf("relay: check: only node %s's own token may ask about it", in.Name))
			return
		}
		if len(in.Also) > MaxCheckAlso {
			writeError(w, http.StatusBadRequest, fmt.Errorf("relay: check: %d other addresses, at most %d", len(in.Also), MaxCheckAlso))
			return
		}
		from, _ := netip.ParseAddrPort(req.RemoteAddr)
		var addrs []netip.AddrPort
		for i, a := range append([]string{in.API}, in.Also...) {
			what := "api"
			if i > 0 {
				what = fmt.Sprintf("also[%d]", i-1)
			}
			ap, err := netip.ParseAddrPort(a)
			if err != nil {
				writeError(w, http.StatusBadRequest, fmt.Errorf("relay: check: %s %q: want IP:PORT", what, a))
				return
			}
			// An address that means this host here but another host
			// there (a worker on another machine with its API on
			// loopback, or on every address) would find the relay
			// itself.
			if ap.Addr().IsUnspecified() || ap.Addr().IsLoopback() && !from.Addr().Unmap().IsLoopback() {
				writeError(w, http.StatusBadRequest, fmt.Errorf("relay: check: %s %s is not an address the relay can tell about from %s", what, ap, req.RemoteAddr))
				return
			}
			addrs = append(addrs, ap)
		}
		// The addresses are dialled at once, so that the answer comes
		// within checkTimeout however many there are: behind a firewall
		// that drops new connections each dial takes all of it.
		whys := make([]string, len(addrs))
		var wg sync.WaitGroup
		for i, ap := range addrs {
			if !sameHost(ap.Addr(), from.Addr()) {
				// The relay dials only the host the request comes from:
				// a node may learn whether its own ports are open, never
				// probe others' through the relay. A worker whose
				// connections come from another address (a NAT, another
				// interface) is not reached at the one it gives either.
				whys[i] = fmt.Sprintf("this node's connections come from %s, not %s: a NAT or another interface is in between",
					from.Addr().Unmap(), ap.Addr().Unmap())
				continue
			}
			wg.Go(func() {
				d := net.Dialer{Timeout: checkTimeout}
				c, err := d.DialContext(req.Context(), "tcp", ap.String())
				if err != nil {
					whys[i] = err.Error()
					return
				}
				c.Close()
			})
		}
		wg.Wait()
		out := CheckResult{Reachable: true}
		for i, why := range whys {
			if why != "" {
				out.fail(addrs[i], why)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}
}

// fail records that the relay cannot connect to ap, for why.
func (r *CheckResult) fail(ap netip.AddrPort, why string) {
	r.Reachable = false
	r.Unreachable = append(r.Unreachable, ap.String())
	if r.Error == "" {
		r.Error = why
	}
}

// sameHost says whether a and b are one host's addresses as the relay sees
// them: equal, or both loopback ones.
func sameHost(a, b netip.Addr) bool {
	a, b = a.Unmap(), b.Unmap()
	return a == b || a.IsLoopback() && b.IsLoopback()
}

// Check asks the relay at d.Relay whether it can connect to apiAddr, the
// worker's API address, and to each of also, other TCP addresses the
// worker would advertise. A relay of an older version checks only
// apiAddr.
func (d *Dialer) Check(ctx context.Context, apiAddr string, also ...string) (CheckResult, error) {
	if err := d.refuseClear(); err != nil {
		return CheckResult{}, err
	}
	body, err := json.Marshal(CheckRequest{Name: d.Name, API: apiAddr, Also: also})
	if err != nil {
		return CheckResult{}, err
	}
	scheme := "http"
	tr := &http.Transport{DisableKeepAlives: true}
	if d.TLS != nil {
		scheme, tr.TLSClientConfig = "https", d.TLS
	}
	defer tr.CloseIdleConnections()
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	client := &http.Client{Transport: tr, Timeout: timeout}
	u := url.URL{Scheme: scheme, Host: d.Relay, Path: api.PathRelayCheck}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return CheckResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if d.Token != nil {
		if tok := d.Token(); tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		return CheckResult{}, fmt.Errorf("relay %s: %w", d.Relay, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		json.Unmarshal(raw, &e)
		return CheckResult{}, &StatusError{Status: resp.StatusCode, Msg: e.Error}
	}
	var out CheckResult
	if err := json.Unmarshal(raw, &out); err != nil {
		return CheckResult{}, fmt.Errorf("relay %s: check: %w", d.Relay, err)
	}
	return out, nil
}

// errNotRelay is what a relay-mode node answers when asked to relay.
var errNotRelay = errors.New("relay: this node is itself reached through a relay and relays for no one")

// Refuse is the handler of the relay routes on a node that does not
// relay: 503 with the reason.
func Refuse(w http.ResponseWriter, _ *http.Request) {
	writeError(w, http.StatusServiceUnavailable, errNotRelay)
}
