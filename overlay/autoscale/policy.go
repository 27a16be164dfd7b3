// Package autoscale is automatic PonD, as in the PonD paper: a node that
// runs a schedd watches its own queue and, when idle jobs wait that no slot
// of its central manager can run, grows a pond for them from the sea, by
// itself, with no pondctl running.
//
// Each step the policy groups the queue's jobs by autocluster (the same
// Requirements, Rank, resource requests and the job attributes those refer
// to). For a group with idle jobs that no slot in the collector matches, it
// runs one tree query with the group's Requirements and Rank for as many
// nodes as the group has jobs (capped by the limits), invites the
// candidates with the same invitation and lease protocol as declared ponds
// (one pond identity per group, stamped with the initiating job ids), and
// lowers the negotiator's NEGOTIATOR_MIN_INTERVAL so the jobs start at once.
// When a group's jobs have left the queue, and none of the queue's jobs has
// run on its members, for the grace period, the members are released back
// to the sea.
//
// An agent turns the policy on with the POND_POLICY knobs of its
// configuration file (the local provider writes them from a pool's
// pond_policy block); overlay/knobs lists them with their defaults, and
// docs/knobs.md shows the table.
package autoscale

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/internal/jsonfile"
)

// APIAttr is the machine-ad attribute holding a node's agent API address,
// asked of every match.
const APIAttr = "PondAPI"

// maxJobIDs bounds how many initiating job ids an invitation carries.
const maxJobIDs = 32

// Pool is the condor side of the policy: the schedd's queue and the
// central manager's collector and negotiator.
type Pool interface {
	// Jobs returns the idle and running jobs of the schedd.
	Jobs(ctx context.Context) ([]Job, error)
	// Slots returns the slot ads the central manager's collector holds.
	Slots(ctx context.Context) ([]*classad.Ad, error)
	// Reschedule asks the negotiator for a cycle.
	Reschedule(ctx context.Context) error
}

// Node is what the policy needs of the agent it runs in. The agent
// implements it.
type Node interface {
	// CondorHost returns the API address members report to (the policy
	// node's central manager).
	CondorHost() string
	// Query runs a tree query over the sea, rooted at the node.
	Query(ctx context.Context, q api.Query) (*api.Answer, error)
	// FastNegotiation lowers the negotiator's minimum interval (on) or
	// restores it.
	FastNegotiation(ctx context.Context, on bool) error
}

// Options configure a Policy.
type Options struct {
	// Name is the policy node's name; pond names derive from it.
	Name string
	// API is the policy node's API address: it never invites itself.
	API string
	// Token gives the bearer token the policy presents to the nodes it
	// invites and releases, read at each use so that a refreshed token is
	// used at once; nil presents none.
	Token func() string
	// TLS is the sea's TLS the policy calls nodes with; nil speaks
	// plain HTTP.
	TLS *tls.Config
	// DataDir keeps the policy's ponds across restarts (pondpolicy.json);
	// empty keeps nothing.
	DataDir string
	// Config bounds the policy.
	Config Config
	// Logger receives the policy's log; nil discards it.
	Logger *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

func (o *Options) token() string {
	if o.Token == nil {
		return ""
	}
	return o.Token()
}

// Member is a node of a policy pond.
type Member struct {
	Name string  `json:"name"`
	API  string  `json:"api"`
	Rank float64 `json:"rank"`
}

// Pond is one pond of the policy: the members found for one job group.
type Pond struct {
	Name         string    `json:"name"`
	ID           string    `json:"id"`
	Group        string    `json:"group"`
	Requirements string    `json:"requirements"`
	Rank         string    `json:"rank,omitempty"`
	Members      []Member  `json:"members"`
	Created      time.Time `json:"created"`
	// LastBusy is when the group last had jobs in the queue.
	LastBusy time.Time `json:"last_busy"`
}

// Policy grows and releases the ponds of one schedd's queue.
type Policy struct {
	node Node
	pool Pool
	opts Options
	log  *slog.Logger

	mu        sync.Mutex
	ponds     []*Pond
	seq       int
	lastQuery time.Time
	fast      bool
	stats     Stats
}

// Stats counts what the policy did.
type Stats struct {
	Queries     int `json:"queries"`
	Invitations int `json:"invitations"`
	Joined      int `json:"joined"`
	Released    int `json:"released"`
}

// New returns the policy of node, over the schedd and central manager pool
// reads, restoring the ponds saved in opts.DataDir.
func New(node Node, pool Pool, opts Options) (*Policy, error) {
	if node == nil || pool == nil {
		return nil, errors.New("pond policy: a node and a pool are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Config.CheckInterval <= 0 {
		opts.Config.CheckInterval = time.Second
	}
	if opts.Config.MaxMembers < 1 || opts.Config.MaxPonds < 1 {
		return nil, fmt.Errorf("pond policy: MaxMembers (%d) and MaxPonds (%d) must be at least 1", opts.Config.MaxMembers, opts.Config.MaxPonds)
	}
	p := &Policy{node: node, pool: pool, opts: opts, log: opts.Logger.With("component", "pond-policy")}
	if opts.DataDir != "" {
		data, err := os.ReadFile(p.path())
		switch {
		case err == nil:
			var saved struct {
				Seq   int     `json:"seq"`
				Ponds []*Pond `json:"ponds"`
			}
			if err := json.Unmarshal(data, &saved); err != nil {
				return nil, fmt.Errorf("pond policy: reading %s: %w", p.path(), err)
			}
			p.seq, p.ponds = saved.Seq, saved.Ponds
			// A restart grants the restored ponds a fresh grace period.
			for _, pd := range p.ponds {
				pd.LastBusy = opts.Now()
			}
		case !errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("pond policy: %w", err)
		}
	}
	return p, nil
}

func (p *Policy) path() string { return filepath.Join(p.opts.DataDir, "pondpolicy.json") }

// save writes the ponds; p.mu must be held.
func (p *Policy) save() error {
	if p.opts.DataDir == "" {
		return nil
	}
	return jsonfile.Write(p.path(), map[string]any{"seq": p.seq, "ponds": p.ponds})
}

// Ponds returns a copy of the policy's current ponds.
func (p *Policy) Ponds() []Pond {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Pond, len(p.ponds))
	for i, pd := range p.ponds {
		out[i] = *pd
		out[i].Members = append([]Member(nil), pd.Members...)
	}
	return out
}

// Status is the policy's configuration, ponds and statistics, as the
// agent's GET /v1/policy serves them.
type Status struct {
	Config Config `json:"config"`
	Ponds  []Pond `json:"ponds"`
	Stats  Stats  `json:"stats"`
}

// Status returns the policy's configuration, ponds and statistics.
func (p *Policy) Status() Status {
	return Status{Config: p.opts.Config, Ponds: p.Ponds(), Stats: p.Stats()}
}

// Stats returns what the policy has done so far.
func (p *Policy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Run examines the queue every CheckInterval until ctx is done, then
// releases every member: a central manager that goes away returns its
// ponds to the sea.
func (p *Policy) Run(ctx context.Context) {
	t := time.NewTicker(p.opts.Config.CheckInterval)
	defer t.Stop()
	for {
		if err := p.Step(ctx); err != nil && ctx.Err() == nil {
			p.log.Warn("pond policy step", "err", err)
		}
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			p.ReleaseAll(rctx)
			cancel()
			return
		case <-t.C:
		}
	}
}

// ReleaseAll releases the members of every pond.
func (p *Policy) ReleaseAll(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pd := range p.ponds {
		p.releaseLocked(ctx, pd, "the policy node is stopping")
	}
	p.ponds = nil
	if err := p.save(); err != nil {
		p.log.Warn("saving pond policy state", "err", err)
	}
}

// Step examines the queue once: it releases the ponds whose jobs are gone
// for the grace period, grows ponds for groups of idle jobs no slot can
// run, and keeps the negotiator fast while ponds exist.
func (p *Policy) Step(ctx context.Context) error {
	jobs, err := p.pool.Jobs(ctx)
	if err != nil {
		return fmt.Errorf("reading the queue: %w", err)
	}
	groups := groupJobs(jobs)
	byKey := map[string]*group{}
	for _, g := range groups {
		byKey[g.key] = g
	}
	busyHosts := map[string]bool{}
	for _, j := range jobs {
		if j.Running && j.Host != "" {
			busyHosts[machineOf(j.Host)] = true
		}
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.opts.Now()
	changed := false

	// Release the ponds whose jobs have been gone, and whose members have
	// run nothing, for the grace period.
	var keep []*Pond
	for _, pd := range p.ponds {
		if byKey[pd.Group] != nil || runsOn(pd, busyHosts) {
			pd.LastBusy = now
		}
		if now.Sub(pd.LastBusy) >= p.opts.Config.Grace {
			p.releaseLocked(ctx, pd, "the queue drained")
			changed = true
			continue
		}
		keep = append(keep, pd)
	}
	p.ponds = keep

	// Grow ponds for idle groups.
	total := 0
	for _, pd := range p.ponds {
		total += len(pd.Members)
	}
	var slots []*classad.Ad
	slotsRead := false
	waiting := false
	for _, g := range groups {
		if g.idle == 0 {
			continue
		}
		pd := p.pondFor(g.key)
		if pd != nil {
			waiting = true
		}
		demand := min(g.idle+g.running, p.opts.Config.MaxMembers)
		need := demand
		if pd != nil {
			need -= len(pd.Members)
		}
		need = min(need, p.opts.Config.MaxMembers-total)
		if need <= 0 {
			continue
		}
		if pd == nil {
			if len(p.ponds) >= p.opts.Config.MaxPonds {
				continue
			}
			if !slotsRead {
				if slots, err = p.pool.Slots(ctx); err != nil {
					return fmt.Errorf("reading the collector: %w", err)
				}
				slotsRead = true
			}
			if anyMatch(g.sample, slots) {
				continue // a slot of the pool can run these jobs
			}
		}
		if !p.lastQuery.IsZero() && now.Sub(p.lastQuery) < p.opts.Config.QueryInterval {
			break // the query rate is spent for now
		}
		p.lastQuery = now
		joined, newPond, err := p.grow(ctx, g, pd, need)
		if err != nil {
			p.log.Warn("growing a pond", "group", g.key, "err", err)
			continue
		}
		if newPond != nil {
			p.ponds = append(p.ponds, newPond)
		}
		total += joined
		if joined > 0 {
			changed = true
			waiting = true
		}
	}

	// Keep the negotiator fast while ponds exist.
	if want := len(p.ponds) > 0; want != p.fast {
		if err := p.node.FastNegotiation(ctx, want); err != nil {
			p.log.Warn("setting the negotiator's minimum interval", "err", err)
		} else {
			p.fast = want
		}
	}
	if waiting {
		if err := p.pool.Reschedule(ctx); err != nil {
			p.log.Debug("asking for a negotiation cycle", "err", err)
		}
	}
	if changed {
		if err := p.save(); err != nil {
			return fmt.Errorf("saving the policy's ponds: %w", err)
		}
	}
	return nil
}

func (p *Policy) pondFor(key string) *Pond {
	for _, pd := range p.ponds {
		if pd.Group == key {
			return pd
		}
	}
	return nil
}

func runsOn(pd *Pond, busy map[string]bool) bool {
	for _, m := range pd.Members {
		if busy[m.Name] {
			return true
		}
	}
	return false
}

// machineOf returns the machine of a slot name (slot1_2@node -> node).
func machineOf(slot string) string {
	if _, m, ok := strings.Cut(slot, "@"); ok {
		return m
	}
	return slot
}

func anyMatch(job *classad.Ad, slots []*classad.Ad) bool {
	for _, s := range slots {
		if classad.Match(job, s) {
			return true
		}
	}
	return false
}

// grow runs the group's query for need more members and invites the
// candidates, replacing those that decline with the next ones. With pd nil
// it forms a new pond (returned when anyone joined).
func (p *Policy) grow(ctx context.Context, g *group, pd *Pond, need int) (int, *Pond, error) {
	req := queryExpr(g.sample, "Requirements")
	if req == "" {
		req = "true"
	}
	rank := queryExpr(g.sample, "Rank")
	full := fmt.Sprintf("(%s) && TARGET.PondPool =?= \"\" && TARGET.PondID =?= undefined && TARGET.%s =!= %q", req, APIAttr, p.opts.API)
	if p.opts.Config.Requirements != "" {
		full += " && (" + p.opts.Config.Requirements + ")"
	}
	q := api.Query{Requirements: full, Rank: rank, K: need * 2, Mode: api.BestRank, Attrs: []string{APIAttr},
		Deadline: p.opts.Now().Add(3 * time.Second)}
	p.stats.Queries++
	ans, err := p.node.Query(ctx, q)
	if err != nil {
		return 0, nil, fmt.Errorf("tree query: %w", err)
	}
	if len(ans.Matches) == 0 {
		p.log.Info("no sea node matches a job group", "group", g.key, "idle", g.idle)
		return 0, nil, nil
	}
	inv := api.Invitation{CentralManager: p.node.CondorHost()}
	if pd != nil {
		inv.Pond, inv.PondID = pd.Name, pd.ID
	} else {
		p.seq++
		inv.Pond, inv.PondID = fmt.Sprintf("%s.policy-%d", p.opts.Name, p.seq), uuid.NewString()
	}
	inv.JobIDs = append([]string(nil), g.ids...)
	inv.Attributes = map[string]string{"PondPolicy": strconv.Quote(p.opts.Name)}

	cands := make([]Member, 0, len(ans.Matches))
	for _, m := range ans.Matches {
		addr, _ := m.Attrs[APIAttr].(string)
		if addr == "" {
			continue
		}
		cands = append(cands, Member{Name: m.Name, API: addr, Rank: m.Rank})
	}
	var joined []Member
	for len(joined) < need && len(cands) > 0 {
		batch := cands[:min(need-len(joined), len(cands))]
		cands = cands[len(batch):]
		p.stats.Invitations += len(batch)
		joined = append(joined, p.inviteAll(ctx, inv, batch)...)
	}
	p.stats.Joined += len(joined)
	p.log.Info("pond grown", "pond", inv.Pond, "group", g.key, "idle", g.idle, "asked", need, "joined", len(joined))
	if len(joined) == 0 {
		if pd == nil {
			p.seq--
		}
		return 0, nil, nil
	}
	if pd != nil {
		pd.Members = append(pd.Members, joined...)
		return len(joined), nil, nil
	}
	now := p.opts.Now()
	return len(joined), &Pond{Name: inv.Pond, ID: inv.PondID, Group: g.key, Requirements: req, Rank: rank,
		Members: joined, Created: now, LastBusy: now}, nil
}

// inviteAll invites the candidates in parallel and returns those that
// joined, best first.
func (p *Policy) inviteAll(ctx context.Context, inv api.Invitation, cands []Member) []Member {
	addrs := make([]string, len(cands))
	for i, c := range cands {
		addrs[i] = c.API
	}
	var joined []Member
	for i, o := range api.InviteAll(ctx, inv, addrs, p.opts.token(), p.opts.TLS) {
		switch {
		case o.Err != nil:
			p.log.Info("invitation failed", "node", cands[i].Name, "err", o.Err)
		case !o.Reply.Accepted:
			p.log.Info("invitation declined", "node", cands[i].Name, "reason", o.Reply.Reason)
		default:
			joined = append(joined, cands[i])
		}
	}
	sort.Slice(joined, func(i, j int) bool {
		if joined[i].Rank != joined[j].Rank {
			return joined[i].Rank > joined[j].Rank
		}
		return joined[i].Name < joined[j].Name
	})
	return joined
}

// releaseLocked releases a pond's members in parallel; p.mu must be held.
// A member that cannot be reached returns to the sea by itself once it
// misses its central manager.
func (p *Policy) releaseLocked(ctx context.Context, pd *Pond, why string) {
	var wg sync.WaitGroup
	for _, m := range pd.Members {
		wg.Go(func() {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			// The queue has drained: a member runs none of its jobs, so
			// a short wait covers a report still on its way.
			if _, err := api.NewClient(m.API).WithTLS(p.opts.TLS).WithToken(p.opts.token()).Release(rctx, pd.ID, api.Drain{Mode: api.DrainWait, Timeout: 4 * time.Second}); err != nil {
				p.log.Warn("releasing a member", "pond", pd.Name, "node", m.Name, "err", err)
			}
		})
	}
	wg.Wait()
	p.stats.Released += len(pd.Members)
	p.log.Info("pond released", "pond", pd.Name, "members", len(pd.Members), "reason", why)
}
