package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/wire"
)

// Quarantine lists the pool's quarantined machines (those that could not
// start jobs again and again through their own fault, which take no job
// for a while) with their
// reasons, or, given machine names, shows those machines' quarantines;
// -lift ends them, as an administrator may. pond's own tool: HTCondor has
// none.
func Quarantine(ctx context.Context, args []string, stdout, stderr io.Writer, env []string) int {
	const tool = "condor_quarantine"
	c, err := parseArgs(args, specQuaran, env, true)
	if err != nil {
		return fail(stderr, tool, fmt.Errorf("%w (want -lift, -json, -pool ADDR and machine names)", err))
	}
	lift := c.flags["lift"] != ""
	if lift && len(c.rest) == 0 {
		return fail(stderr, tool, errors.New("-lift needs the names of the machines whose quarantine it ends"))
	}
	coll, err := collectorOf(ctx, c, env)
	if err != nil {
		return fail(stderr, tool, err)
	}
	cons := "PondQuarantined =?= true"
	if len(c.rest) > 0 {
		cons = ""
		for _, name := range c.rest {
			if cons != "" {
				cons += " || "
			}
			cons += "Machine == " + classad.String(name).String()
		}
	}
	found, err := coll.Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeMachine, Constraint: cons})
	if err != nil {
		return fail(stderr, tool, err)
	}
	list, err := ads(found)
	if err != nil {
		return fail(stderr, tool, err)
	}
	// One entry per machine, from its slots' ads; -lift calls the node
	// its slots name.
	byMachine := map[string]*wire.QuarantineResponse{}
	addrs := map[string]string{}
	for _, a := range list {
		m := strAttr(a, "Machine")
		if m == "" || byMachine[m] != nil {
			continue
		}
		r := &wire.QuarantineResponse{Machine: m}
		if q, _ := a.EvalAttr("PondQuarantined").BoolValue(); q {
			r.Quarantined, r.Reason = true, strAttr(a, "PondQuarantineReason")
			r.Until = time.Unix(intAttr(a, "PondQuarantineUntil"), 0)
		}
		if e := intAttr(a, "PondEndTime"); e > 0 {
			r.EndTime = time.Unix(e, 0)
		}
		byMachine[m], addrs[m] = r, strAttr(a, "PondAddress")
	}
	for _, name := range c.rest {
		if byMachine[name] == nil {
			return fail(stderr, tool, fmt.Errorf("no machine %q in the pool", name))
		}
	}
	machines := make([]string, 0, len(byMachine))
	for m := range byMachine {
		machines = append(machines, m)
	}
	sort.Strings(machines)
	out := []*wire.QuarantineResponse{}
	for _, m := range machines {
		r := byMachine[m]
		if lift {
			node, err := client(addrs[m], env)
			if err != nil {
				return fail(stderr, tool, err)
			}
			if r, err = node.Startd().Quarantine(ctx, &wire.QuarantineRequest{Lift: true, Why: "lifted with condor_quarantine -lift"}); err != nil {
				return fail(stderr, tool, fmt.Errorf("machine %s: %w", m, err))
			}
		}
		out = append(out, r)
	}
	if c.json {
		b, _ := json.MarshalIndent(out, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	if len(out) == 0 {
		fmt.Fprintln(stdout, "No machine is quarantined.")
		return 0
	}
	for _, r := range out {
		switch {
		case r.Lifted:
			fmt.Fprintf(stdout, "%s: quarantine lifted; it takes jobs again\n", r.Machine)
		case r.Quarantined:
			fmt.Fprintf(stdout, "%s: quarantined until %s: %s\n", r.Machine, r.Until.Local().Format(time.DateTime), r.Reason)
		default:
			fmt.Fprintf(stdout, "%s: not quarantined\n", r.Machine)
		}
	}
	return 0
}

// printQuarantined lists the quarantined machines of slot ads, with their
// reasons, under condor_status's table.
func printQuarantined(w io.Writer, list []*classad.Ad) {
	seen := map[string]bool{}
	var lines []string
	for _, a := range list {
		m := strAttr(a, "Machine")
		if q, _ := a.EvalAttr("PondQuarantined").BoolValue(); !q || seen[m] {
			continue
		}
		seen[m] = true
		until := time.Unix(intAttr(a, "PondQuarantineUntil"), 0).Local().Format(time.DateTime)
		lines = append(lines, fmt.Sprintf("%-22s until %s: %s", m, until, strAttr(a, "PondQuarantineReason")))
	}
	if len(lines) == 0 {
		return
	}
	sort.Strings(lines)
	fmt.Fprintf(w, "\nQuarantined machines (they could not start jobs; they match no job):\n\n")
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}
