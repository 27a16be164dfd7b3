package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pond-htc/pond/condor/collector/history"
	"github.com/pond-htc/pond/condor/wire"
)

// PoolHistory shows the central manager's history of a period (-since
// DURATION, default 24h): each slot's states over it, the slot time each
// user's jobs held (slot-hours by RemoteUser), and the configuration
// changes; -machine keeps one machine's (or slot's), -constraint EXPR
// the rows whose ad (history.SlotState.Ad, history.ConfigChange.Ad) it is
// true of. pond's own tool: HTCondor has none. condor status -history is
// the same query.
func PoolHistory(ctx context.Context, args []string, stdout, stderr io.Writer, env []string) int {
	const tool = "pool-history"
	const want = "want -pool ADDR, -since DURATION, -machine NAME, -constraint EXPR, -json"
	c, err := parseArgs(args, specPoolHist, env, true)
	if err != nil {
		return fail(stderr, tool, fmt.Errorf("%w (%s)", err, want))
	}
	if len(c.rest) > 0 {
		return fail(stderr, tool, fmt.Errorf("unexpected argument %q (%s)", c.rest[0], want))
	}
	return poolHistory(ctx, tool, c, stdout, stderr, env)
}

// poolHistory runs the history query of c's options for tool.
func poolHistory(ctx context.Context, tool string, c *common, stdout, stderr io.Writer, env []string) int {
	since := 24 * time.Hour
	if v := c.flags["since"]; v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			n, nerr := strconv.ParseFloat(v, 64)
			if nerr != nil {
				return fail(stderr, tool, fmt.Errorf("-since %q: not a duration (2h, 30m, 7d as 168h, or seconds)", v))
			}
			d = time.Duration(n * float64(time.Second))
		}
		if d <= 0 {
			return fail(stderr, tool, fmt.Errorf("-since %q: must be positive", v))
		}
		since = d
	}
	coll, err := collectorOf(ctx, c, env)
	if err != nil {
		return fail(stderr, tool, err)
	}
	var rep history.Report
	req := &wire.HistoryRequest{Since: time.Now().Add(-since).Unix(), Machine: c.flags["machine"], Constraint: c.constraint}
	if err := coll.History(ctx, req, &rep); err != nil {
		return fail(stderr, tool, err)
	}
	if c.json {
		b, _ := json.MarshalIndent(&rep, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	printPoolHistory(stdout, &rep)
	return 0
}

func printPoolHistory(w io.Writer, rep *history.Report) {
	ts := func(t time.Time) string { return t.Local().Format(time.DateTime) }
	fmt.Fprintf(w, "History from %s to %s\n\nSlot states:\n", ts(rep.Since), ts(rep.Until))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tSLOT\tSTATE\tACTIVITY\tUSER\tJOB")
	for _, s := range rep.Slots {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", ts(s.At), s.Slot, s.State, s.Activity, dash(s.RemoteUser), dash(s.JobID))
	}
	tw.Flush()
	fmt.Fprintln(w, "\nSlot time by user:")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "USER\tSLOT-HOURS\tSLOT-SECONDS")
	for _, u := range rep.Users {
		fmt.Fprintf(tw, "%s\t%.2f\t%.0f\n", u.User, u.SlotSeconds/3600, u.SlotSeconds)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nConfiguration changes:")
	if len(rep.Config) == 0 {
		fmt.Fprintln(w, "none")
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range rep.Config {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s -> %s\tby %s\n", ts(c.At), c.Node, c.Knob, quoteEmpty(c.Old), quoteEmpty(c.New), c.Who)
	}
	tw.Flush()
	if rep.Truncated {
		fmt.Fprintln(w, "\nWarning: the period holds more rows than were sent: narrow it with -since, -machine or -constraint.")
	}
	if rep.Dropped > 0 {
		fmt.Fprintf(w, "\nWarning: %d changes were dropped unrecorded (the history's writer was behind).\n", rep.Dropped)
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func quoteEmpty(s string) string {
	if strings.TrimSpace(s) == "" {
		return `""`
	}
	return s
}
