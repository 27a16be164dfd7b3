package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/collector/history"
	"github.com/pond-htc/pond/condor/wire"
)

// PoolHistory shows the central manager's history of a period (-since
// DURATION, default 24h): each slot's states over it, the slot time each
// user's jobs held (slot-hours by RemoteUser), and the configuration
// changes; -machine keeps one machine's (or slot's), -constraint EXPR
// the rows whose ad (history.SlotState.Ad, history.ConfigChange.Ad) it is
// true of. With -snapshots it shows the machine ads' snapshots taken in
// the period instead, and with -at TIME the pool as it was at TIME (each
// slot's last snapshot at or before it): -constraint then selects by the
// snapshot's ad, and -long, -json, -af and -attributes print the ads.
// pond's own tool: HTCondor has none. condor status -history is the same
// query.
func PoolHistory(ctx context.Context, args []string, stdout, stderr io.Writer, env []string) int {
	const tool = "pool-history"
	const want = "want -pool ADDR, -since DURATION, -machine NAME, -constraint EXPR, -json, -snapshots, -at TIME, -long, -af"
	c, err := parseArgs(args, specPoolHist, env, true)
	if err != nil {
		return fail(stderr, tool, fmt.Errorf("%w (%s)", err, want))
	}
	if len(c.rest) > 0 {
		return fail(stderr, tool, fmt.Errorf("unexpected argument %q (%s)", c.rest[0], want))
	}
	if c.flags["snapshots"] == "" && c.flags["at"] == "" && (c.long || c.af != nil || c.attributes != nil) {
		return fail(stderr, tool, errors.New("-long, -af and -attributes print the snapshots' ads: with -snapshots or -at"))
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
	req := &wire.HistoryRequest{Since: time.Now().Add(-since).Unix(), Machine: c.flags["machine"], Constraint: c.constraint,
		Snapshots: c.flags["snapshots"] != ""}
	if v := c.flags["at"]; v != "" {
		if c.flags["since"] != "" {
			return fail(stderr, tool, errors.New("-at and -since: -at is one time, -since a period"))
		}
		at, err := ParseTime(v, time.Now())
		if err != nil {
			return fail(stderr, tool, fmt.Errorf("-at: %w", err))
		}
		req.Snapshots, req.At, req.Since = true, at.Unix(), 0
	}
	coll, err := collectorOf(ctx, c, env)
	if err != nil {
		return fail(stderr, tool, err)
	}
	var rep history.Report
	if err := coll.History(ctx, req, &rep); err != nil {
		return fail(stderr, tool, err)
	}
	if req.Snapshots {
		return printSnapshots(tool, c, stdout, stderr, &rep)
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

// ParseTime reads a time given on the command line: RFC 3339
// (2026-01-02T15:04:05Z), a date and time in the local zone
// ("2026-01-02 15:04" or with seconds), Unix seconds, "now", or a
// duration before now ("90m", "2h" ago).
func ParseTime(v string, now time.Time) (time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "now" {
		return now, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	for _, layout := range []string{time.DateTime, "2006-01-02 15:04", time.DateOnly} {
		if t, err := time.ParseInLocation(layout, v, time.Local); err == nil {
			return t, nil
		}
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 && n < 1<<40 {
		return time.Unix(n, 0), nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%q is not a time (RFC 3339, \"2006-01-02 15:04\", Unix seconds, or a duration ago such as 2h)", v)
}

// printSnapshots prints a snapshot query's ads: with -long, -json, -af
// or -attributes as condor status prints ads, a table otherwise.
func printSnapshots(tool string, c *common, stdout, stderr io.Writer, rep *history.Report) int {
	if c.json || c.long || c.af != nil {
		list := make([]*classad.Ad, 0, len(rep.Snapshots))
		for _, sn := range rep.Snapshots {
			ad := sn.ClassAd()
			ad.SetInt("PondSnapshotTime", sn.At.Unix())
			if sn.Gone {
				ad.SetString("Name", sn.Name)
				ad.SetString("Machine", sn.Machine)
				ad.SetBool("PondSnapshotGone", true)
			}
			list = append(list, ad)
		}
		if _, err := printAds(stdout, c, list); err != nil {
			return fail(stderr, tool, err)
		}
	} else {
		ts := func(t time.Time) string { return t.Local().Format(time.DateTime) }
		if !rep.Since.Equal(rep.Until) {
			fmt.Fprintf(stdout, "Machine ad snapshots from %s to %s\n\n", ts(rep.Since), ts(rep.Until))
		} else {
			fmt.Fprintf(stdout, "The pool at %s (each slot's last snapshot)\n\n", ts(rep.Until))
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SNAPSHOT\tNAME\tSTATE\tACTIVITY\tCPUS\tMEMORY\tUSER")
		for _, sn := range rep.Snapshots {
			if sn.Gone {
				fmt.Fprintf(tw, "%s\t%s\t(gone)\t-\t-\t-\t-\n", ts(sn.At), sn.Name)
				continue
			}
			ad := sn.ClassAd()
			str := func(a string) string {
				if v, ok := ad.EvalAttr(a).StringValue(); ok {
					return v
				}
				return "-"
			}
			num := func(a string) string {
				if v, ok := ad.Lookup(a); ok {
					return v.String()
				}
				return "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ts(sn.At), sn.Name, str("State"), str("Activity"), num("Cpus"), num("Memory"), str("RemoteUser"))
		}
		tw.Flush()
	}
	if rep.Truncated {
		fmt.Fprintln(stderr, "Warning: more snapshots match than were sent: narrow the query with -since, -machine or -constraint.")
	}
	return 0
}
