package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// DefaultHistoryKeep is how many records a state's history keeps unless
// told otherwise: older ones are dropped as new ones are added.
const DefaultHistoryKeep = 200

// MaxHistoryKeep bounds how many records a history may be asked to keep.
const MaxHistoryKeep = 10000

// MaxHistoryChanges bounds the changes one record lists: those of a
// larger change are counted (Omitted, Summary) but not listed, so that a
// history stays small next to the state it describes.
const MaxHistoryChanges = 1000

// The actions a history change records.
const (
	ActionCreate  = "create"
	ActionUpdate  = "update"
	ActionDelete  = "delete"
	ActionReplace = "replace"
	ActionMoved   = "moved"
	ActionImport  = "import"
	// ActionRemoved is an instance `pondctl state rm` dropped from the
	// state, leaving the object it describes running.
	ActionRemoved = "removed"
	// ActionForget is an instance a removed block with destroy = false
	// dropped from the state, leaving the object running.
	ActionForget = "forget"
)

var historyActions = []string{ActionCreate, ActionUpdate, ActionDelete, ActionReplace, ActionMoved, ActionImport, ActionRemoved, ActionForget}

// HistoryRecord is one entry of a state's history: a command that wrote
// the state, who ran it, and what it changed. It never holds attribute
// values, only their names: values may be secrets.
type HistoryRecord struct {
	// Serial is the serial of the state the command wrote (its last write,
	// when it wrote several as it went).
	Serial uint64 `json:"serial"`
	// Time is when the command wrote the state, in UTC.
	Time time.Time `json:"time"`
	// Command is the command line's command, such as "apply" or
	// "state mv".
	Command string `json:"command"`
	// User and Host are the operating system user who ran the command and
	// the host it ran on, as that host reports them.
	User string `json:"user"`
	Host string `json:"host"`
	// TokenSubject is the subject of the pond token the command was given
	// (POND_TOKEN, POND_TOKEN_FILE), as the token names it; "" without one.
	TokenSubject string `json:"token_subject,omitempty"`
	// PondVersion is the version of the pond that ran the command.
	PondVersion string `json:"pond_version"`
	// Summary counts the changes, listed or not.
	Summary HistorySummary `json:"summary"`
	// Changes are the instances the command changed, in address order; at
	// most MaxHistoryChanges of them.
	Changes []HistoryChange `json:"changes"`
	// Omitted counts the changes not listed, past MaxHistoryChanges.
	Omitted int `json:"omitted,omitempty"`

	// pending marks the record of the write in progress: PrepareWrite
	// gives it the serial written.
	pending bool
}

// HistorySummary counts a record's changes as a plan summary does: a
// replaced instance is one added and one removed.
type HistorySummary struct {
	Add    int `json:"add"`
	Change int `json:"change"`
	Remove int `json:"remove"`
}

// String is the summary as "+2 ~1 -0".
func (s HistorySummary) String() string {
	return fmt.Sprintf("+%d ~%d -%d", s.Add, s.Change, s.Remove)
}

// HistoryChange is what a command did to one resource instance.
type HistoryChange struct {
	// Address is the instance's address after the change (before it, for
	// a removed instance).
	Address string `json:"address"`
	// Action is one of the Action constants.
	Action string `json:"action"`
	// From is, for a moved instance, its address before.
	From string `json:"from,omitempty"`
	// Attributes names, sorted, the top-level attributes whose values
	// changed, for an instance that was updated, replaced or moved.
	Attributes []string `json:"attributes,omitempty"`
}

// HistoryHints tell Changes what a plan did that the states alone do not
// say: which instances were replaced, imported or forgotten, and which
// moved.
type HistoryHints struct {
	// Actions gives the action of instance addresses (Address.String)
	// the states alone would call created, updated or deleted:
	// ActionReplace, ActionImport, ActionForget, ActionRemoved.
	Actions map[string]string
	// Moved maps the new address of each instance that moved to its
	// address in the state before.
	Moved map[string]string
	// Gone is the action of an instance missing from the state after,
	// without a hint of its own: ActionDelete when "".
	Gone string
}

// Changes lists, in address order, what differs between the instances of
// before and after (either may be nil), as history records it: an instance
// only in after is created (or imported), one only in before deleted (or
// removed, forgotten), one in both with other attribute values updated (or
// replaced), naming the attributes that changed.
func Changes(before, after *State, h HistoryHints) []HistoryChange {
	old, oldOrder := instancesByAddr(before)
	now, nowOrder := instancesByAddr(after)
	matched := make(map[string]bool, len(old))
	type change struct {
		at Address
		HistoryChange
	}
	var out []change
	for _, at := range nowOrder {
		addr := at.String()
		inst := now[addr]
		from := addr
		moved := false
		if f, ok := h.Moved[addr]; ok && f != addr {
			if _, there := old[f]; there {
				from, moved = f, true
			}
		}
		prev, existed := old[from]
		if existed {
			matched[from] = true
		}
		c := HistoryChange{Address: addr}
		switch {
		case !existed && h.Actions[addr] == ActionImport:
			c.Action = ActionImport
		case !existed:
			c.Action = ActionCreate
		default:
			var changed bool
			c.Attributes, changed = changedAttributes(prev, inst)
			switch {
			case moved:
				c.Action, c.From = ActionMoved, from
			case h.Actions[addr] == ActionReplace:
				c.Action = ActionReplace
			case changed:
				c.Action = ActionUpdate
			default:
				continue
			}
		}
		out = append(out, change{at, c})
	}
	gone := h.Gone
	if gone == "" {
		gone = ActionDelete
	}
	for _, at := range oldOrder {
		addr := at.String()
		if matched[addr] {
			continue
		}
		a := gone
		if hint := h.Actions[addr]; hint == ActionForget || hint == ActionRemoved {
			a = hint
		}
		out = append(out, change{at, HistoryChange{Address: addr, Action: a}})
	}
	slices.SortStableFunc(out, func(a, b change) int { return CompareAddresses(a.at, b.at) })
	res := make([]HistoryChange, len(out))
	for i, c := range out {
		res[i] = c.HistoryChange
	}
	return res
}

// NewHistoryRecord returns the record of changes made by a command: it
// counts them and lists at most MaxHistoryChanges. Serial is left for
// AppendHistory and the write to set.
func NewHistoryRecord(base HistoryRecord, changes []HistoryChange) HistoryRecord {
	r := base
	r.Time = r.Time.UTC().Truncate(time.Second)
	r.Summary = HistorySummary{}
	for _, c := range changes {
		switch c.Action {
		case ActionCreate, ActionImport:
			r.Summary.Add++
		case ActionUpdate, ActionMoved:
			r.Summary.Change++
		case ActionReplace:
			r.Summary.Add++
			r.Summary.Remove++
		default:
			r.Summary.Remove++
		}
	}
	r.Omitted = max(len(changes)-MaxHistoryChanges, 0)
	r.Changes = slices.Clone(changes[:min(len(changes), MaxHistoryChanges)])
	if r.Changes == nil {
		r.Changes = []HistoryChange{}
	}
	return r
}

// AppendHistory adds rec, the record of the write about to be made, to
// s's history and drops the oldest records beyond keep (at least one is
// kept: the new one). PrepareWrite gives rec the serial that is written.
func (s *State) AppendHistory(rec HistoryRecord, keep int) {
	keep = min(max(keep, 1), MaxHistoryKeep)
	rec.pending = true
	h := make([]*HistoryRecord, 0, min(len(s.History)+1, keep))
	if drop := len(s.History) + 1 - keep; drop > 0 {
		h = append(h, s.History[drop:]...)
	} else {
		h = append(h, s.History...)
	}
	s.History = append(h, &rec)
}

// stampHistory gives the record of the write in progress, if any, the
// serial written.
func (s *State) stampHistory() {
	if n := len(s.History); n > 0 && s.History[n-1] != nil && s.History[n-1].pending {
		s.History[n-1].Serial = s.Serial
	}
}

// Touches returns the changes of r that concern addr: all of a resource's
// instances when addr has no key, else that instance; an instance moved
// from or to addr counts.
func (r *HistoryRecord) Touches(addr Address) []HistoryChange {
	var out []HistoryChange
	for _, c := range r.Changes {
		for _, s := range []string{c.Address, c.From} {
			if s == "" {
				continue
			}
			if a, err := ParseAddress(s); err == nil && matches(addr.withMode(), a.withMode()) {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// instancesByAddr indexes s's instances by their address's string, and
// lists their addresses sorted.
func instancesByAddr(s *State) (map[string]*Instance, []Address) {
	out := map[string]*Instance{}
	if s == nil {
		return out, nil
	}
	var order []Address
	for _, r := range s.Resources {
		if r == nil {
			continue
		}
		for _, inst := range r.Instances {
			if inst != nil {
				a := r.InstanceAddr(inst.IndexKey)
				out[a.String()] = inst
				order = append(order, a)
			}
		}
	}
	slices.SortFunc(order, CompareAddresses)
	return out, order
}

// changedAttributes names, sorted, the top-level attributes whose values
// differ between a and b, sensitive values (their hashes) included, and
// reports whether the attributes differ at all: attributes that are not
// objects are compared whole, and have no names to give.
func changedAttributes(a, b *Instance) ([]string, bool) {
	if rawEqual(a.Attributes, b.Attributes) && maps.Equal(a.SensitiveValues, b.SensitiveValues) {
		return nil, false
	}
	var out []string
	oa, okA := attributeObject(a.Attributes)
	ob, okB := attributeObject(b.Attributes)
	whole := false
	if !okA || !okB {
		whole = !rawEqual(a.Attributes, b.Attributes)
	} else {
		for k, va := range oa {
			if vb, ok := ob[k]; !ok || !rawEqual(va, vb) {
				out = append(out, k)
			}
		}
		for k := range ob {
			if _, ok := oa[k]; !ok {
				out = append(out, k)
			}
		}
	}
	for p, h := range a.SensitiveValues {
		if b.SensitiveValues[p] != h {
			out = append(out, topAttribute(p))
		}
	}
	for p := range b.SensitiveValues {
		if _, ok := a.SensitiveValues[p]; !ok {
			out = append(out, topAttribute(p))
		}
	}
	out = sortedUnique(out)
	return out, whole || len(out) > 0
}

func attributeObject(raw json.RawMessage) (map[string]json.RawMessage, bool) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '{' {
		return nil, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(t, &m) != nil {
		return nil, false
	}
	return m, true
}

// topAttribute returns the top-level attribute of a sensitive value's
// path, such as config of config["SECRET"].
func topAttribute(path string) string {
	if i := strings.IndexAny(path, "[."); i >= 0 {
		return path[:i]
	}
	return path
}

// checkHistory validates the records of a decoded history; at reports an
// error at a path in the document.
func checkHistory(h []*HistoryRecord, at func(path []any, err error) error) error {
	for i, r := range h {
		p := []any{"history", i}
		if r == nil {
			return at(p, errors.New("history record is null"))
		}
		if r.Command == "" {
			return at(p, errors.New(`missing "command"`))
		}
		if r.Time.IsZero() {
			return at(p, errors.New(`missing "time"`))
		}
		if r.Changes == nil {
			r.Changes = []HistoryChange{}
		}
		for j, c := range r.Changes {
			cp := append(slices.Clone(p), "changes", j)
			if _, err := ParseAddress(c.Address); err != nil {
				return at(append(cp, "address"), fmt.Errorf("invalid address %q: %w", c.Address, err))
			}
			if !slices.Contains(historyActions, c.Action) {
				return at(append(cp, "action"), fmt.Errorf("action is %q, want one of %s", c.Action, strings.Join(historyActions, ", ")))
			}
			if c.From != "" {
				if _, err := ParseAddress(c.From); err != nil {
					return at(append(cp, "from"), fmt.Errorf("invalid address %q: %w", c.From, err))
				}
			}
		}
		if r.Omitted < 0 {
			return at(append(p, "omitted"), fmt.Errorf("omitted is %d, want 0 or more", r.Omitted))
		}
	}
	return nil
}

// deepCopyHistory returns a copy of h sharing no memory with it.
func deepCopyHistory(h []*HistoryRecord) []*HistoryRecord {
	if h == nil {
		return nil
	}
	out := make([]*HistoryRecord, len(h))
	for i, r := range h {
		if r == nil {
			continue
		}
		c := *r
		c.Changes = make([]HistoryChange, len(r.Changes))
		for j, ch := range r.Changes {
			ch.Attributes = slices.Clone(ch.Attributes)
			c.Changes[j] = ch
		}
		out[i] = &c
	}
	return out
}
