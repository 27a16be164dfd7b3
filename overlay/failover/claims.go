package failover

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
)

// A claim is what a member's gossip tags say it is: its pool's acting
// central manager at an epoch (overlay/failover's epoch tag), or the one
// that announces its pool's spare capacity (overlay/flock). Any member of
// the sea can set any tag, so a claim counts only once proven: the node
// answers at the API address its tags name with a certificate of the
// sea's CA that names the node and the pool (auth.CertIdentity; only the
// authority issues one), and, for an epoch, says over that connection
// that it acts as the pool's manager at that epoch.

// claimTimeout bounds one proof: the handshake and, for an epoch, the
// answer.
const claimTimeout = 2 * time.Second

// claimRetry is how long a claim that could not be proven is not asked
// about again, whatever it changes to: a member that keeps changing its
// tags costs a proof attempt at most this often.
const claimRetry = 2 * time.Second

// Claim is one claim of a member: that it is a member of Pool reached at
// API and, when Epoch is set, its acting central manager at Epoch.
type Claim struct {
	API, Pool string
	Epoch     int64
}

// claimEntry is the latest proof attempt of a member's claim.
type claimEntry struct {
	Claim
	proven  bool
	at      time.Time
	running bool
}

// claimSlot is where a member's latest proof is kept: one for its
// membership of its pool (no epoch), one for its acting as manager, so
// that a member holds two entries at most however often its tags change.
type claimSlot struct {
	node   string
	acting bool
}

// Claims proves the claims of the sea's members and holds, by member, the
// latest proof of each kind of its claims. The zero value proves nothing
// (every claim holds) until TLS is set.
type Claims struct {
	// TLS is the sea's client TLS, which a proof dials with; nil in a sea
	// without certificates, which takes every claim as it is.
	TLS *tls.Config
	// Self is the node's own name: its own claims hold.
	Self string
	// Token returns the bearer token a proof of an epoch presents; nil
	// or "" presents none.
	Token func() string
	// Go runs a proof in the background (the agent's group of
	// goroutines); nil runs it in a goroutine of its own.
	Go func(func())
	// Logger logs the claims that are not proven; nil logs nothing.
	Logger *slog.Logger

	mu sync.Mutex
	m  map[claimSlot]*claimEntry
}

// cached reports whether the claim k of node was proven, and whether it
// should be tried (again) now: never proven nor tried, or failed over
// claimRetry ago, and not being tried.
func (c *Claims) cached(node string, k Claim, now time.Time) (proven, try bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[claimSlot{node, k.Epoch > 0}]
	if e == nil {
		return false, true
	}
	if e.Claim == k && e.proven {
		return true, false
	}
	return false, !e.running && now.Sub(e.at) >= claimRetry
}

// start marks a proof of k as running, false when one already runs.
func (c *Claims) start(node string, k Claim) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[claimSlot]*claimEntry{}
	}
	slot := claimSlot{node, k.Epoch > 0}
	prev := c.m[slot]
	if prev != nil && prev.running {
		return false
	}
	e := &claimEntry{Claim: k, running: true}
	if prev != nil {
		e.at = prev.at
	}
	c.m[slot] = e
	return true
}

// done records the outcome of a proof started with start.
func (c *Claims) done(node string, k Claim, proven bool, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[claimSlot{node, k.Epoch > 0}] = &claimEntry{Claim: k, proven: proven, at: now}
}

// Proven reports whether node's claim k is proven, trying to prove it
// first when it may (wait: within this call, bounded by claimTimeout;
// else in the background, the answer counting from a later call). ctx
// bounds the proofs, those in the background included. A sea without
// certificates proves nothing, and takes every claim as it is.
func (c *Claims) Proven(ctx context.Context, node string, k Claim, wait bool) bool {
	if c.TLS == nil || node == c.Self {
		return true
	}
	proven, try := c.cached(node, k, time.Now())
	if proven || !try || !c.start(node, k) {
		return proven
	}
	prove := func() bool {
		pctx, cancel := context.WithTimeout(ctx, claimTimeout)
		defer cancel()
		err := c.prove(pctx, node, k)
		c.done(node, k, err == nil, time.Now())
		if err != nil && ctx.Err() == nil && c.Logger != nil {
			c.Logger.Warn("a member's claim is not proven: ignoring it", "node", node, "pool", k.Pool, "epoch", k.Epoch, "api", k.API, "err", err)
		}
		return err == nil
	}
	if wait {
		return prove()
	}
	if c.Go != nil {
		c.Go(func() { prove() })
	} else {
		go prove()
	}
	return false
}

// Known reports whether node's claim k was proven, without trying to
// prove it: for a member that is gone.
func (c *Claims) Known(node string, k Claim) bool {
	if c.TLS == nil || node == c.Self {
		return true
	}
	proven, _ := c.cached(node, k, time.Now())
	return proven
}

// errClaim is the error of a claim its node does not prove.
var errClaim = errors.New("claim not proven")

// prove asks the node at k.API to prove that it is node, a member of
// k.Pool, and, when k.Epoch is set, its acting central manager at that
// epoch (see Proven).
func (c *Claims) prove(ctx context.Context, node string, k Claim) error {
	cfg := auth.RequirePeer(c.TLS, func(id auth.Identity) error {
		if id.Node != node || id.Pool != k.Pool {
			return fmt.Errorf("%w: the certificate at %s is of node %q of pool %q, not of node %q of pool %q", errClaim, k.API, id.Node, id.Pool, node, k.Pool)
		}
		return nil
	})
	if k.Epoch == 0 {
		d := tls.Dialer{NetDialer: &net.Dialer{}, Config: cfg}
		conn, err := d.DialContext(ctx, "tcp", k.API)
		if err != nil {
			return err
		}
		return conn.Close()
	}
	tr := &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+k.API+api.PathFailover, nil)
	if err != nil {
		return err
	}
	if c.Token != nil {
		if tok := c.Token(); tok != "" {
			req.Header.Set(wire.TokenHeader, "Bearer "+tok)
		}
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: GET %s at %s: %s", errClaim, api.PathFailover, k.API, resp.Status)
	}
	var st api.FailoverStatus
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&st); err != nil {
		return fmt.Errorf("GET %s at %s: %w", api.PathFailover, k.API, err)
	}
	if st.Node != node || st.Pool != k.Pool || !st.Acting || st.Epoch != k.Epoch {
		return fmt.Errorf("%w: %s says it is node %q of pool %q, acting %v at epoch %d, not the manager at epoch %d", errClaim, k.API, st.Node, st.Pool, st.Acting, st.Epoch, k.Epoch)
	}
	return nil
}

// PeerIdentity is the identity the verified client certificate of r names
// (see auth.CertIdentity); false when the caller presented none, or the
// node serves no TLS.
func PeerIdentity(r *http.Request) (auth.Identity, bool) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return auth.Identity{}, false
	}
	id, err := auth.CertIdentity(r.TLS.PeerCertificates)
	return id, err == nil
}

// OwnPoolProven reports whether the node's own certificate (the file
// certFile) names it, node, and its pool, so that its pool's members will
// follow it as central manager: true in a sea without certificates
// (certFile "").
func OwnPoolProven(certFile, node, pool string) bool {
	if certFile == "" {
		return true
	}
	certs, err := auth.ReadCertificates(certFile)
	if err != nil {
		return false
	}
	id, err := auth.CertIdentity(certs)
	return err == nil && id.Node == node && id.Pool == pool
}
