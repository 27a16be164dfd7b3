// Package negotiator is pond's negotiator: every NEGOTIATOR_INTERVAL, and
// soon after a schedd reports new idle jobs (but no sooner than
// NEGOTIATOR_MIN_INTERVAL after the previous cycle), it gathers the slots
// and submitters from the collector and the idle jobs from the schedds,
// matches them (autoclusters, symmetric ClassAd match, NEGOTIATOR_PRE_JOB_RANK,
// job Rank, NEGOTIATOR_POST_JOB_RANK then machine Rank, fair share by user priority with half-life decay) and hands each
// schedd its matches with the slots' claim ids.
package negotiator

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/wire"
)

// Options configure a Negotiator.
type Options struct {
	Config *config.Config
	Name   string
	// Address is the host:port of the node the negotiator runs on (its
	// agent's API address), shown in its ad as MyAddress.
	Address string
	// Token gives the token the negotiator presents to the collector and
	// the schedds (nil: none, for an open pool); it is called for each
	// call, so that a refreshed token is used at once.
	Token func() string
	// TLS is the sea's TLS other nodes' daemons are called with; nil
	// speaks plain HTTP.
	TLS *tls.Config
	// Collector returns the collector's address (CONDOR_HOST).
	Collector func() string
	// LocalCollector, when set, returns the collector that runs in the
	// negotiator's own process when addr is its address, nil otherwise:
	// the cycle's queries are then answered without the wire (no JSON,
	// no TLS), which at 10,000 slots is most of a cycle's cost. The ads
	// it answers may be the collector's own: the negotiator only reads
	// them.
	LocalCollector func(addr string) Querier
	Logger         *slog.Logger
	Now            func() time.Time
}

// Querier answers queries for ads, as a collector does.
type Querier interface {
	Query(ctx context.Context, req *wire.QueryAdsRequest) (*wire.QueryAdsResponse, error)
}

// ParsedQuerier is a Querier in the negotiator's process that also hands
// out its ads as it holds them, parsed (collector.Collector.QueryParsed):
// the negotiator then does not have every slot's ad copied and parsed
// again each cycle. The ads are shared: the negotiator changes none.
type ParsedQuerier interface {
	QueryParsed(ctx context.Context, req *wire.QueryAdsRequest) ([]wire.ParsedAd, error)
}

// collectorConn is the collector of a cycle: in process when the
// collector runs there, else over the wire.
type collectorConn struct {
	remote *wire.Collector
	local  Querier
}

// Query returns the ads req asks for.
func (c collectorConn) Query(ctx context.Context, req *wire.QueryAdsRequest) ([]wire.Ad, error) {
	if c.local != nil {
		resp, err := c.local.Query(ctx, req)
		if err != nil {
			return nil, err
		}
		return resp.Ads, nil
	}
	return c.remote.Query(ctx, req)
}

// Update sends the collector an update (the negotiator's own ad), over
// the wire in either case: the collector's handler is what records it.
func (c collectorConn) Update(ctx context.Context, req *wire.UpdateRequest) error {
	return c.remote.Update(ctx, req)
}

// collector returns the connection to the collector at cm.
func (n *Negotiator) collector(cm string) collectorConn {
	c := collectorConn{remote: n.peer(cm).Collector()}
	if n.opts.LocalCollector != nil {
		c.local = n.opts.LocalCollector(cm)
	}
	return c
}

// token is the token to present now ("" for none).
func (o *Options) token() string {
	if o.Token == nil {
		return ""
	}
	return o.Token()
}

// Negotiator runs negotiation cycles.
type Negotiator struct {
	opts Options
	log  *slog.Logger
	wake chan struct{}

	mu        sync.Mutex
	interval  time.Duration
	minIntvl  time.Duration
	halfLife  time.Duration
	factor    float64
	epoch     int64              // wire.EpochKnob: stamped on every match
	usage     map[string]float64 // submitter -> real user priority
	lastDecay time.Time
	last      time.Time
	stats     CycleStats
	// cfg is the configuration the concurrency limits are read from.
	cfg *config.Config
	// pending are the matches with concurrency limits the collector's
	// slot ads may not show yet; limitsUsed, limitsMax and limitsBlocked
	// are the limits of the last cycle.
	pending       []pendingMatch
	limitsUsed    map[string]float64
	limitsMax     map[string]float64
	limitsBlocked map[string]int
	shares        []SubmitterShare
	// preempt is the preemption policy (NEGOTIATOR_CONSIDER_PREEMPTION,
	// PREEMPTION_REQUIREMENTS, PREEMPTION_RANK) with the pool's job
	// ranks (NEGOTIATOR_PRE_JOB_RANK, NEGOTIATOR_POST_JOB_RANK).
	preempt PreemptPolicy
	// metrics are the negotiator's counters and histograms (metrics.go).
	metrics *negotiatorMetrics
	// groups are the accounting groups with their quotas (GROUP_NAMES;
	// nil: none); groupReport is what the last cycle worked out for them
	// and groupPending the matches the collector's slot ads may not show
	// yet, counted in their submitters' usage.
	groups       *GroupTree
	groupReport  []GroupQuota
	groupPending []pendingUse
	// niceFactor is NICE_USER_PRIO_FACTOR, the priority factor of the
	// submitters of the nice-user accounting group (accounting.go).
	niceFactor float64
}

// CycleStats describes one negotiation cycle.
type CycleStats struct {
	Start        time.Time
	Duration     time.Duration
	Slots        int
	Submitters   int
	IdleJobs     int
	Autoclusters int
	Matches      int
}

// New returns a negotiator configured from NEGOTIATOR_INTERVAL,
// NEGOTIATOR_MIN_INTERVAL, PRIORITY_HALFLIFE and DEFAULT_PRIO_FACTOR.
func New(opts Options) (*Negotiator, error) {
	if opts.Config == nil {
		opts.Config = config.New(config.Options{})
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Collector == nil {
		opts.Collector = func() string { return "" }
	}
	n := &Negotiator{opts: opts, log: opts.Logger.With("daemon", "negotiator"), wake: make(chan struct{}, 1),
		usage: map[string]float64{}, lastDecay: opts.Now(), metrics: newMetrics()}
	if err := n.Reconfig(opts.Config); err != nil {
		return nil, err
	}
	return n, nil
}

// Reconfig re-reads the negotiator's knobs.
func (n *Negotiator) Reconfig(cfg *config.Config) error {
	interval, err := cfg.Duration("NEGOTIATOR_INTERVAL", 60*time.Second)
	if err != nil {
		return fmt.Errorf("NEGOTIATOR_INTERVAL: %w", err)
	}
	minIntvl, err := cfg.Duration("NEGOTIATOR_MIN_INTERVAL", 5*time.Second)
	if err != nil {
		return fmt.Errorf("NEGOTIATOR_MIN_INTERVAL: %w", err)
	}
	half, err := cfg.Duration("PRIORITY_HALFLIFE", 86400*time.Second)
	if err != nil {
		return fmt.Errorf("PRIORITY_HALFLIFE: %w", err)
	}
	factor, err := cfg.Float("DEFAULT_PRIO_FACTOR", 1000)
	if err != nil {
		return fmt.Errorf("DEFAULT_PRIO_FACTOR: %w", err)
	}
	nice, err := cfg.Float("NICE_USER_PRIO_FACTOR", DefaultNiceUserPrioFactor)
	if err != nil {
		return fmt.Errorf("NICE_USER_PRIO_FACTOR: %w", err)
	}
	epoch, err := cfg.Int(wire.EpochKnob, 0)
	if err != nil {
		return err
	}
	pol, err := ReadPreemptPolicy(cfg)
	if err != nil {
		return err
	}
	if pol.Ranks, err = ReadJobRanks(cfg); err != nil {
		return err
	}
	if epoch < 0 {
		return fmt.Errorf("%s = %d: an epoch is 0 or more", wire.EpochKnob, epoch)
	}
	groups, warns, err := ReadGroups(cfg)
	if err != nil {
		return fmt.Errorf("group quotas: %w", err)
	}
	for _, w := range warns {
		n.log.Warn("group quotas: " + w)
	}
	n.mu.Lock()
	n.groups = groups
	if groups == nil {
		n.groupReport, n.groupPending = nil, nil
	}
	n.interval, n.minIntvl, n.halfLife, n.factor = max(interval, time.Millisecond), minIntvl, max(half, time.Second), max(factor, 1)
	n.epoch = int64(epoch)
	n.niceFactor = max(nice, 1)
	n.cfg = cfg
	n.preempt = pol
	n.mu.Unlock()
	return nil
}

// Reschedule asks for a cycle as soon as NEGOTIATOR_MIN_INTERVAL allows
// (condor_reschedule).
func (n *Negotiator) Reschedule(ctx context.Context, _ *struct{}) (struct{}, error) {
	select {
	case n.wake <- struct{}{}:
	default:
	}
	return struct{}{}, nil
}

// Handler serves the negotiator's endpoints relative to its mount point.
func (n *Negotiator) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/reschedule", wire.Handle(n.Reschedule))
	return mux
}

// LastCycle returns the statistics of the latest cycle.
func (n *Negotiator) LastCycle() CycleStats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stats
}

// Run negotiates every NEGOTIATOR_INTERVAL and on Reschedule until ctx ends.
func (n *Negotiator) Run(ctx context.Context) error {
	for {
		n.mu.Lock()
		interval, last := n.interval, n.last
		n.mu.Unlock()
		timer := time.NewTimer(time.Until(last.Add(interval)))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		case <-n.wake:
			timer.Stop()
			// A reconfiguration while waiting (a pond policy lowering
			// NEGOTIATOR_MIN_INTERVAL, say) applies to this wake-up.
			n.mu.Lock()
			minIntvl := n.minIntvl
			n.mu.Unlock()
			if d := time.Until(last.Add(minIntvl)); d > 0 {
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(d):
				}
			}
		}
		if _, err := n.Cycle(ctx); err != nil && ctx.Err() == nil {
			n.log.Warn("negotiation cycle", "err", err)
		}
	}
}

// Cycle runs one negotiation cycle now.
func (n *Negotiator) Cycle(ctx context.Context) (CycleStats, error) {
	start := n.opts.Now()
	n.mu.Lock()
	n.last = time.Now()
	n.mu.Unlock()
	st := CycleStats{Start: start}
	cm := n.opts.Collector()
	if cm == "" {
		return st, nil
	}
	coll := n.collector(cm)
	seen := map[string]int64{}
	n.mu.Lock()
	cfg, pol, groups := n.cfg, n.preempt, n.groups
	n.mu.Unlock()
	slots, claimed, err := n.slots(ctx, coll, seen, pol.Consider)
	if err != nil {
		return st, err
	}
	lim, err := n.limitUsage(ctx, coll, cfg, seen)
	if err != nil {
		return st, err
	}
	st.Slots = len(slots)
	subs, running, idle, err := n.submitters(ctx, coll, append(slots[:len(slots):len(slots)], claimed...))
	if err != nil {
		return st, err
	}
	st.Submitters = len(subs)
	st.IdleJobs = idle
	n.decay(running)
	n.mu.Lock()
	for i := range subs {
		subs[i].Priority = math.Max(n.usage[subs[i].Name], 0.5) * n.factorOf(subs[i].Name)
	}
	epoch := n.epoch
	n.mu.Unlock()
	var gc *groupCycle
	if groups != nil {
		total, usage, err := n.groupUsage(ctx, coll, seen)
		if err != nil {
			return st, err
		}
		for _, s := range slots {
			total += max(s.cpus, 0)
		}
		gc = newGroupCycle(groups, total, usage)
	}
	matches, acs := matchmake(slots, subs, lim, gc, pol.Ranks)
	matches = append(matches, gc.filterPreemptions(n.preemptions(slots, claimed, subs, matches, pol))...)
	n.recordMatches(lim)
	n.recordGroups(gc, matches)
	for name, jobs := range lim.blocked {
		n.log.Debug("concurrency limit full: jobs stay idle", "limit", name, "jobs", jobs,
			"used", lim.used[name], "max", lim.max[name])
	}
	st.Autoclusters = acs
	st.Matches = len(matches)
	n.sendMatches(ctx, matches, epoch)
	st.Duration = n.opts.Now().Sub(start)
	n.mu.Lock()
	n.stats = st
	n.mu.Unlock()
	n.metrics.observe(st, subs, matches, lim.blocked)
	n.advertise(ctx, coll, st)
	n.log.Debug("negotiation cycle", "slots", st.Slots, "idle", st.IdleJobs, "matches", st.Matches, "took", st.Duration)
	return st, nil
}

// slots returns the pool's unclaimed slots with their claim ids and,
// with preemption, its claimed slots that may be preempted with their
// preempting claim ids. seen gets each slot's Name with when the
// collector last heard of it.
func (n *Negotiator) slots(ctx context.Context, coll collectorConn, seen map[string]int64, preempt bool) ([]*Slot, []*Slot, error) {
	constraint := `State == "Unclaimed"`
	if preempt {
		constraint = `State == "Unclaimed" || State == "Claimed" && PartitionableSlot =!= true`
	}
	req := &wire.QueryAdsRequest{Type: wire.TypeMachine, Constraint: constraint, WithPrivate: true}
	if pq, ok := coll.local.(ParsedQuerier); ok {
		found, err := pq.QueryParsed(ctx, req)
		if err != nil {
			return nil, nil, fmt.Errorf("querying slots: %w", err)
		}
		slots, claimed := parsedSlots(found, seen)
		return slots, claimed, nil
	}
	machines, err := coll.Query(ctx, req)
	if err != nil {
		return nil, nil, fmt.Errorf("querying slots: %w", err)
	}
	// Over the wire the private ClaimId comes in the ad: it is taken out
	// (a slot's ad must not show it to the jobs matched against it), and
	// the ad parsed.
	found := make([]wire.ParsedAd, 0, len(machines))
	for _, w := range machines {
		private := wire.Ad{"ClaimId": w["ClaimId"]}
		delete(w, "ClaimId")
		ad, err := wire.ToClassAd(w)
		if err != nil {
			continue
		}
		found = append(found, wire.ParsedAd{Ad: ad, Private: private})
	}
	slots, claimed := parsedSlots(found, seen)
	return slots, claimed, nil
}

// parsedSlots is slots for parsed slot ads (as a collector in the same
// process holds them, or as read over the wire): the unclaimed slots and
// the claimed ones, each
// with its claim id (private) and its startd's address. seen gets each
// slot's Name with when the collector last heard of it.
func parsedSlots(found []wire.ParsedAd, seen map[string]int64) (slots, claimed []*Slot) {
	for _, f := range found {
		claimID, err := classad.UnquoteString(f.Private["ClaimId"])
		if err != nil || claimID == "" {
			continue
		}
		startd, ok := f.Ad.EvalAttr("PondAddress").StringValue()
		if !ok {
			continue
		}
		if name, ok := f.Ad.EvalAttr("Name").StringValue(); ok {
			if t, ok := f.Ad.EvalAttr("LastHeardFrom").IntValue(); ok {
				seen[name] = t
			}
		}
		if state, _ := f.Ad.EvalAttr("State").StringValue(); state == "Claimed" {
			claimed = append(claimed, NewSlot(f.Ad, startd, claimID))
			continue
		}
		slots = append(slots, NewSlot(f.Ad, startd, claimID))
	}
	return slots, claimed
}

// submitters returns the submitters with idle jobs, each with the idle jobs
// its schedd offers for slots, how many jobs every submitter runs and how
// many jobs are idle in all.
func (n *Negotiator) submitters(ctx context.Context, coll collectorConn, slots []*Slot) ([]Submitter, map[string]int, int, error) {
	ads, err := coll.Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeSubmitter})
	if err != nil {
		return nil, nil, 0, fmt.Errorf("querying submitters: %w", err)
	}
	req := idleRequest(slots)
	req.Negotiator = n.opts.Name
	total := 0
	running := map[string]int{}
	var subs []Submitter
	for _, w := range ads {
		ad, err := wire.ToClassAd(w)
		if err != nil {
			continue
		}
		name, _ := ad.EvalAttr("Name").StringValue()
		owner, _ := ad.EvalAttr("Owner").StringValue()
		schedd, _ := ad.EvalAttr("PondAddress").StringValue()
		idle, _ := ad.EvalAttr("IdleJobs").IntValue()
		run, _ := ad.EvalAttr("RunningJobs").IntValue()
		running[name] += int(run)
		if idle == 0 || schedd == "" {
			continue
		}
		r := req
		r.Owner = owner
		jobs, count, err := n.idleJobs(ctx, schedd, &r)
		if err != nil {
			n.log.Warn("fetching idle jobs", "schedd", schedd, "err", err)
			continue
		}
		total += count
		subs = append(subs, Submitter{Name: name, Schedd: schedd, Running: int(run), Jobs: jobs})
	}
	return subs, running, total, nil
}

// idleRequest asks for the idle jobs the slots could take in one cycle:
// autoclusters kept apart by the attributes the slots refer to, each with
// no more jobs than the slots have room for.
func idleRequest(slots []*Slot) wire.IdleRequest {
	// Jobs that use other concurrency limits are matched apart.
	req := wire.IdleRequest{SignificantAttrs: []string{"concurrencylimits"}}
	for a := range SlotAttrs(slots) {
		if a == "concurrencylimits" {
			continue
		}
		req.SignificantAttrs = append(req.SignificantAttrs, a)
	}
	sort.Strings(req.SignificantAttrs)
	for _, s := range slots {
		if s.Partitionable {
			req.Limit += max(1, int(math.Ceil(s.cpus)))
		} else {
			req.Limit++
		}
	}
	// Zero slots: the answer need only say what is idle.
	req.Limit = max(req.Limit, 1)
	return req
}

// idleJobs fetches an owner's idle jobs from a schedd: those offered, the
// jobs of an autocluster sharing its parsed ad, and how many are idle.
func (n *Negotiator) idleJobs(ctx context.Context, schedd string, req *wire.IdleRequest) ([]Job, int, error) {
	resp, err := n.peer(schedd).Schedd().IdleClusters(ctx, req)
	if err != nil {
		return nil, 0, err
	}
	var jobs []Job
	count := 0
	for _, ac := range resp.Clusters {
		ad, err := wire.ToClassAd(ac.Ad)
		if err != nil {
			continue
		}
		count += max(ac.Count, len(ac.IDs))
		for _, id := range ac.IDs {
			jobs = append(jobs, Job{ID: id, Ad: ad})
		}
	}
	return jobs, count, nil
}

// matchesPerRequest bounds the matches sent to a schedd in one request:
// each carries its slot's ad, and a cycle that matched 10,000 slots to
// one schedd built the whole request (about 70 MB) before sending any of
// it, the schedd decoding it whole before starting a claim.
const matchesPerRequest = 256

// sendMatches hands each schedd its matches, matchesPerRequest at a time.
// A request that fails ends the schedd's: the jobs of the matches not
// sent stay idle for the next cycle.
func (n *Negotiator) sendMatches(ctx context.Context, matches []Match, epoch int64) {
	bySchedd := map[string][]Match{}
	var schedds []string
	for _, m := range matches {
		if _, ok := bySchedd[m.Schedd]; !ok {
			schedds = append(schedds, m.Schedd)
		}
		bySchedd[m.Schedd] = append(bySchedd[m.Schedd], m)
	}
	for _, schedd := range schedds {
		ms := bySchedd[schedd]
		for sent := 0; sent < len(ms); {
			chunk := ms[sent:min(len(ms), sent+matchesPerRequest)]
			ws := make([]wire.Match, len(chunk))
			for i, m := range chunk {
				ws[i] = m.Wire()
				ws[i].Epoch = epoch
			}
			err := n.peer(schedd).Schedd().Matches(ctx, &wire.MatchesRequest{Negotiator: n.opts.Name, Matches: ws})
			if err != nil {
				n.log.Warn("sending matches", "schedd", schedd, "matches", len(ms)-sent, "err", err)
				break
			}
			sent += len(chunk)
		}
	}
}

// decay updates each submitter's real user priority towards the number of
// jobs it runs, with PRIORITY_HALFLIFE.
func (n *Negotiator) decay(running map[string]int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.opts.Now()
	dt := now.Sub(n.lastDecay).Seconds()
	n.lastDecay = now
	beta := math.Pow(0.5, dt/n.halfLife.Seconds())
	for name := range n.usage {
		if _, ok := running[name]; !ok {
			running[name] = 0
		}
	}
	for name, r := range running {
		u, ok := n.usage[name]
		if !ok {
			u = 0.5
		}
		n.usage[name] = math.Max(beta*u+(1-beta)*float64(r), 0.5)
	}
}

// Accounting returns the submitters' real user priorities (their usage,
// before the priority factor), the accounting a replica of the central
// manager keeps so that a negotiator taking over goes on from it.
func (n *Negotiator) Accounting() map[string]float64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(map[string]float64, len(n.usage))
	for k, v := range n.usage {
		out[k] = v
	}
	return out
}

// SetAccounting merges usage (Accounting of another negotiator of the
// pool) into the negotiator's: a submitter's usage becomes the higher of
// the two, so that nobody's priority improves by a change of manager.
func (n *Negotiator) SetAccounting(usage map[string]float64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for k, v := range usage {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			continue
		}
		n.usage[k] = math.Max(n.usage[k], v)
	}
}

// Epoch returns the epoch the negotiator stamps its matches with.
func (n *Negotiator) Epoch() int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.epoch
}

// Priorities returns the submitters' effective user priorities.
func (n *Negotiator) Priorities() map[string]float64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(map[string]float64, len(n.usage))
	for k, v := range n.usage {
		out[k] = v * n.factorOf(k)
	}
	return out
}

func (n *Negotiator) advertise(ctx context.Context, coll collectorConn, st CycleStats) {
	ad := classad.NewAd()
	ad.SetString("MyType", "Negotiator")
	ad.SetString("Name", n.opts.Name)
	// What HTCondor's tools read of a daemon's ad (htcondor cm status):
	// where it runs, and how busy it is, here the share of the interval
	// the last cycle took.
	ad.SetString("Machine", n.opts.Name)
	if n.opts.Address != "" {
		ad.SetString("MyAddress", "<"+n.opts.Address+">")
	}
	n.mu.Lock()
	interval := n.interval
	n.mu.Unlock()
	ad.SetReal("RecentDaemonCoreDutyCycle", min(1, st.Duration.Seconds()/interval.Seconds()))
	ad.SetInt("LastNegotiationCycleTime0", st.Start.Unix())
	ad.SetReal("LastNegotiationCycleDuration0", st.Duration.Seconds())
	ad.SetInt("LastNegotiationCycleMatches0", int64(st.Matches))
	ad.SetInt("LastNegotiationCycleNumIdleJobs0", int64(st.IdleJobs))
	ad.SetInt("LastNegotiationCycleNumJobsConsidered0", int64(st.IdleJobs))
	ad.SetInt("LastNegotiationCycleSlots0", int64(st.Slots))
	ad.SetInt("PondEpoch", n.Epoch())
	ad.SetInt("LastNegotiationCycleActiveSubmitterCount0", int64(st.Submitters))
	n.setLimitAttrs(ad)
	n.setGroupAttrs(ad)
	_ = coll.Update(ctx, &wire.UpdateRequest{Type: wire.TypeNegotiator,
		Source: "negotiator@" + n.opts.Name, Ads: []wire.Ad{wire.FromClassAd(ad)}})
}

// peer returns a wire client of the node whose API is at addr, with the
// pool token and the sea's TLS.
func (n *Negotiator) peer(addr string) *wire.Client {
	return wire.NewClient(addr, n.opts.token()).WithTLS(n.opts.TLS)
}
