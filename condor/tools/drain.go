package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/wire"
)

// Drain drains a machine, as condor_drain: the machine takes no new job
// until the drain is cancelled, and its running jobs are evicted as the
// schedule says (-graceful, the default: after their retirement time;
// -quick: at once, with their vacate time; -fast: killed at once), going
// back to their schedds' queues. -cancel ends the drain. It asks the
// machine's startd, which needs ADMINISTRATOR.
func Drain(ctx context.Context, args []string, stdout, stderr io.Writer, env []string) int {
	const tool = "condor_drain"
	c, err := parseArgs(args, specDrain, env, true)
	if err != nil {
		return fail(stderr, tool, fmt.Errorf("%w (want -graceful, -quick or -fast, -reason TEXT, -cancel, -request-id ID, -json, -pool ADDR and a machine name)", err))
	}
	req := &wire.DrainRequest{Reason: c.flags["reason"], Cancel: c.flags["cancel"] != "", RequestID: c.flags["request-id"]}
	var schedules []string
	for _, s := range []string{wire.DrainGraceful, wire.DrainQuick, wire.DrainFast} {
		if c.flags[s] != "" {
			schedules = append(schedules, "-"+s)
			req.Schedule = s
		}
	}
	switch {
	case len(c.rest) != 1:
		return fail(stderr, tool, fmt.Errorf("want one machine name, got %d (%s)", len(c.rest), strings.Join(c.rest, " ")))
	case len(schedules) > 1:
		return fail(stderr, tool, fmt.Errorf("%s: choose one draining schedule", strings.Join(schedules, " and ")))
	case req.Cancel && (len(schedules) > 0 || req.Reason != ""):
		return fail(stderr, tool, errors.New("-cancel takes no draining schedule and no -reason"))
	case !req.Cancel && req.RequestID != "":
		return fail(stderr, tool, errors.New("-request-id names the drain -cancel ends"))
	}
	machine := c.rest[0]
	coll, err := collectorOf(ctx, c, env)
	if err != nil {
		return fail(stderr, tool, err)
	}
	lit := classad.String(machine).String()
	found, err := coll.Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeMachine, Constraint: "Machine == " + lit + " || Name == " + lit})
	if err != nil {
		return fail(stderr, tool, err)
	}
	list, err := ads(found)
	if err != nil {
		return fail(stderr, tool, err)
	}
	addrs := map[string]bool{}
	for _, a := range list {
		if addr := strAttr(a, "PondAddress"); addr != "" {
			addrs[addr] = true
		}
	}
	switch len(addrs) {
	case 0:
		return fail(stderr, tool, fmt.Errorf("no machine %q in the pool", machine))
	case 1:
	default:
		names := make([]string, 0, len(addrs))
		for a := range addrs {
			names = append(names, a)
		}
		sort.Strings(names)
		return fail(stderr, tool, fmt.Errorf("%q names machines at %s: name one by its Machine", machine, strings.Join(names, ", ")))
	}
	var addr string
	for a := range addrs {
		addr = a
	}
	node, err := client(addr, env)
	if err != nil {
		return fail(stderr, tool, err)
	}
	resp, err := node.Startd().Drain(ctx, req)
	if err != nil {
		return fail(stderr, tool, fmt.Errorf("machine %s: %w", machine, err))
	}
	if c.json {
		b, _ := json.MarshalIndent(resp, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	if resp.Cancelled {
		fmt.Fprintf(stdout, "Sent request to cancel draining on %s (request id %s): it takes jobs again", resp.Machine, resp.RequestID)
		if resp.Resumed > 0 {
			fmt.Fprintf(stdout, "; %d retiring job(s) run on", resp.Resumed)
		}
		fmt.Fprintln(stdout)
		return 0
	}
	fmt.Fprintf(stdout, "Sent request to drain %s (%s, request id %s, since %s): it takes no new job; %d job(s) running, %d being evicted. Reason: %s\n",
		resp.Machine, resp.Schedule, resp.RequestID, resp.Since.Local().Format(time.DateTime), resp.Running, resp.Evicting, resp.Reason)
	return 0
}

// printDraining lists the draining machines of slot ads, with their
// schedules and reasons, under condor_status's table.
func printDraining(w io.Writer, list []*classad.Ad) {
	seen := map[string]bool{}
	var lines []string
	for _, a := range list {
		m := strAttr(a, "Machine")
		if d, _ := a.EvalAttr("Draining").BoolValue(); !d || seen[m] {
			continue
		}
		seen[m] = true
		line := fmt.Sprintf("%-22s", m)
		if id := strAttr(a, "DrainingRequestId"); id != "" {
			since := time.Unix(intAttr(a, "LastDrainStartTime"), 0).Local().Format(time.DateTime)
			line += fmt.Sprintf(" %-8s since %s (request %s): %s", strAttr(a, "PondDrainSchedule"), since, id, strAttr(a, "DrainReason"))
		} else {
			line += " (pond drains it: a release or its end time)"
		}
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		return
	}
	sort.Strings(lines)
	fmt.Fprintf(w, "\nDraining machines (they take no new job):\n\n")
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}
