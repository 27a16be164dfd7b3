package autoscale

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strconv"
	"strings"

	"github.com/pond-htc/pond/condor/classad"
)

// Job is a job of the schedd's queue, as the policy sees it.
type Job struct {
	// ID is "cluster.proc".
	ID string
	// Ad is the job's ClassAd.
	Ad *classad.Ad
	// Running says the job runs (JobStatus 2); otherwise it is idle.
	Running bool
	// Host is the machine a running job runs on.
	Host string
	// Count, when positive, makes an idle Job stand for that many idle
	// jobs alike (an autocluster of the schedd's, whose ad Ad is), of
	// which IDs are the first, in id order; ID is then the first of them.
	Count int
	// IDs are the first ids of the jobs an autocluster Job stands for.
	IDs []string
}

// significant are the job attributes that always set a job's group: what
// it asks of a machine and what it brings. They are lower-case, as the
// names References returns are.
var significant = []string{"requirements", "rank", "requestcpus", "requestmemory", "requestdisk"}

// group is the jobs of one autocluster: jobs whose significant attributes
// (those above and every attribute of the job they refer to) are the same,
// so that one tree query finds machines for all of them.
type group struct {
	key     string
	sample  *classad.Ad
	idle    int      // idle jobs
	ids     []string // the first maxJobIDs of them, in id order
	running int
}

// groupKey returns the autocluster signature of a job ad.
func groupKey(ad *classad.Ad) string {
	names := map[string]bool{}
	for _, n := range significant {
		names[n] = true
		if e, ok := ad.Lookup(n); ok {
			my, _ := classad.References(e)
			for _, m := range my {
				names[m] = true
			}
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	var b strings.Builder
	for _, n := range sorted {
		if e, ok := ad.Lookup(n); ok {
			b.WriteString(n)
			b.WriteByte('=')
			b.WriteString(e.String())
			b.WriteByte(';')
		}
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:8])
}

// groupJobs sorts jobs into groups, largest first (then by key).
func groupJobs(jobs []Job) []*group {
	byKey := map[string]*group{}
	var out []*group
	for _, j := range jobs {
		if j.Ad == nil {
			continue
		}
		k := groupKey(j.Ad)
		g := byKey[k]
		if g == nil {
			g = &group{key: k, sample: j.Ad}
			byKey[k] = g
			out = append(out, g)
		}
		switch {
		case j.Running:
			g.running++
		case j.Count > 0:
			g.idle += j.Count
			g.ids = append(g.ids, j.IDs...)
		default:
			g.idle++
			g.ids = append(g.ids, j.ID)
		}
	}
	for _, g := range out {
		// The autoclusters of one group each bring their first ids: the
		// group's first are among them.
		sort.SliceStable(g.ids, func(a, b int) bool { return idLess(g.ids[a], g.ids[b]) })
		if len(g.ids) > maxJobIDs {
			g.ids = g.ids[:maxJobIDs]
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].idle+out[i].running, out[j].idle+out[j].running
		if a != b {
			return a > b
		}
		return out[i].key < out[j].key
	})
	return out
}

// idLess orders job ids "cluster.proc" as numbers, ids of another form
// after them as text.
func idLess(a, b string) bool {
	ac, ap, aok := splitID(a)
	bc, bp, bok := splitID(b)
	switch {
	case aok && bok:
		return ac < bc || ac == bc && ap < bp
	case aok != bok:
		return aok
	}
	return a < b
}

func splitID(id string) (cluster, proc int, ok bool) {
	c, p, found := strings.Cut(id, ".")
	ci, err1 := strconv.Atoi(c)
	pi, err2 := strconv.Atoi(p)
	return ci, pi, found && err1 == nil && err2 == nil
}

// queryExpr returns the job's attribute name (Requirements or Rank) as an
// expression that stands on its own: a tree query carries only the
// expression, so the job attributes it refers to (RequestMemory, say) go
// with it in a record, and the expression is evaluated in that record,
// where TARGET is still the machine. It returns "" when the job has no such
// attribute.
func queryExpr(ad *classad.Ad, name string) string {
	e, ok := ad.Lookup(name)
	if !ok {
		return ""
	}
	my, _ := classad.References(e)
	rec := classad.NewAd()
	seen := map[string]bool{strings.ToLower(name): true}
	var add func(names []string, depth int)
	add = func(names []string, depth int) {
		for _, n := range names {
			if seen[n] || depth > 8 {
				continue
			}
			seen[n] = true
			x, ok := ad.Lookup(n)
			if !ok {
				continue
			}
			rec.Set(n, x)
			inner, _ := classad.References(x)
			add(inner, depth+1)
		}
	}
	add(my, 0)
	if rec.Len() == 0 {
		return e.String()
	}
	rec.Set(name, e)
	return rec.NewSyntax() + "." + name
}
