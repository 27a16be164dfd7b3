package agent

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// claimKey is one claim of a member.
type claimKey struct {
	api, pool string
	epoch     int64
}

// claimEntry is the latest proof attempt of a member's claim.
type claimEntry struct {
	claimKey
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

// claimCache holds, by member, the latest proof of each kind of its claims.
type claimCache struct {
	mu sync.Mutex
	m  map[claimSlot]*claimEntry
}

// cached reports whether the claim k of node was proven, and whether it
// should be tried (again) now: never proven nor tried, or failed over
// claimRetry ago, and not being tried.
func (c *claimCache) cached(node string, k claimKey, now time.Time) (proven, try bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[claimSlot{node, k.epoch > 0}]
	if e == nil {
		return false, true
	}
	if e.claimKey == k && e.proven {
		return true, false
	}
	return false, !e.running && now.Sub(e.at) >= claimRetry
}

// start marks a proof of k as running, false when one already runs.
func (c *claimCache) start(node string, k claimKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[claimSlot]*claimEntry{}
	}
	slot := claimSlot{node, k.epoch > 0}
	prev := c.m[slot]
	if prev != nil && prev.running {
		return false
	}
	e := &claimEntry{claimKey: k, running: true}
	if prev != nil {
		e.at = prev.at
	}
	c.m[slot] = e
	return true
}

// done records the outcome of a proof started with start.
func (c *claimCache) done(node string, k claimKey, proven bool, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[claimSlot{node, k.epoch > 0}] = &claimEntry{claimKey: k, proven: proven, at: now}
}

// claimProven reports whether node's claim k is proven, trying to prove it
// first when it may (wait: within this call, bounded by claimTimeout;
// else in the background, the answer counting from a later call). A sea
// without certificates proves nothing, and takes every claim as it is.
func (a *Agent) claimProven(node string, k claimKey, wait bool) bool {
	if a.clientTLS == nil || node == a.cfg.Name {
		return true
	}
	proven, try := a.claims.cached(node, k, time.Now())
	if proven || !try || !a.claims.start(node, k) {
		return proven
	}
	prove := func() bool {
		ctx, cancel := context.WithTimeout(a.ctx, claimTimeout)
		defer cancel()
		err := a.proveClaim(ctx, node, k)
		a.claims.done(node, k, err == nil, time.Now())
		if err != nil && a.ctx.Err() == nil {
			a.logger.Warn("a member's claim is not proven: ignoring it", "node", node, "pool", k.pool, "epoch", k.epoch, "api", k.api, "err", err)
		}
		return err == nil
	}
	if wait {
		return prove()
	}
	a.bg.Go(func() { prove() })
	return false
}

// claimKnown reports whether node's claim k was proven, without trying
// to prove it: for a member that is gone.
func (a *Agent) claimKnown(node string, k claimKey) bool {
	if a.clientTLS == nil || node == a.cfg.Name {
		return true
	}
	proven, _ := a.claims.cached(node, k, time.Now())
	return proven
}

// errClaim is the error of a claim its node does not prove.
var errClaim = errors.New("claim not proven")

// proveClaim asks the node at k.api to prove that it is node, a member of
// k.pool, and, when k.epoch is set, its acting central manager at that
// epoch (see claimProven).
func (a *Agent) proveClaim(ctx context.Context, node string, k claimKey) error {
	cfg := a.clientTLS.Clone()
	verify := cfg.VerifyConnection
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if verify != nil {
			if err := verify(cs); err != nil {
				return err
			}
		}
		id, err := auth.CertIdentity(cs.PeerCertificates)
		if err != nil {
			return err
		}
		if id.Node != node || id.Pool != k.pool {
			return fmt.Errorf("%w: the certificate at %s is of node %q of pool %q, not of node %q of pool %q", errClaim, k.api, id.Node, id.Pool, node, k.pool)
		}
		return nil
	}
	if k.epoch == 0 {
		d := tls.Dialer{NetDialer: &net.Dialer{}, Config: cfg}
		conn, err := d.DialContext(ctx, "tcp", k.api)
		if err != nil {
			return err
		}
		return conn.Close()
	}
	tr := &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+k.api+api.PathFailover, nil)
	if err != nil {
		return err
	}
	if tok := a.token(); tok != "" {
		req.Header.Set(wire.TokenHeader, "Bearer "+tok)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: GET %s at %s: %s", errClaim, api.PathFailover, k.api, resp.Status)
	}
	var st api.FailoverStatus
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&st); err != nil {
		return fmt.Errorf("GET %s at %s: %w", api.PathFailover, k.api, err)
	}
	if st.Node != node || st.Pool != k.pool || !st.Acting || st.Epoch != k.epoch {
		return fmt.Errorf("%w: %s says it is node %q of pool %q, acting %v at epoch %d, not the manager at epoch %d", errClaim, k.api, st.Node, st.Pool, st.Acting, st.Epoch, k.epoch)
	}
	return nil
}

// peerIdentity is the identity the verified client certificate of r names
// (see auth.CertIdentity); false when the caller presented none, or the
// node serves no TLS.
func peerIdentity(r *http.Request) (auth.Identity, bool) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return auth.Identity{}, false
	}
	id, err := auth.CertIdentity(r.TLS.PeerCertificates)
	return id, err == nil
}

// ownPoolProven reports whether the node's own certificate names its pool,
// so that its pool's members will follow it as central manager: true in a
// sea without certificates.
func (a *Agent) ownPoolProven() bool {
	if a.cfg.TLSCert == "" {
		return true
	}
	certs, err := auth.ReadCertificates(a.cfg.TLSCert)
	if err != nil {
		return false
	}
	id, err := auth.CertIdentity(certs)
	return err == nil && id.Node == a.cfg.Name && id.Pool == a.cfg.Pool
}
