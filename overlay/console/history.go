package console

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/collector/history"
	"github.com/pond-htc/pond/condor/wire"
)

// HistoryRows bounds the rows of each kind the history page reads: it
// shows them PageSize at a time.
const HistoryRows = 1000

// historyData is the history page: the central manager's record of the
// slots' state changes and the configuration changes of a period, as
// pondctl condor status -history shows it.
type historyData struct {
	Machine    string
	Since      string // a duration before now
	Until      string // a duration before now; "": now
	Constraint string
	From, To   time.Time
	Report     *history.Report
	Rows       int
	None       string
	// Slots and Config are the page's rows: PageSize from Start.
	Slots  []history.SlotState
	Config []history.ConfigChange
	// Applies are the pondctl applies that changed the pool, the first
	// PageSize; AppliesCut counts the rest.
	Applies          []history.ApplyRecord
	AppliesCut       int
	Start, Prev      int
	Next, More       int // Next 0: no next page
	ConfigCut        int // the changes past the first PageSize
	SlotsN, ConfigsN int
	// At, a duration before now, asks for the pool as it was then: each
	// slot's last machine ad snapshot at or before it (Snaps, PageSize
	// from Start), the constraint selecting by the snapshot's ad.
	At     string
	AtTime time.Time
	Snaps  []snapRow
	SnapsN int
}

// snapRow is one slot of the pool as it was: its last snapshot's time and
// the attributes the page shows.
type snapRow struct {
	At                                         time.Time
	Name, Machine, State, Activity, User, Cpus string
	Memory                                     string
}

func snapRows(list []history.Snapshot) []snapRow {
	out := make([]snapRow, 0, len(list))
	for _, sn := range list {
		ad := sn.ClassAd()
		str := func(a string) string { v, _ := ad.EvalAttr(a).StringValue(); return v }
		num := func(a string) string {
			if e, ok := ad.Lookup(a); ok {
				return e.String()
			}
			return ""
		}
		out = append(out, snapRow{At: sn.At, Name: sn.Name, Machine: sn.Machine, State: str("State"), Activity: str("Activity"),
			User: str("RemoteUser"), Cpus: num("Cpus"), Memory: num("Memory")})
	}
	return out
}

func (rd reader) history(ctx context.Context, v *view, r *http.Request) *historyData {
	q := r.URL.Query()
	d := &historyData{Machine: strings.TrimSpace(q.Get("machine")), Since: strings.TrimSpace(q.Get("since")),
		Until: strings.TrimSpace(q.Get("until")), Constraint: strings.TrimSpace(q.Get("constraint")), Rows: HistoryRows,
		Start: max(atoi(q.Get("start")), 0), Prev: -1, At: strings.TrimSpace(q.Get("at"))}
	if d.At != "" {
		rd.historyAt(ctx, v, d)
		return d
	}
	if d.Since == "" {
		d.Since = "1h"
	}
	since, err := ago("since", d.Since)
	if err != nil {
		v.fail("the period", err)
		return d
	}
	var until time.Duration
	if d.Until != "" {
		if until, err = ago("until", d.Until); err != nil {
			v.fail("the period", err)
			return d
		}
	}
	if until > since {
		v.fail("the period", fmt.Errorf("until=%s is before since=%s: the period ends before it begins", d.Until, d.Since))
		return d
	}
	now := v.Now
	d.From, d.To = now.Add(-since).Truncate(time.Second), now.Add(-until).Truncate(time.Second)
	req := &wire.HistoryRequest{Since: d.From.Unix(), Machine: d.Machine, Constraint: d.Constraint, Limit: HistoryRows}
	if d.Until != "" {
		req.Until = d.To.Unix()
	}
	// The period is named as the viewer gave it (1h before now), so that
	// the viewers of one window share a read of it.
	if rep := rd.readHistory(ctx, v, d, req, "history", d.Since, d.Until); rep != nil {
		d.Report = rep
		d.SlotsN, d.ConfigsN = len(rep.Slots), len(rep.Config)
		d.Start = min(d.Start, max(len(rep.Slots)-1, 0)) / PageSize * PageSize
		end := min(d.Start+PageSize, len(rep.Slots))
		d.Slots = rep.Slots[d.Start:end]
		if end < len(rep.Slots) {
			d.Next, d.More = end, len(rep.Slots)-end
		}
		if d.Start > 0 {
			d.Prev = max(d.Start-PageSize, 0)
		}
		d.Config = rep.Config[:min(len(rep.Config), PageSize)]
		d.ConfigCut = len(rep.Config) - len(d.Config)
		d.Applies = rep.Applies[:min(len(rep.Applies), PageSize)]
		d.AppliesCut = len(rep.Applies) - len(d.Applies)
	}
	return d
}

// historyAt reads the pool as it was d.At ago.
func (rd reader) historyAt(ctx context.Context, v *view, d *historyData) {
	at, err := ago("at", d.At)
	if err != nil {
		v.fail("the time", err)
		return
	}
	d.AtTime = v.Now.Add(-at).Truncate(time.Second)
	req := &wire.HistoryRequest{At: d.AtTime.Unix(), Machine: d.Machine, Constraint: d.Constraint, Limit: HistoryRows, Snapshots: true}
	if rep := rd.readHistory(ctx, v, d, req, "history-at", d.At); rep != nil {
		d.Report = rep
		d.SnapsN = len(rep.Snapshots)
		d.Start = min(d.Start, max(len(rep.Snapshots)-1, 0)) / PageSize * PageSize
		end := min(d.Start+PageSize, len(rep.Snapshots))
		d.Snaps = snapRows(rep.Snapshots[d.Start:end])
		if end < len(rep.Snapshots) {
			d.Next, d.More = end, len(rep.Snapshots)-end
		}
		if d.Start > 0 {
			d.Prev = max(d.Start-PageSize, 0)
		}
	}
}

// readHistory reads the collector's history req asks for, shared by the
// viewers whose key (kind, the collector, d's machine and constraint, and
// the period's words) is the same; nil, with d.None or the view's failure
// saying why, when it cannot.
func (rd reader) readHistory(ctx context.Context, v *view, d *historyData, req *wire.HistoryRequest, kind string, period ...string) *history.Report {
	coll := rd.collector(v)
	key := strings.Join(append([]string{kind, coll.Addr(), d.Machine, d.Constraint}, period...), "\x00")
	got, err := rd.shared(ctx, key, func(ctx context.Context) (any, error) {
		var rep history.Report
		if err := coll.History(ctx, req, &rep); err != nil {
			return nil, err
		}
		return &rep, nil
	})
	switch {
	case notServed(err):
		d.None = "this central manager keeps no history: " + err.Error()
		return nil
	case err != nil:
		v.fail("the collector's history", err)
		return nil
	}
	return got.(*history.Report)
}

// ago parses a duration before now: 30m, 2h, 7d, or seconds.
func ago(name, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil && strings.HasSuffix(s, "d") {
		if n, nerr := time.ParseDuration(strings.TrimSuffix(s, "d") + "h"); nerr == nil {
			d, err = n*24, nil
		}
	}
	if err != nil {
		if n, nerr := time.ParseDuration(s + "s"); nerr == nil {
			d, err = n, nil
		}
	}
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s=%q is no duration before now (30m, 2h, 7d)", name, s)
	}
	return d, nil
}
