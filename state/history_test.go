package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var ignorePending = cmpopts.IgnoreUnexported(HistoryRecord{})

func record(cmd string, changes ...HistoryChange) HistoryRecord {
	return NewHistoryRecord(HistoryRecord{
		Time:        time.Date(2025, 3, 4, 3, 0, 7, 123, time.FixedZone("CET", 3600)),
		Command:     cmd,
		User:        "alice",
		Host:        "cm1.example.org",
		PondVersion: PondVersion,
	}, changes)
}

func TestHistoryRoundTrip(t *testing.T) {
	s := sample()
	s.AppendHistory(record("apply", HistoryChange{Address: "pool.campus", Action: ActionCreate}), 10)
	r := record("apply",
		HistoryChange{Address: `pond.burst["a"]`, Action: ActionUpdate, Attributes: []string{"nodes", "slots"}},
		HistoryChange{Address: "pool.w[2]", Action: ActionMoved, From: "pool.old[2]"},
		HistoryChange{Address: "pool.x", Action: ActionDelete})
	r.TokenSubject = "bob <ops> & co"
	s.AppendHistory(r, 10)
	if !PrepareWrite(nil, s) {
		t.Fatal("PrepareWrite of a first write says nothing to write")
	}
	enc, err := Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	if want := stdEncode(t, s); string(enc) != string(want) {
		t.Fatalf("Encode differs from encoding/json:\n%s\n---\n%s", enc, want)
	}
	back, err := Decode(enc, "h.json")
	if err != nil {
		t.Fatalf("Decode: %v\n%s", err, enc)
	}
	if diff := cmp.Diff(s.History, back.History, ignorePending); diff != "" {
		t.Fatalf("history round trip (-want +got):\n%s", diff)
	}
	if got := back.History[1]; got.Serial != s.Serial || got.Time != time.Date(2025, 3, 4, 2, 0, 7, 0, time.UTC) || got.Summary.String() != "+0 ~2 -1" {
		t.Fatalf("decoded record: serial %d (want %d), time %v, summary %s", got.Serial, s.Serial, got.Time, got.Summary)
	}
	again, err := Encode(back)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(enc) {
		t.Fatalf("Encode(Decode(x)) != x:\n%s\n---\n%s", again, enc)
	}
	if !strings.Contains(string(enc), `"token_subject": "bob <ops> & co"`) {
		t.Fatalf("history not written as expected:\n%s", enc)
	}
	c := back.DeepCopy()
	c.History[1].Changes[0].Attributes[0] = "changed"
	if back.History[1].Changes[0].Attributes[0] != "nodes" {
		t.Fatal("DeepCopy shares the history's memory")
	}
}

// A document written before pond kept a history reads, and encodes to the
// same bytes: nothing is added to it until a command records a write.
func TestHistoryAbsentInOldDocument(t *testing.T) {
	s, err := Decode([]byte(sampleEncoded), "old.json")
	if err != nil {
		t.Fatal(err)
	}
	if s.History != nil {
		t.Fatalf("history of a document without one: %v", s.History)
	}
	enc, err := Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	if string(enc) != sampleEncoded {
		t.Fatalf("old document re-encoded differently:\n%s", enc)
	}
	// Its first recorded write starts the history.
	next := s.DeepCopy()
	next.Resources = next.Resources[1:]
	next.AppendHistory(record("apply", Changes(s, next, HistoryHints{})...), DefaultHistoryKeep)
	if !PrepareWrite(s, next) {
		t.Fatal("no write for a changed state")
	}
	if len(next.History) != 1 || next.History[0].Serial != s.Serial+1 {
		t.Fatalf("history after the first write: %+v", next.History)
	}
}

func TestHistoryBound(t *testing.T) {
	for _, tc := range []struct {
		keep, writes int
		want         []uint64
	}{
		{keep: 3, writes: 5, want: []uint64{3, 4, 5}},
		{keep: 3, writes: 2, want: []uint64{1, 2}},
		{keep: 1, writes: 4, want: []uint64{4}},
		{keep: 0, writes: 2, want: []uint64{2}}, // the new record is always kept
	} {
		t.Run(fmt.Sprintf("keep%d-writes%d", tc.keep, tc.writes), func(t *testing.T) {
			var stored *State
			for i := range tc.writes {
				next := New()
				if stored != nil {
					next = stored.DeepCopy()
				}
				next.SetInstance(Address{Type: "pool", Name: fmt.Sprintf("p%d", i)}, "provider.local", &Instance{Attributes: json.RawMessage(`{}`)})
				next.AppendHistory(record("apply", Changes(stored, next, HistoryHints{})...), tc.keep)
				if !PrepareWrite(stored, next) {
					t.Fatal("no write for a changed state")
				}
				data, err := Encode(next)
				if err != nil {
					t.Fatal(err)
				}
				if stored, err = Decode(data, "s"); err != nil {
					t.Fatal(err)
				}
			}
			var got []uint64
			for _, r := range stored.History {
				got = append(got, r.Serial)
			}
			if !cmp.Equal(got, tc.want) {
				t.Fatalf("serials kept = %v, want %v", got, tc.want)
			}
			last := stored.History[len(stored.History)-1]
			if want := fmt.Sprintf("pool.p%d", tc.writes-1); len(last.Changes) != 1 || last.Changes[0].Address != want || last.Changes[0].Action != ActionCreate {
				t.Fatalf("newest record's changes = %+v, want the create of %s", last.Changes, want)
			}
		})
	}
}

// A write the backend gives another serial than the one first decided
// (another writer got in between) records the serial written.
func TestHistorySerialFollowsWrite(t *testing.T) {
	prior := sample()
	next := prior.DeepCopy()
	next.Outputs["x"] = &Output{Value: json.RawMessage(`1`), Type: json.RawMessage(`"number"`)}
	next.AppendHistory(record("apply"), 10)
	PrepareWrite(prior, next)
	if next.History[0].Serial != 5 {
		t.Fatalf("serial after the first PrepareWrite = %d, want 5", next.History[0].Serial)
	}
	stored := prior.DeepCopy()
	stored.Serial = 9
	PrepareWrite(stored, next)
	if next.Serial != 10 || next.History[0].Serial != 10 {
		t.Fatalf("serial %d, record's %d, want 10 and 10", next.Serial, next.History[0].Serial)
	}
	// An older record keeps its serial: only the one this write added is
	// stamped.
	after := next.DeepCopy()
	data, _ := Encode(after)
	decoded, err := Decode(data, "s")
	if err != nil {
		t.Fatal(err)
	}
	stored = decoded.DeepCopy()
	decoded.Outputs["x"].Value = json.RawMessage(`2`)
	PrepareWrite(stored, decoded)
	if decoded.Serial != 11 || decoded.History[0].Serial != 10 {
		t.Fatalf("serial %d, old record's %d, want 11 and 10", decoded.Serial, decoded.History[0].Serial)
	}
}

func TestHistoryChanges(t *testing.T) {
	inst := func(attrs string, sensitive map[string]string) *Instance {
		return &Instance{Attributes: json.RawMessage(attrs), SensitiveValues: sensitive}
	}
	before := New()
	before.SetInstance(Address{Type: "pool", Name: "a"}, "provider.local", inst(`{"nodes":2,"slots":1,"token":"s3cret-old","config":null}`, map[string]string{`config["PW"]`: "h1"}))
	before.SetInstance(Address{Type: "pool", Name: "same"}, "provider.local", inst(`{"nodes":1}`, nil))
	before.SetInstance(Address{Type: "pool", Name: "old"}, "provider.local", inst(`{"nodes":1}`, nil))
	before.SetInstance(Address{Type: "pool", Name: "gone"}, "provider.local", inst(`{"nodes":1}`, nil))
	before.SetInstance(Address{Type: "pool", Name: "forgot"}, "provider.local", inst(`{"nodes":1}`, nil))
	before.SetInstance(Address{Type: "pool", Name: "r"}, "provider.local", inst(`{"id":"r1"}`, nil))
	before.SetInstance(Address{Type: "pool", Name: "w", Key: 0}, "provider.local", inst(`{"id":"w0"}`, nil))

	after := New()
	after.SetInstance(Address{Type: "pool", Name: "a"}, "provider.local", inst(`{"nodes":3,"slots":1,"token":"s3cret-new","config":null,"extra":true}`, map[string]string{`config["PW"]`: "h2"}))
	after.SetInstance(Address{Type: "pool", Name: "same"}, "provider.local", inst(`{"nodes":1}`, nil))
	after.SetInstance(Address{Type: "pool", Name: "renamed"}, "provider.local", inst(`{"nodes":2}`, nil))
	after.SetInstance(Address{Type: "pool", Name: "new"}, "provider.local", inst(`{}`, nil))
	after.SetInstance(Address{Type: "pool", Name: "imp"}, "provider.local", inst(`{}`, nil))
	after.SetInstance(Address{Type: "pool", Name: "r"}, "provider.local", inst(`{"id":"r2"}`, nil))
	after.SetInstance(Address{Type: "pool", Name: "w", Key: 0}, "provider.local", inst(`{"id":"w0"}`, nil))

	got := Changes(before, after, HistoryHints{
		Actions: map[string]string{"pool.imp": ActionImport, "pool.r": ActionReplace, "pool.forgot": ActionForget},
		Moved:   map[string]string{"pool.renamed": "pool.old"},
	})
	want := []HistoryChange{
		{Address: "pool.a", Action: ActionUpdate, Attributes: []string{"config", "extra", "nodes", "token"}},
		{Address: "pool.forgot", Action: ActionForget},
		{Address: "pool.gone", Action: ActionDelete},
		{Address: "pool.imp", Action: ActionImport},
		{Address: "pool.new", Action: ActionCreate},
		{Address: "pool.r", Action: ActionReplace, Attributes: []string{"id"}},
		{Address: "pool.renamed", Action: ActionMoved, From: "pool.old", Attributes: []string{"nodes"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Changes (-want +got):\n%s", diff)
	}
	rec := NewHistoryRecord(HistoryRecord{Command: "apply"}, got)
	if rec.Summary.String() != "+3 ~2 -3" {
		t.Fatalf("summary = %s, want +3 ~2 -3", rec.Summary)
	}
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"s3cret", "h1", "h2"} {
		if strings.Contains(string(data), secret) {
			t.Fatalf("record holds a value (%s): %s", secret, data)
		}
	}

	// Removing from the state (state rm) names the action so.
	got = Changes(before, nil, HistoryHints{Gone: ActionRemoved})
	if len(got) != 7 || got[0].Action != ActionRemoved {
		t.Fatalf("Changes to nothing with Gone removed = %+v", got)
	}
}

func TestHistoryRecordBoundsChanges(t *testing.T) {
	changes := make([]HistoryChange, MaxHistoryChanges+5)
	for i := range changes {
		changes[i] = HistoryChange{Address: fmt.Sprintf("glidein.g[%d]", i), Action: ActionCreate}
	}
	r := NewHistoryRecord(HistoryRecord{Command: "apply"}, changes)
	if len(r.Changes) != MaxHistoryChanges || r.Omitted != 5 || r.Summary.Add != MaxHistoryChanges+5 {
		t.Fatalf("record of %d changes lists %d, omits %d, counts %d added", len(changes), len(r.Changes), r.Omitted, r.Summary.Add)
	}
}

func TestHistoryTouches(t *testing.T) {
	r := record("apply",
		HistoryChange{Address: "pool.w[0]", Action: ActionUpdate, Attributes: []string{"slots"}},
		HistoryChange{Address: "pool.w[1]", Action: ActionCreate},
		HistoryChange{Address: "pool.b", Action: ActionMoved, From: "pool.a"},
		HistoryChange{Address: "data.pool.w", Action: ActionCreate})
	for _, tc := range []struct {
		addr string
		want int
	}{{"pool.w", 2}, {"pool.w[1]", 1}, {"pool.a", 1}, {"pool.b", 1}, {"data.pool.w", 1}, {"pool.c", 0}} {
		a, err := ParseAddress(tc.addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Touches(a); len(got) != tc.want {
			t.Errorf("Touches(%s) = %+v, want %d changes", tc.addr, got, tc.want)
		}
	}
}

func TestHistoryDecodeErrors(t *testing.T) {
	head := `{"format_version":1,"serial":1,"lineage":"l","outputs":{},"resources":[],
"history": `
	for _, tc := range []struct {
		name, history, want string
	}{
		{"not an array", `{}`, "history: invalid history"},
		{"null record", `[null]`, "history[0]: history record is null"},
		{"no command", `[{"serial":1,"time":"2025-01-01T00:00:00Z","changes":[]}]`, `history[0]: missing "command"`},
		{"no time", `[{"serial":1,"command":"apply","changes":[]}]`, `history[0]: missing "time"`},
		{"bad time", `[{"serial":1,"time":"yesterday","command":"apply"}]`, "history: invalid history"},
		{"bad serial", `[{"serial":"1","time":"2025-01-01T00:00:00Z","command":"apply"}]`, "serial: cannot use a JSON string here, want a whole number"},
		{"bad action", `[{"serial":1,"time":"2025-01-01T00:00:00Z","command":"apply","changes":[{"address":"pool.a","action":"explode"}]}]`, `history[0].changes[0].action: action is "explode"`},
		{"bad address", `[{"serial":1,"time":"2025-01-01T00:00:00Z","command":"apply","changes":[{"address":"pool","action":"create"}]}]`, `history[0].changes[0].address: invalid address "pool"`},
		{"bad from", `[{"serial":1,"time":"2025-01-01T00:00:00Z","command":"apply","changes":[{"address":"pool.b","action":"moved","from":"x["}]}]`, `history[0].changes[0].from`},
		{"negative omitted", `[{"serial":1,"time":"2025-01-01T00:00:00Z","command":"apply","omitted":-1}]`, `history[0].omitted: omitted is -1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Decode([]byte(head+tc.history+"}"), "s.json")
			if err == nil {
				t.Fatalf("decoded %+v", s)
			}
			var de *DecodeError
			if !errors.As(err, &de) || de.Line != 2 {
				t.Fatalf("error %v is not a DecodeError on line 2", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
	// An empty or null history is no history.
	for _, h := range []string{`[]`, `null`} {
		s, err := Decode([]byte(head+h+"}"), "s.json")
		if err != nil || len(s.History) != 0 {
			t.Fatalf("history %s: %v, %v", h, s, err)
		}
	}
}
