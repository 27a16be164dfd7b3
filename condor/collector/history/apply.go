package history

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/pond-htc/pond/condor/classad"
)

// Bounds of an apply record as the central manager keeps it: what is past
// them is cut (a field) or counted in Omitted (a change).
const (
	// MaxApplyChanges bounds the changes one record lists, as the state's
	// own history does.
	MaxApplyChanges = 1000
	// MaxApplyAttributes bounds the attribute names of one change.
	MaxApplyAttributes = 100
	// MaxApplyField bounds, in bytes, each text field of a record.
	MaxApplyField = 512
)

// ApplyRecord is the record of a pondctl command that wrote the state and
// changed a pool (an apply, a destroy), as its central manager keeps it:
// who ran it, and which instances it changed and how. It holds attribute
// names, never values.
type ApplyRecord struct {
	// At is when the central manager received the record.
	At time.Time `json:"at"`
	// Time is when the command wrote the state, as its host says.
	Time time.Time `json:"time"`
	// Serial is the serial of the state the command wrote; a destroy's
	// record, sent before the pool goes away, has the serial it is about
	// to write.
	Serial  uint64 `json:"serial"`
	Command string `json:"command"`
	// User and Host are as the command's host names them: claims, not
	// checked.
	User        string `json:"user"`
	Host        string `json:"host"`
	PondVersion string `json:"pond_version"`
	// TokenSubject is the subject of the token the central manager
	// authenticated the record with, not what the command claimed.
	TokenSubject string `json:"token_subject"`
	// Summary counts the changes as "+2 ~1 -0" does.
	Add    int `json:"add"`
	Change int `json:"change"`
	Remove int `json:"remove"`
	// Changes are the instances the command changed, at most
	// MaxApplyChanges; Omitted counts those not listed.
	Changes []ApplyChange `json:"changes"`
	Omitted int           `json:"omitted,omitempty"`
}

// ApplyChange is what a command did to one instance: its address, the
// action, where it moved from, and the names of the attributes changed.
type ApplyChange struct {
	Address    string   `json:"address"`
	Action     string   `json:"action"`
	From       string   `json:"from,omitempty"`
	Attributes []string `json:"attributes,omitempty"`
}

// String is the change as the tables show it: "pool.a update (config)".
func (c ApplyChange) String() string {
	s := c.Address + " " + c.Action
	if c.From != "" {
		s += " from " + c.From
	}
	if len(c.Attributes) > 0 {
		s += " (" + strings.Join(c.Attributes, ", ") + ")"
	}
	return s
}

// Summary is the record's counts as "+2 ~1 -0".
func (r ApplyRecord) Summary() string {
	return fmt.Sprintf("+%d ~%d -%d", r.Add, r.Change, r.Remove)
}

// Ad is the record as a ClassAd, which a constraint selects: MyType
// "Apply", Command, User, Host, TokenSubject, PondVersion, Serial and
// ApplyTime (Unix seconds, when the central manager received it).
func (r ApplyRecord) Ad() *classad.Ad {
	ad := classad.NewAd()
	ad.SetString("MyType", "Apply")
	ad.SetString("Command", r.Command)
	ad.SetString("User", r.User)
	ad.SetString("Host", r.Host)
	ad.SetString("TokenSubject", r.TokenSubject)
	ad.SetString("PondVersion", r.PondVersion)
	ad.SetInt("Serial", int64(min(r.Serial, 1<<62)))
	ad.SetInt("ApplyTime", r.At.Unix())
	return ad
}

// clip cuts s to at most n bytes, on a rune boundary, and replaces what is
// not UTF-8 and the control characters (a terminal's escapes, tabs and
// newlines that would break the tables).
func clip(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '\uFFFD'
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// bounded returns r within the record's bounds: each field cut at
// MaxApplyField bytes, at most MaxApplyChanges changes (the rest counted
// in Omitted) of at most MaxApplyAttributes attribute names each, and no
// negative count.
func (r ApplyRecord) bounded() ApplyRecord {
	for _, f := range []*string{&r.Command, &r.User, &r.Host, &r.PondVersion, &r.TokenSubject} {
		*f = clip(*f, MaxApplyField)
	}
	r.Add, r.Change, r.Remove, r.Omitted = max(r.Add, 0), max(r.Change, 0), max(r.Remove, 0), max(r.Omitted, 0)
	if len(r.Changes) > MaxApplyChanges {
		r.Omitted += len(r.Changes) - MaxApplyChanges
		r.Changes = r.Changes[:MaxApplyChanges]
	}
	out := make([]ApplyChange, len(r.Changes))
	for i, c := range r.Changes {
		c.Address, c.Action, c.From = clip(c.Address, MaxApplyField), clip(c.Action, MaxApplyField), clip(c.From, MaxApplyField)
		if len(c.Attributes) > MaxApplyAttributes {
			c.Attributes = c.Attributes[:MaxApplyAttributes]
		}
		attrs := make([]string, len(c.Attributes))
		for j, a := range c.Attributes {
			attrs[j] = clip(a, MaxApplyField)
		}
		if len(attrs) == 0 {
			attrs = nil
		}
		c.Attributes = attrs
		out[i] = c
	}
	r.Changes = out
	return r
}

// ObserveApply records the record of a command that changed the pool,
// authenticated as subject: At is now, TokenSubject subject, and the
// record is cut to its bounds. It never blocks.
func (s *Store) ObserveApply(r ApplyRecord, subject string) {
	r.TokenSubject = subject
	r = r.bounded()
	r.At = s.opts.Now()
	s.send(event{apply: &r})
}

func writeApply(ctx context.Context, tx *sql.Tx, r *ApplyRecord) error {
	changes, err := json.Marshal(r.Changes)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO apply_records(at, time, serial, command, user, host, pond_version, subject, adds, changes_n, removes, omitted, changes)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		r.At.UnixMilli(), r.Time.UnixMilli(), int64(min(r.Serial, 1<<62)), r.Command, r.User, r.Host, r.PondVersion, r.TokenSubject,
		r.Add, r.Change, r.Remove, r.Omitted, changes)
	return err
}

// queryApplies adds to rep the records received in [since, until] that
// match accepts (nil: every one), at most limit of them.
func (s *Store) queryApplies(ctx context.Context, since, until int64, sqlLimit, limit int, match func(*classad.Ad) bool, rep *Report) error {
	rows, err := s.r.QueryContext(ctx, `SELECT at, time, serial, command, user, host, pond_version, subject, adds, changes_n, removes, omitted, changes
		FROM apply_records WHERE at >= ? AND at <= ? ORDER BY at, id LIMIT ?`, since, until, sqlLimit)
	if err != nil {
		return fmt.Errorf("history: apply records: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r ApplyRecord
		var at, tm, serial int64
		var changes []byte
		if err := rows.Scan(&at, &tm, &serial, &r.Command, &r.User, &r.Host, &r.PondVersion, &r.TokenSubject,
			&r.Add, &r.Change, &r.Remove, &r.Omitted, &changes); err != nil {
			return fmt.Errorf("history: apply records: %w", err)
		}
		r.At, r.Time, r.Serial = time.UnixMilli(at), time.UnixMilli(tm), uint64(serial)
		if err := json.Unmarshal(changes, &r.Changes); err != nil {
			return fmt.Errorf("history: apply record of %s: its changes: %w", r.At.Format(time.RFC3339), err)
		}
		if match != nil && !match(r.Ad()) {
			continue
		}
		if len(rep.Applies) == limit {
			rep.Truncated = true
			break
		}
		rep.Applies = append(rep.Applies, r)
	}
	return rows.Err()
}
