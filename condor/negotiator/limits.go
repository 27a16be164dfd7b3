package negotiator

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/wire"
)

// LimitUse is one concurrency limit a job uses (its concurrency_limits
// submit command, the ConcurrencyLimits attribute): the limit's name,
// lower-case, and how much of it the job takes.
type LimitUse struct {
	Name   string
	Weight float64
}

// ParseLimits parses a ConcurrencyLimits value: names separated by commas
// (or spaces), each optionally followed by a colon and the amount the job
// takes of it (1 without). Names are case-insensitive and may hold one or
// more periods (family.member).
func ParseLimits(s string) ([]LimitUse, error) {
	var out []LimitUse
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		name, w, hasWeight := strings.Cut(f, ":")
		name = strings.ToLower(strings.TrimSpace(name))
		if name == "" {
			return nil, fmt.Errorf("concurrency limit %q has no name", f)
		}
		for _, r := range name {
			if !(r == '_' || r == '.' || r == '-' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
				return nil, fmt.Errorf("concurrency limit %q: %q is not allowed in a limit's name", f, r)
			}
		}
		weight := 1.0
		if hasWeight {
			v, err := strconv.ParseFloat(strings.TrimSpace(w), 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return nil, fmt.Errorf("concurrency limit %q: the amount after the colon must be a number, 0 or more", f)
			}
			weight = v
		}
		out = append(out, LimitUse{Name: name, Weight: weight})
	}
	return out, nil
}

// LimitMax returns the most of the concurrency limit name (lower-case) the
// pool's jobs may hold at once, as HTCondor's negotiator reads it: the knob
// NAME_LIMIT; for a name family.member without one,
// CONCURRENCY_LIMIT_DEFAULT_FAMILY; then CONCURRENCY_LIMIT_DEFAULT.
// ok is false when none is set: the limit is unbounded.
func LimitMax(cfg *config.Config, name string) (max float64, ok bool, err error) {
	knobs := []string{strings.ToUpper(name) + "_LIMIT"}
	if fam, _, found := strings.Cut(name, "."); found {
		knobs = append(knobs, "CONCURRENCY_LIMIT_DEFAULT_"+strings.ToUpper(fam))
	}
	knobs = append(knobs, "CONCURRENCY_LIMIT_DEFAULT")
	for _, k := range knobs {
		v, set := cfg.Get(k)
		if !set || strings.TrimSpace(v) == "" {
			continue
		}
		f, err := cfg.Float(k, 0)
		if err != nil || math.IsNaN(f) {
			return 0, false, fmt.Errorf("%s = %q: want a number", k, v)
		}
		return f, true, nil
	}
	return 0, false, nil
}

// LimitAttr is the attribute of the negotiator's ad that shows how much of
// the concurrency limit name the pool's jobs hold, as HTCondor names it:
// ConcurrencyLimit_ and the name with its periods made underscores.
func LimitAttr(name string) string {
	return "ConcurrencyLimit_" + strings.ReplaceAll(name, ".", "_")
}

// LimitMaxAttr is the attribute of the negotiator's ad that shows the
// most of the concurrency limit name its jobs may hold (pond's own: an
// administrator reads it where HTCondor's ad has none).
func LimitMaxAttr(name string) string {
	return "PondConcurrencyLimitMax_" + strings.ReplaceAll(name, ".", "_")
}

// pendingTTL bounds how long a match a negotiator made counts against its
// limits before a slot ad shows it: a claim that never showed up at all.
const pendingTTL = 10 * time.Minute

// pendingMatch is a match made with concurrency limits that the slot ads
// in the collector may not show yet.
type pendingMatch struct {
	slot string // the matched slot's Name
	uses []LimitUse
	at   time.Time
}

// limiter keeps a cycle's concurrency limits: what the pool's claimed slots
// and recent matches hold, and what every limit allows.
type limiter struct {
	cfg   *config.Config
	used  map[string]float64
	max   map[string]float64 // bounded limits (looked up once a cycle)
	known map[string]bool    // names looked up this cycle
	uses  map[*autocluster][]LimitUse
	// blocked counts the idle jobs each full limit kept from a match.
	blocked map[string]int
	// shares are the submitters' fair shares of the cycle.
	shares []SubmitterShare
	now    time.Time
	made   []pendingMatch
	log    func(msg string, args ...any)
}

func newLimiter(cfg *config.Config, now time.Time, log func(string, ...any)) *limiter {
	return &limiter{cfg: cfg, used: map[string]float64{}, max: map[string]float64{}, known: map[string]bool{},
		uses: map[*autocluster][]LimitUse{}, blocked: map[string]int{}, now: now, log: log}
}

// add counts uses as held.
func (l *limiter) add(uses []LimitUse) {
	for _, u := range uses {
		l.used[u.Name] += u.Weight
		l.lookup(u.Name)
	}
}

// lookup reads the bound of a limit once a cycle.
func (l *limiter) lookup(name string) {
	if l.known[name] {
		return
	}
	l.known[name] = true
	m, ok, err := LimitMax(l.cfg, name)
	if err != nil {
		// A bound that cannot be read holds back the jobs that use it
		// rather than letting them all run.
		l.log("concurrency limit", "limit", name, "err", err)
		m, ok = 0, true
	}
	if ok {
		l.max[name] = m
	}
}

// usesOf returns the limits an autocluster's jobs use; jobs whose
// ConcurrencyLimits cannot be parsed use a limit nobody has room in.
func (l *limiter) usesOf(ac *autocluster) []LimitUse {
	if u, ok := l.uses[ac]; ok {
		return u
	}
	var uses []LimitUse
	if v, ok := ac.rep.EvalAttr("ConcurrencyLimits").StringValue(); ok && strings.TrimSpace(v) != "" {
		var err error
		if uses, err = ParseLimits(v); err != nil {
			l.log("job with unusable ConcurrencyLimits stays idle", "err", err)
			l.uses[ac] = []LimitUse{{Name: "unusable", Weight: math.Inf(1)}}
			return l.uses[ac]
		}
	}
	for _, u := range uses {
		l.lookup(u.Name)
	}
	l.uses[ac] = uses
	return uses
}

// room reports whether one more job of the autocluster fits within every
// limit it uses; when it does not, the job stays idle, counted against the
// first limit that is full.
func (l *limiter) room(ac *autocluster) bool {
	for _, u := range l.usesOf(ac) {
		if m, bounded := l.max[u.Name]; math.IsInf(u.Weight, 1) || bounded && l.used[u.Name]+u.Weight > m+1e-9 {
			l.blocked[u.Name] += len(ac.jobs) - ac.next
			return false
		}
	}
	return true
}

// SubmitterShare is where a submitter with idle jobs stood in a
// negotiation cycle: its effective user priority (lower is better), the
// jobs it ran, and its fair share of the pool's cpus by that priority.
// A submitter that runs its share is served only after every other one
// got its own.
type SubmitterShare struct {
	Name     string
	Priority float64
	Running  int
	Share    float64
}

// share notes a submitter's fair share of the cycle.
func (l *limiter) share(s Submitter, share float64) {
	if l != nil {
		l.shares = append(l.shares, SubmitterShare{Name: s.Name, Priority: s.Priority, Running: s.Running, Share: share})
	}
}

// charge counts one more job of the autocluster matched to slot.
func (l *limiter) charge(ac *autocluster, slot *Slot) {
	uses := l.usesOf(ac)
	if len(uses) == 0 {
		return
	}
	for _, u := range uses {
		l.used[u.Name] += u.Weight
	}
	l.made = append(l.made, pendingMatch{slot: slot.Name, uses: uses, at: l.now})
}

// limitUsage counts what the pool's claimed slots hold of the concurrency
// limits, and the negotiator's matches the collector does not show yet,
// into a new limiter. seen maps the unclaimed slots' Names to when the
// collector last heard of them; the claimed slots are added to it.
func (n *Negotiator) limitUsage(ctx context.Context, coll collectorConn, cfg *config.Config, seen map[string]int64) (*limiter, error) {
	l := newLimiter(cfg, n.opts.Now(), n.log.Warn)
	claimed, err := coll.Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeMachine,
		Constraint: `State == "Claimed" && ConcurrencyLimits isnt undefined`})
	if err != nil {
		return nil, fmt.Errorf("querying claimed slots: %w", err)
	}
	for _, w := range claimed {
		name, _ := classad.UnquoteString(w["Name"])
		if t, err := strconv.ParseInt(strings.TrimSpace(w["LastHeardFrom"]), 10, 64); err == nil && name != "" {
			seen[name] = max(seen[name], t)
		}
		v, err := classad.UnquoteString(w["ConcurrencyLimits"])
		if err != nil {
			continue
		}
		uses, err := ParseLimits(v)
		if err != nil {
			continue
		}
		l.add(uses)
	}
	n.mu.Lock()
	keep := n.pending[:0]
	for _, p := range n.pending {
		// The slot's ad came after the match: it shows the claim (and
		// its limits) or that the claim is over.
		if t, ok := seen[p.slot]; ok && t > p.at.Unix() || l.now.Sub(p.at) > pendingTTL {
			continue
		}
		keep = append(keep, p)
		l.add(p.uses)
	}
	clear(n.pending[len(keep):])
	n.pending = keep
	n.mu.Unlock()
	return l, nil
}

// recordMatches keeps the cycle's matches with limits until the slot ads
// show them, and the cycle's limit usage for the negotiator's ad.
func (n *Negotiator) recordMatches(l *limiter) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.pending = append(n.pending, l.made...)
	// A limit seen once stays in the ad, at 0 in use when nothing holds
	// it now, as HTCondor's accountant keeps it; its bound is read again.
	for name := range n.limitsUsed {
		if len(l.known) >= maxRememberedLimits {
			break
		}
		l.lookup(name)
	}
	n.limitsUsed = make(map[string]float64, len(l.known))
	n.limitsMax = make(map[string]float64, len(l.max))
	for name := range l.known {
		n.limitsUsed[name] = l.used[name]
	}
	for name, m := range l.max {
		n.limitsMax[name] = m
	}
	n.limitsBlocked = l.blocked
	n.shares = l.shares
}

// maxRememberedLimits bounds the concurrency limits the negotiator's ad
// keeps showing after the jobs that used them are gone.
const maxRememberedLimits = 1024

// LimitBlockedAttr is the attribute of the negotiator's ad that counts
// the idle jobs the full concurrency limit name kept from a match in the
// last cycle (pond's own).
func LimitBlockedAttr(name string) string {
	return "PondConcurrencyLimitBlocked_" + strings.ReplaceAll(name, ".", "_")
}

// SharesAttr is the attribute of the negotiator's ad that lists the
// submitters with idle jobs in the last cycle, each a record of its Name,
// Priority (effective, lower is better), Running jobs and fair Share of
// the pool's cpus (pond's own: condor q -better-analyze reads it).
const SharesAttr = "PondSubmitterShares"

// setLimitAttrs puts the concurrency limits of the last cycle in the
// negotiator's ad: ConcurrencyLimit_name, what the pool holds of each
// (as HTCondor's negotiator), PondConcurrencyLimitMax_name, its bound,
// and PondConcurrencyLimitBlocked_name, the idle jobs it held back; and
// the submitters' fair shares in PondSubmitterShares.
func (n *Negotiator) setLimitAttrs(ad *classad.Ad) {
	n.mu.Lock()
	defer n.mu.Unlock()
	names := make([]string, 0, len(n.limitsUsed))
	for name := range n.limitsUsed {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		ad.SetReal(LimitAttr(name), n.limitsUsed[name])
		if m, ok := n.limitsMax[name]; ok {
			ad.SetReal(LimitMaxAttr(name), m)
		}
		if b := n.limitsBlocked[name]; b > 0 {
			ad.SetInt(LimitBlockedAttr(name), int64(b))
		}
	}
	if len(n.shares) == 0 {
		return
	}
	recs := make([]classad.Value, 0, len(n.shares))
	for _, sh := range n.shares {
		r := classad.NewAd()
		r.SetString("Name", sh.Name)
		r.SetReal("Priority", sh.Priority)
		r.SetInt("Running", int64(sh.Running))
		r.SetReal("Share", sh.Share)
		recs = append(recs, classad.AdValue(r))
	}
	ad.SetValue(SharesAttr, classad.List(recs))
}

// LimitsBlocked returns, for each concurrency limit that was full in the
// last cycle, how many idle jobs it kept from a match.
func (n *Negotiator) LimitsBlocked() map[string]int {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(map[string]int, len(n.limitsBlocked))
	for k, v := range n.limitsBlocked {
		out[k] = v
	}
	return out
}
