package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/member"
)

// The agent is the node its pond membership acts on.
var _ member.Node = (*Agent)(nil)

// startMembership opens the node's pond membership and applies the one it
// held before a restart.
func (a *Agent) startMembership(orphan time.Duration, policy string) error {
	m, err := member.New(a, member.Options{
		Name:       a.cfg.Name,
		DataDir:    a.cfg.DataDir,
		JoinPolicy: policy,
		Orphan:     orphan,
		Logger:     a.logger,
	})
	if err != nil {
		return err
	}
	a.members = m
	if err := m.Restore(a.ctx); err != nil {
		a.logger.Warn("restoring pond membership", "err", err)
	}
	return nil
}

// CondorHost is the API address of the node's central manager: its own
// when it belongs to no pool or pond.
func (a *Agent) CondorHost() string {
	a.hostMu.Lock()
	defer a.hostMu.Unlock()
	if a.cfg.CondorHost == "" {
		return a.APIAddr()
	}
	return a.cfg.CondorHost
}

// SetCondorHost points the node's daemons at the central manager at addr
// ("" or the node's own address: itself), and sets the cm tag together
// with tags (one serf broadcast rather than several).
func (a *Agent) SetCondorHost(addr string, tags map[string]string) error {
	if addr == a.APIAddr() {
		addr = ""
	}
	a.hostMu.Lock()
	a.cfg.CondorHost = addr
	a.hostMu.Unlock()
	host := a.CondorHost()
	update := map[string]string{api.TagCM: host}
	for k, v := range tags {
		update[k] = v
	}
	if err := a.SetTags(update); err != nil {
		return err
	}
	if err := a.daemons.SetCondorHost(host); err != nil {
		return fmt.Errorf("moving the daemons to central manager %s: %w", host, err)
	}
	return nil
}

// Busy implements member.Node: a node of a declared pool joins no pond.
func (a *Agent) Busy() string {
	if p := a.sea.LocalMember().Tags[api.TagPool]; p != "" {
		return "member of pool " + p
	}
	return ""
}

// CentralManagerAlive implements member.Node: it reports whether an alive
// member of the sea serves its API at addr.
func (a *Agent) CentralManagerAlive(addr string) bool {
	for _, m := range a.sea.Members() {
		if m.Tags[api.TagAPI] == addr {
			return m.Status == api.StatusAlive
		}
	}
	return false
}

// SetMembership implements member.Node: it makes the node a member of m,
// or frees it when m is nil. The stamped attributes reach the machine ad
// at once, and the startd's slot ads with the reconfiguration that moves
// the daemons to the pond's central manager.
func (a *Agent) SetMembership(ctx context.Context, m *api.Membership) error {
	cm, pond := a.APIAddr(), ""
	if m != nil {
		cm, pond = m.CentralManager, m.Pond
	}
	stamps := member.Stamps(m)
	a.ad.Stamp(stamps)
	a.daemons.SetStamps(stamps)
	return a.SetCondorHost(cm, map[string]string{api.TagPond: pond})
}

// Drain implements member.Node: it empties the node's startd before it
// leaves a pond.
func (a *Agent) Drain(ctx context.Context, evict bool) (api.DrainResult, func()) {
	return a.daemons.Drain(ctx, evict)
}

// ActingCentralManager implements member.Follower: the API address of
// the member that acts now for the central manager at addr, "" when none
// does (failover.Claims.ActingManager).
func (a *Agent) ActingCentralManager(addr string) string {
	return a.claims.ActingManager(a.ctx, a.sea.Members(), a.cfg.Pool, addr)
}
