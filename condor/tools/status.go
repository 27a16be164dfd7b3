package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/negotiator"
	"github.com/pond-htc/pond/condor/wire"
)

// Status is condor_status: the pool's slots by default, or -schedd,
// -submitters, -negotiator, -master, -any ads; with -af, -l, -json and
// -constraint.
func Status(ctx context.Context, args []string, stdout, stderr io.Writer, env []string) int {
	c, err := parseArgs(args, specStatus, env, true)
	if err != nil {
		return fail(stderr, "condor_status", err)
	}
	if c.flags["history"] != "" {
		// -history: the central manager's history of the slots' states
		// and configuration changes, as pool-history shows it.
		for _, f := range []string{"schedd", "submitters", "negotiator", "master", "any", "totals", "wide"} {
			if c.flags[f] != "" {
				return fail(stderr, "condor_status", fmt.Errorf("-%s and -history: -history shows the slots' states and the configuration changes", f))
			}
		}
		snaps := c.flags["snapshots"] != "" || c.flags["at"] != ""
		if len(c.formats) > 0 || (!snaps && (len(c.af) > 0 || c.long || len(c.attributes) > 0)) {
			return fail(stderr, "condor_status", errors.New("-history prints its own table, or -json (with -snapshots or -at also -long, -af or -attributes of the snapshots' ads): not -format"))
		}
		if len(c.rest) > 1 || (len(c.rest) == 1 && c.flags["machine"] != "") {
			return fail(stderr, "condor_status", errors.New("-history takes one machine or slot name"))
		}
		if len(c.rest) == 1 {
			c.flags["machine"] = c.rest[0]
		}
		return poolHistory(ctx, "condor_status -history", c, stdout, stderr, env)
	} else if c.flags["since"] != "" || c.flags["machine"] != "" || c.flags["snapshots"] != "" || c.flags["at"] != "" {
		return fail(stderr, "condor_status", errors.New("-since, -machine, -snapshots and -at go with -history"))
	}
	typ := wire.TypeMachine
	for flag, t := range map[string]string{"schedd": wire.TypeSchedd, "submitters": wire.TypeSubmitter,
		"negotiator": wire.TypeNegotiator, "master": wire.TypeMaster, "any": wire.TypeAny} {
		if c.flags[flag] != "" {
			typ = t
		}
	}
	cons := c.constraint
	for _, name := range c.rest {
		n := classad.String(name).String()
		e := "(Name == " + n + " || Machine == " + n + ")"
		if cons == "" {
			cons = e
		} else {
			cons = "(" + cons + ") && " + e
		}
	}
	coll, err := collectorOf(ctx, c, env)
	if err != nil {
		return fail(stderr, "condor_status", err)
	}
	found, err := coll.Query(ctx, &wire.QueryAdsRequest{Type: typ, Constraint: cons})
	if err != nil {
		return fail(stderr, "condor_status", err)
	}
	list, err := ads(found)
	if err != nil {
		return fail(stderr, "condor_status", err)
	}
	if done, err := printAds(stdout, c, list); done {
		if err != nil {
			return fail(stderr, "condor_status", err)
		}
		return 0
	}
	switch typ {
	case wire.TypeMachine:
		printSlots(stdout, list, c.flags["totals"] != "")
		printQuarantined(stdout, list)
		printDraining(stdout, list)
	case wire.TypeSchedd:
		fmt.Fprintf(stdout, "%-27s %-27s %9s %9s %9s\n\n", "Name", "Machine", "RunningJobs", "IdleJobs", "HeldJobs")
		for _, a := range list {
			fmt.Fprintf(stdout, "%-27s %-27s %9d %9d %9d\n", strAttr(a, "Name"), strAttr(a, "Machine"),
				intAttr(a, "TotalRunningJobs"), intAttr(a, "TotalIdleJobs"), intAttr(a, "TotalHeldJobs"))
		}
		fmt.Fprintln(stdout)
	case wire.TypeSubmitter:
		fmt.Fprintf(stdout, "%-27s %-20s %11s %8s %8s\n\n", "Name", "Machine", "RunningJobs", "IdleJobs", "HeldJobs")
		for _, a := range list {
			fmt.Fprintf(stdout, "%-27s %-20s %11d %8d %8d\n", strAttr(a, "Name"), strAttr(a, "ScheddName"),
				intAttr(a, "RunningJobs"), intAttr(a, "IdleJobs"), intAttr(a, "HeldJobs"))
		}
		fmt.Fprintln(stdout)
	default:
		fmt.Fprintf(stdout, "%-40s %-14s\n\n", "Name", "MyType")
		for _, a := range list {
			fmt.Fprintf(stdout, "%-40s %-14s\n", strAttr(a, "Name"), strAttr(a, "MyType"))
		}
		fmt.Fprintln(stdout)
		if typ == wire.TypeNegotiator {
			printLimits(stdout, list)
			printGroups(stdout, list)
		}
	}
	return 0
}

// printLimits prints the concurrency limits the negotiators' ads show:
// what the pool's jobs hold of each (ConcurrencyLimit_name) and its bound
// (PondConcurrencyLimitMax_name, "-" for none).
func printLimits(w io.Writer, list []*classad.Ad) {
	const used, bound = "concurrencylimit_", "pondconcurrencylimitmax_"
	header := false
	for _, a := range list {
		var names []string
		for _, n := range a.Names() {
			if l := strings.ToLower(n); strings.HasPrefix(l, used) {
				names = append(names, n[len(used):])
			}
		}
		sort.Strings(names)
		for _, n := range names {
			if !header {
				fmt.Fprintf(w, "%-30s %10s %10s\n\n", "ConcurrencyLimit", "Used", "Max")
				header = true
			}
			u, _ := a.EvalAttr(used + n).NumberValue()
			m := "-"
			if v, ok := a.EvalAttr(bound + n).NumberValue(); ok {
				m = strconv.FormatFloat(v, 'g', -1, 64)
			}
			fmt.Fprintf(w, "%-30s %10s %10s\n", n, strconv.FormatFloat(u, 'g', -1, 64), m)
		}
	}
	if header {
		fmt.Fprintln(w)
	}
}

// printGroups prints the accounting groups' quotas the negotiators' ads
// show, as condor_userprio -quotas does: each group's configured quota
// (static, or a fraction of its parent's), its effective quota, whether
// it accepts surplus, what it uses, requests and was allocated in the
// last cycle, and the idle jobs its quota held back.
func printGroups(w io.Writer, list []*classad.Ad) {
	for _, a := range list {
		groups := negotiator.ReadGroupQuotas(a)
		if len(groups) == 0 {
			continue
		}
		fmt.Fprintf(w, "%-24s %10s %-6s %10s %-7s %10s %10s %10s %8s\n\n", "Group", "Config", "Static", "Quota",
			"Surplus", "InUse", "Requested", "Allocated", "Blocked")
		yn := func(b bool) string {
			if b {
				return "yes"
			}
			return "no"
		}
		g := strconv.FormatFloat
		for _, q := range groups {
			fmt.Fprintf(w, "%-24s %10s %-6s %10s %-7s %10s %10s %10s %8d\n", q.Name, g(q.ConfigQuota, 'g', 6, 64), yn(q.Static),
				g(q.Quota, 'g', 6, 64), yn(q.AcceptSurplus), g(q.Usage, 'g', 6, 64), g(q.Requested, 'g', 6, 64),
				g(q.Allocated, 'g', 6, 64), q.Blocked)
		}
		fmt.Fprintln(w)
	}
}

// printSlots prints a line per slot (unless totalsOnly, condor_status
// -totals) and the slots' counts by state, per platform and in all.
func printSlots(w io.Writer, list []*classad.Ad, totalsOnly bool) {
	now := time.Now().Unix()
	if !totalsOnly {
		fmt.Fprintf(w, "%-22s %-10s %-6s %-9s %-8s %6s %-5s %s\n\n", "Name", "OpSys", "Arch", "State", "Activity", "LoadAv", "Mem", "ActvtyTime")
	}
	type row struct{ total, owner, claimed, unclaimed, matched, preempting, drain, backfill, bkidle int }
	per := map[string]*row{}
	var total row
	for _, a := range list {
		since := now - intAttr(a, "EnteredCurrentActivity")
		if since < 0 {
			since = 0
		}
		load, _ := a.EvalAttr("LoadAvg").NumberValue()
		if !totalsOnly {
			fmt.Fprintf(w, "%-22s %-10s %-6s %-9s %-8s %6.3f %-5d %d+%02d:%02d:%02d\n", strAttr(a, "Name"), strAttr(a, "OpSys"),
				strAttr(a, "Arch"), strAttr(a, "State"), strAttr(a, "Activity"), load, intAttr(a, "Memory"),
				since/86400, since/3600%24, since/60%60, since%60)
		}
		key := strAttr(a, "Arch") + "/" + strAttr(a, "OpSys")
		r := per[key]
		if r == nil {
			r = &row{}
			per[key] = r
		}
		for _, x := range []*row{r, &total} {
			x.total++
			switch strAttr(a, "State") {
			case "Owner":
				x.owner++
			case "Claimed":
				x.claimed++
			case "Unclaimed":
				x.unclaimed++
			case "Matched":
				x.matched++
			case "Preempting":
				x.preempting++
			case "Drained":
				x.drain++
			case "Backfill":
				x.backfill++
			}
		}
	}
	keys := make([]string, 0, len(per))
	for k := range per {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(w, "\n%14s %5s %5s %7s %9s %7s %10s %6s %8s %6s\n\n", "", "Total", "Owner", "Claimed", "Unclaimed", "Matched", "Preempting", "Drain", "Backfill", "BkIdle")
	line := func(label string, r *row) {
		fmt.Fprintf(w, "%14s %5d %5d %7d %9d %7d %10d %6d %8d %6d\n", label, r.total, r.owner, r.claimed, r.unclaimed,
			r.matched, r.preempting, r.drain, r.backfill, r.bkidle)
	}
	for _, k := range keys {
		line(k, per[k])
	}
	fmt.Fprintln(w)
	line("Total", &total)
}
