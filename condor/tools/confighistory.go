package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/pond-htc/pond/condor/collector/history"
	"github.com/pond-htc/pond/condor/wire"
)

// ConfigHistory shows the configuration changes the central manager
// recorded over a period (-since DURATION, default 24h) for every node of
// the pool (each node's master advertises its configuration, secrets
// redacted), or one (-node NAME): each knob added, removed or changed,
// its old and new value, when, and who (the subject of the token that
// asked for a reconfiguration of the central manager, or the identity
// of the node that advertised the change). -constraint selects by the
// change's ad (history.ConfigChange.Ad). Without -node it also shows the
// pondctl applies and destroys that changed the pool, as their records
// reached the central manager (history.ApplyRecord); -applies shows them
// alone. pond's own tool.
func ConfigHistory(ctx context.Context, args []string, stdout, stderr io.Writer, env []string) int {
	const tool = "config-history"
	const want = "want -pool ADDR, -node NAME, -since DURATION, -constraint EXPR, -applies, -json"
	c, err := parseArgs(args, specConfHist, env, true)
	if err != nil {
		return fail(stderr, tool, fmt.Errorf("%w (%s)", err, want))
	}
	if len(c.rest) > 1 || (len(c.rest) == 1 && c.flags["node"] != "") {
		return fail(stderr, tool, fmt.Errorf("unexpected argument %q (%s)", c.rest[len(c.rest)-1], want))
	}
	if len(c.rest) == 1 {
		c.flags["node"] = c.rest[0]
	}
	since := 24 * time.Hour
	if v := c.flags["since"]; v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fail(stderr, tool, fmt.Errorf("-since %q: not a positive duration (2h, 30m, 168h)", v))
		}
		since = d
	}
	coll, err := collectorOf(ctx, c, env)
	if err != nil {
		return fail(stderr, tool, err)
	}
	var rep history.Report
	req := &wire.HistoryRequest{Since: time.Now().Add(-since).Unix(), Machine: c.flags["node"], Constraint: c.constraint, ConfigOnly: true}
	if err := coll.History(ctx, req, &rep); err != nil {
		return fail(stderr, tool, err)
	}
	applies := c.flags["applies"] != ""
	switch {
	case c.json && applies:
		b, _ := json.MarshalIndent(rep.Applies, "", "  ")
		fmt.Fprintln(stdout, string(b))
	case c.json:
		b, _ := json.MarshalIndent(rep.Config, "", "  ")
		fmt.Fprintln(stdout, string(b))
	case applies:
		printApplies(stdout, &rep)
	default:
		printConfigHistory(stdout, &rep)
		if c.flags["node"] == "" {
			fmt.Fprintln(stdout)
			printApplies(stdout, &rep)
		}
	}
	if rep.Truncated {
		fmt.Fprintln(stderr, "Warning: the period holds more changes than were sent: narrow it with -since, -node or -constraint.")
	}
	return 0
}

func printConfigHistory(w io.Writer, rep *history.Report) {
	ts := func(t time.Time) string { return t.Local().Format(time.DateTime) }
	if len(rep.Config) == 0 {
		fmt.Fprintf(w, "No configuration change from %s to %s.\n", ts(rep.Since), ts(rep.Until))
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tNODE\tKNOB\tCHANGE\tBY")
	for _, c := range rep.Config {
		change := quoteEmpty(c.Old) + " -> " + quoteEmpty(c.New)
		switch {
		case c.Old == "" && c.New != "":
			change = "added: " + c.New
		case c.New == "" && c.Old != "":
			change = "removed (was " + c.Old + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", ts(c.At), c.Node, c.Knob, change, c.Who)
	}
	tw.Flush()
}

// printApplies prints the records of the pondctl commands that changed
// the pool: one row per change of each record.
func printApplies(w io.Writer, rep *history.Report) {
	ts := func(t time.Time) string { return t.Local().Format(time.DateTime) }
	if len(rep.Applies) == 0 {
		fmt.Fprintf(w, "No pondctl apply recorded from %s to %s.\n", ts(rep.Since), ts(rep.Until))
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tSERIAL\tCOMMAND\tUSER\tTOKEN SUBJECT\tCHANGES")
	for _, r := range rep.Applies {
		user := r.User
		if r.Host != "" {
			user += "@" + r.Host
		}
		summary := r.Summary()
		if r.Omitted > 0 {
			summary += fmt.Sprintf(" (%d not listed)", r.Omitted)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", ts(r.At), r.Serial, r.Command, user, r.TokenSubject, summary)
		for _, ch := range r.Changes {
			fmt.Fprintf(tw, "\t\t\t\t\t  %s\n", ch)
		}
	}
	tw.Flush()
}
