package cli

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/state"
)

// historyKeepEnv names the environment variable that sets how many records
// the state's history keeps.
const historyKeepEnv = "POND_STATE_HISTORY_KEEP"

// historyRecorder adds the record of a command's writes to the states it
// writes: one record per command, however many times it writes, saying
// what changed since the state it started from.
type historyRecorder struct {
	// base is the record's who, what and version.
	base state.HistoryRecord
	// before is the state the command started from; past the history the
	// written states continue.
	before *state.State
	past   []*state.HistoryRecord
	hints  state.HistoryHints
	// keep bounds the history; 0 keeps none.
	keep int
	now  func() time.Time
}

// record sets s's history: the past records, and the command's record of
// what changed from before to s.
func (h *historyRecorder) record(s *state.State) {
	if h.keep == 0 {
		s.History = nil
		return
	}
	s.History = slices.Clone(h.past)
	rec := h.base
	rec.Time = h.now()
	s.AppendHistory(state.NewHistoryRecord(rec, state.Changes(h.before, s, h.hints)), h.keep)
}

// historyKeep returns how many records the state's history keeps:
// POND_STATE_HISTORY_KEEP, else state.DefaultHistoryKeep.
func (m *meta) historyKeep() (int, error) {
	v := strings.TrimSpace(m.getenv(historyKeepEnv))
	if v == "" {
		return state.DefaultHistoryKeep, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > state.MaxHistoryKeep {
		return 0, fmt.Errorf("%s is %q: want a whole number of records from 0 (keep no history) to %d", historyKeepEnv, v, state.MaxHistoryKeep)
	}
	return n, nil
}

// recorder returns the history recorder of command, which changes before
// as hints say; an error (printed) when POND_STATE_HISTORY_KEEP is invalid.
func (m *meta) recorder(command string, before *state.State, hints state.HistoryHints) (*historyRecorder, bool) {
	keep, err := m.historyKeep()
	if err != nil {
		m.fail("Invalid history setting", err)
		return nil, false
	}
	var past []*state.HistoryRecord
	if before != nil {
		past = before.History
	}
	return &historyRecorder{base: m.historyWho(command), before: before, past: past, hints: hints, keep: keep, now: time.Now}, true
}

// persister returns the state persister of command, which records its
// writes in the state's history.
func (m *meta) persister(command string, b state.Backend, prior *state.State, hints state.HistoryHints) (*statePersister, bool) {
	h, ok := m.recorder(command, prior, hints)
	if !ok {
		return nil, false
	}
	return &statePersister{b: b, last: prior, history: h}, true
}

// historyWho returns a record's command, user, host, token subject and
// version. The user and host are as this host names them; the token's
// subject is as the token (POND_TOKEN, POND_TOKEN_FILE) claims it, not
// checked here.
func (m *meta) historyWho(command string) state.HistoryRecord {
	r := state.HistoryRecord{Command: command, PondVersion: Version}
	if u, err := user.Current(); err == nil && u.Username != "" {
		r.User = u.Username
	} else {
		r.User = m.getenv("USER")
	}
	r.Host, _ = os.Hostname()
	tok := m.getenv("POND_TOKEN")
	if tok == "" {
		if f := m.getenv("POND_TOKEN_FILE"); f != "" {
			if data, err := os.ReadFile(f); err == nil {
				tok = strings.TrimSpace(string(data))
			}
		}
	}
	if tok != "" {
		if c, err := auth.ReadClaims(tok); err == nil {
			r.TokenSubject = c.Subject
		}
	}
	return r
}

// instanceMoves pairs the instances a state mv took from prior with where
// they are in next: by key when a whole resource moved.
func instanceMoves(prior, next *state.State) map[string]string {
	was := map[string]bool{}
	for _, a := range prior.Addresses() {
		was[a.String()] = true
	}
	is := map[string]bool{}
	var added []state.Address
	for _, a := range next.Addresses() {
		is[a.String()] = true
		if !was[a.String()] {
			added = append(added, a)
		}
	}
	var gone []state.Address
	for _, a := range prior.Addresses() {
		if !is[a.String()] {
			gone = append(gone, a)
		}
	}
	moved := map[string]string{}
	if len(added) == 1 && len(gone) == 1 {
		moved[added[0].String()] = gone[0].String()
		return moved
	}
	for _, to := range added {
		for _, from := range gone {
			if state.KeyString(to.Key) == state.KeyString(from.Key) {
				moved[to.String()] = from.String()
				break
			}
		}
	}
	return moved
}

// cmdHistory implements pondctl history: the state's history, newest
// first.
func (m *meta) cmdHistory(ctx context.Context, args []string) int {
	fs := m.newFlagSet("history", "history [-json] [-n N] [-since DURATION] [ADDRESS]")
	jsonOut := fs.Bool("json", false, "print the records as JSON, newest first")
	n := fs.Int("n", 0, "show at most `N` records, the newest (0: all the state keeps)")
	since := fs.Duration("since", 0, "show only the records of the last `DURATION` (such as 90m or 24h)")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	if *n < 0 {
		return m.errorf("Invalid -n %d: want a number of records, 0 or more", *n)
	}
	if *since < 0 {
		return m.errorf("Invalid -since %s: want a duration of 0 or more", *since)
	}
	if fs.NArg() > 1 {
		return m.errorf("history takes at most one address; got %q", strings.Join(fs.Args(), " "))
	}
	var addr *state.Address
	if fs.NArg() == 1 {
		a, err := state.ParseAddress(fs.Arg(0))
		if err != nil {
			return m.fail("Invalid address", err)
		}
		addr = &a
	}
	_, s, ok := m.loadStateOnly(ctx)
	if !ok {
		return 1
	}
	recs := selectHistory(s.History, addr, *since, *n, time.Now())
	if *jsonOut {
		if recs == nil {
			recs = []*state.HistoryRecord{}
		}
		return m.printJSON(recs)
	}
	if len(recs) == 0 {
		switch {
		case len(s.History) == 0:
			fmt.Fprintln(m.stdout, "The state has no history: no pondctl that keeps one has written it yet.")
		case addr != nil:
			fmt.Fprintf(m.stdout, "No record in the state's history touches %s.\n", addr)
		default:
			fmt.Fprintln(m.stdout, "No record in the state's history matches.")
		}
		return 0
	}
	headers := []string{"SERIAL", "WHEN (UTC)", "WHO", "COMMAND", "SUMMARY"}
	if addr != nil {
		headers = append(headers, "CHANGES")
	}
	rows := make([][]string, 0, len(recs))
	for _, r := range recs {
		summary := r.Summary.String()
		if r.Omitted > 0 {
			summary += fmt.Sprintf(" (%d not listed)", r.Omitted)
		}
		row := []string{strconv.FormatUint(r.Serial, 10), r.Time.UTC().Format("2006-01-02 15:04:05"), who(r), r.Command, summary}
		if addr != nil {
			var cs []string
			for _, c := range r.Touches(*addr) {
				cs = append(cs, describeChange(c))
			}
			row = append(row, strings.Join(cs, "; "))
		}
		rows = append(rows, row)
	}
	if err := printTable(m.stdout, headers, rows); err != nil {
		return m.fail("Cannot print the history", err)
	}
	return 0
}

// selectHistory returns the records of h, newest first, that touch addr
// (when set), are no older than since (when set), at most n of them (when
// set).
func selectHistory(h []*state.HistoryRecord, addr *state.Address, since time.Duration, n int, now time.Time) []*state.HistoryRecord {
	var out []*state.HistoryRecord
	for i := len(h) - 1; i >= 0; i-- {
		r := h[i]
		if r == nil {
			continue
		}
		if since > 0 && r.Time.Before(now.Add(-since)) {
			continue
		}
		if addr != nil && len(r.Touches(*addr)) == 0 {
			continue
		}
		out = append(out, r)
		if n > 0 && len(out) == n {
			break
		}
	}
	return out
}

// who is a record's user@host, and its token's subject.
func who(r *state.HistoryRecord) string {
	s := r.User
	if r.Host != "" {
		s += "@" + r.Host
	}
	if r.TokenSubject != "" {
		s += " (token " + r.TokenSubject + ")"
	}
	return s
}

// describeChange is one change as the history table shows it: the
// address, the action and the attributes changed.
func describeChange(c state.HistoryChange) string {
	s := c.Address + " " + c.Action
	if c.From != "" {
		s += " from " + c.From
	}
	if len(c.Attributes) > 0 {
		s += " (" + strings.Join(c.Attributes, ", ") + ")"
	}
	return s
}
