package flock

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/overlay/api"
)

// namePattern is what a flock's name may be: a resource address such as
// flock.overflow or flock.x["a b"], without a slash or a control
// character.
var namePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[^\x00-\x1f\x7f/]{1,200}$`) })

// Policy is a Config with its expressions parsed.
type Policy struct {
	api.FlockConfig
	allow, deny, jobs classad.Expr
}

// ExprError is an expression of a flock that does not parse: which
// argument, and the parser's message (with the position in the
// expression).
type ExprError struct {
	Arg string
	Err error
}

func (e *ExprError) Error() string { return fmt.Sprintf("%s: %v", e.Arg, e.Err) }

func (e *ExprError) Unwrap() error { return e.Err }

// Compile checks a Config and parses its expressions.
func Compile(c api.FlockConfig) (*Policy, error) {
	if !namePattern().MatchString(c.Name) {
		return nil, fmt.Errorf("flock name %q: want 1 to 200 characters, no slash and no control character", c.Name)
	}
	if c.Out == nil && c.In == nil {
		return nil, fmt.Errorf("flock %s: neither out nor in: the pool takes no part in it", c.Name)
	}
	p := &Policy{FlockConfig: c}
	if c.Out != nil {
		if c.Out.MaxJobs < 0 {
			return nil, fmt.Errorf("flock %s: max_jobs %d is negative", c.Name, c.Out.MaxJobs)
		}
		for _, e := range []struct {
			arg, src string
			to       *classad.Expr
		}{{"allow", c.Out.Allow, &p.allow}, {"deny", c.Out.Deny, &p.deny}, {"job_requirements", c.Out.JobRequirements, &p.jobs}} {
			if strings.TrimSpace(e.src) == "" {
				continue
			}
			x, err := classad.ParseExpr(e.src)
			if err != nil {
				return nil, &ExprError{Arg: e.arg, Err: err}
			}
			*e.to = x
		}
		for _, t := range c.Out.To {
			if strings.TrimSpace(t) == "" {
				return nil, fmt.Errorf("flock %s: an empty destination pool", c.Name)
			}
		}
	}
	if c.In != nil {
		for _, f := range c.In.From {
			if strings.TrimSpace(f) == "" || strings.Contains(f, ",") {
				return nil, fmt.Errorf("flock %s: source pool %q: want a pool name", c.Name, f)
			}
		}
	}
	return p, nil
}

// Admits says whether the flock lets the pool's jobs go to the pool
// announcing a (whose ad is ad): a destination it names, or any when it
// names none, that its allow expression (if any) holds true of and its
// deny expression does not.
func (p *Policy) Admits(a api.FlockAnnouncement, ad *classad.Ad) bool {
	if p.Out == nil {
		return false
	}
	if len(p.Out.To) > 0 && !slices.ContainsFunc(p.Out.To, func(t string) bool {
		return strings.EqualFold(t, a.API) || strings.EqualFold(t, a.Pool)
	}) {
		return false
	}
	if p.allow != nil && !ad.EvalExpr(p.allow).IsTrue() {
		return false
	}
	if p.deny != nil && ad.EvalExpr(p.deny).IsTrue() {
		return false
	}
	return true
}

// JobRequirements is the flock's job expression as source, "" for none.
func (p *Policy) JobRequirements() string {
	if p.jobs == nil {
		return ""
	}
	return p.jobs.String()
}

// AcceptList is the TagAccept list of a pool with these flocks: the pools
// the flocks with In name, or nil (any pool) when none has In.
func AcceptList(ps []*Policy) []string {
	var out []string
	seen := map[string]bool{}
	any := true
	for _, p := range ps {
		if p.In == nil {
			continue
		}
		any = false
		for _, f := range p.In.From {
			if k := strings.ToLower(f); !seen[k] {
				seen[k] = true
				out = append(out, f)
			}
		}
	}
	if any {
		return nil
	}
	sort.Strings(out)
	if out == nil {
		out = []string{}
	}
	return out
}

// RTTFunc estimates the round trip to a member by name.
type RTTFunc func(node string) (time.Duration, bool)

// Willing is the list of the pools willing to take pool's jobs, nearest
// first: of the announcements (already unexpired), those of other pools
// with an idle slot, that accept pool, and that one of the flocks admits.
// Pools with no RTT estimate come after those with one; ties go by name.
func Willing(pool string, anns []api.FlockAnnouncement, flocks []*Policy, rtt RTTFunc) []api.FlockCandidate {
	var out []api.FlockCandidate
	for _, c := range Admitted(pool, anns, flocks, rtt) {
		if c.IdleSlots > 0 {
			out = append(out, c)
		}
	}
	return out
}

// Admitted is Willing with the pools that have no idle slot now: those
// whose policies still let pool's jobs run there (a schedd keeps flocking
// to a pool its jobs fill, for the claims they hold to take its next jobs).
func Admitted(pool string, anns []api.FlockAnnouncement, flocks []*Policy, rtt RTTFunc) []api.FlockCandidate {
	var out []api.FlockCandidate
	for _, a := range anns {
		if strings.EqualFold(a.Pool, pool) || !a.Accepts(pool) {
			continue
		}
		d, known := time.Duration(0), false
		if rtt != nil {
			d, known = rtt(a.Node)
		}
		ad := a.Ad(d, known)
		c := api.FlockCandidate{FlockAnnouncement: a, RTT: d, RTTKnown: known}
		unbounded := false
		for _, p := range flocks {
			if !p.Admits(a, ad) {
				continue
			}
			c.Flocks = append(c.Flocks, p.Name)
			if j := p.JobRequirements(); j != "" {
				c.JobRequirements = append(c.JobRequirements, j)
			} else {
				c.AnyJob = true
			}
			if p.Out.MaxJobs == 0 {
				unbounded = true
			}
			c.MaxJobs = max(c.MaxJobs, p.Out.MaxJobs)
		}
		if len(c.Flocks) == 0 {
			continue
		}
		if unbounded {
			c.MaxJobs = 0
		}
		if c.AnyJob {
			c.JobRequirements = nil
		}
		out = append(out, c)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.RTTKnown != b.RTTKnown {
			return a.RTTKnown
		}
		if a.RTTKnown && a.RTT != b.RTT {
			return a.RTT < b.RTT
		}
		return a.Pool < b.Pool
	})
	return out
}
