package backendtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/state"
)

// sample returns a state using every part of the document: managed and
// data resources, count and for_each keys, sensitive attributes,
// dependencies, a tainted instance and sensitive outputs.
func sample() *state.State {
	s := state.New()
	s.PondVersion = "test"
	s.SetInstance(state.Address{Type: "pool", Name: "campus"}, "provider.local", &state.Instance{
		SchemaVersion:       2,
		Attributes:          json.RawMessage(`{"id":"campus","nodes":4,"token":"secret"}`),
		SensitiveAttributes: []string{"token"},
		CreateBeforeDestroy: true,
	})
	for i := range 2 {
		s.SetInstance(state.Address{Type: "pool", Name: "w", Key: i}, "provider.local", &state.Instance{
			Attributes:   json.RawMessage(fmt.Sprintf(`{"id":"w%d"}`, i)),
			Dependencies: []string{"pool.campus"},
		})
	}
	s.Instance(state.Address{Type: "pool", Name: "w", Key: 1}).Status = "tainted"
	s.SetInstance(state.Address{Type: "pond", Name: "p", Key: "a b"}, "provider.sea", &state.Instance{
		Attributes: json.RawMessage(`{"id":"p","members":["x","y"]}`),
	})
	s.SetInstance(state.Address{Mode: state.ModeData, Type: "sea_query", Name: "big"}, "provider.sea", &state.Instance{
		Attributes: json.RawMessage(`{"constraint":"Cpus > 4","matches":[]}`),
	})
	s.Outputs["collector"] = &state.Output{Value: json.RawMessage(`"127.0.0.1:9618"`), Type: json.RawMessage(`"string"`)}
	s.Outputs["token"] = &state.Output{Value: json.RawMessage(`"secret"`), Type: json.RawMessage(`"string"`), Sensitive: true}
	return s
}

// read reads the state through b, failing the test on an error.
func read(t *testing.T, b state.Backend) *state.State {
	t.Helper()
	s, err := b.Read(t.Context())
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return s
}

// write writes s through b, failing the test on an error.
func write(t *testing.T, b state.Backend, s *state.State) {
	t.Helper()
	if err := b.Write(t.Context(), s); err != nil {
		t.Fatalf("Write: %v", err)
	}
}

// get returns the stored obj, or nil when there is none.
func get(t *testing.T, st Store, obj Object) []byte {
	t.Helper()
	data, found := st.Get(t, obj)
	if !found {
		return nil
	}
	if data == nil {
		data = []byte{}
	}
	return data
}

// checkSame fails unless got holds the lineage, serial and content of want.
func checkSame(t *testing.T, got, want *state.State) {
	t.Helper()
	switch {
	case got == nil:
		t.Fatal("no state stored")
	case got.Lineage != want.Lineage || got.Serial != want.Serial:
		t.Fatalf("stored lineage %s serial %d, want lineage %s serial %d", got.Lineage, got.Serial, want.Lineage, want.Serial)
	case got.FormatVersion != state.FormatVersion:
		t.Fatalf("stored format_version %d, want %d", got.FormatVersion, state.FormatVersion)
	case !state.ContentEqual(got, want):
		gj, _ := state.Encode(got)
		wj, _ := state.Encode(want)
		t.Fatalf("stored content differs:\n%s\nwant:\n%s", gj, wj)
	}
}

func testReadMissing(t *testing.T, newStore NewStore) {
	st := newStore(t)
	s, err := st.Open(t).Read(t.Context())
	if s != nil || err != nil {
		t.Fatalf("Read of a missing state = %v, %v; want nil, nil", s, err)
	}
}

// testRoundTrip: what is written is read back whole, by the writer and by
// another backend on the same store, and is what is stored.
func testRoundTrip(t *testing.T, newStore NewStore) {
	st := newStore(t)
	b := st.Open(t)
	s := sample()
	s.FormatVersion = 0
	write(t, b, s)
	if s.Serial != 1 || s.FormatVersion != state.FormatVersion {
		t.Fatalf("after the first write the state has serial %d and format_version %d, want 1 and %d", s.Serial, s.FormatVersion, state.FormatVersion)
	}
	for name, r := range map[string]state.Backend{"writer": b, "another backend": st.Open(t)} {
		got := read(t, r)
		checkSame(t, got, s)
		if got.PondVersion != s.PondVersion {
			t.Fatalf("%s: pond_version %q, want %q", name, got.PondVersion, s.PondVersion)
		}
	}
	data := get(t, st, StateObject)
	stored, err := state.Decode(data, st.Location())
	if err != nil {
		t.Fatalf("stored document: %v", err)
	}
	checkSame(t, stored, s)
}

// testHistory: the history is stored in the document, read back whole by
// another backend on the same store, and its newest record carries the
// serial the backend wrote, even when that is not the one its writer
// expected.
func testHistory(t *testing.T, newStore NewStore) {
	st := newStore(t)
	b := st.Open(t)
	first := sample()
	write(t, b, first)
	next := read(t, b)
	next.Outputs["collector"].Value = json.RawMessage(`"127.0.0.1:9619"`)
	next.Serial = 0 // as a writer unaware of the stored serial
	next.AppendHistory(state.NewHistoryRecord(state.HistoryRecord{Command: "apply", User: "u", Host: "h", Time: time.Now()},
		[]state.HistoryChange{{Address: "pool.campus", Action: state.ActionUpdate, Attributes: []string{"nodes"}}}), 5)
	write(t, b, next)
	got := read(t, st.Open(t))
	if got.Serial != 2 || len(got.History) != 1 {
		t.Fatalf("stored serial %d with %d history records, want 2 and 1", got.Serial, len(got.History))
	}
	r := got.History[0]
	if r.Serial != 2 || r.Command != "apply" || len(r.Changes) != 1 || r.Changes[0].Attributes[0] != "nodes" {
		t.Fatalf("stored record %+v", r)
	}
}

// testNoSharedMemory: the backend keeps neither the state it was given nor
// the one it returned.
func testNoSharedMemory(t *testing.T, newStore NewStore) {
	st := newStore(t)
	b := st.Open(t)
	s := sample()
	write(t, b, s)
	want := s.DeepCopy()
	s.Outputs["collector"].Value[1] = 'X'
	s.Outputs["later"] = &state.Output{Value: json.RawMessage(`1`)}
	got := read(t, b)
	checkSame(t, got, want)
	got.Outputs["changed"] = &state.Output{Value: json.RawMessage(`2`)}
	got.Resources[0].Instances[0].Attributes[1] = 'X'
	checkSame(t, read(t, b), want)
}

// testSerial follows the serial rule of state.PrepareWrite through Write.
func testSerial(t *testing.T, newStore NewStore) {
	tests := []struct {
		name         string
		stored       uint64 // serial of the stored document; 0: none
		serial       uint64 // serial of the document written
		otherLineage bool
		changed      bool
		want         uint64 // serial stored, and set in the written state
		written      bool
	}{
		{name: "first write", serial: 0, want: 1, written: true},
		{name: "first write of a numbered state", serial: 7, want: 7, written: true},
		{name: "unchanged", stored: 5, serial: 5, want: 5},
		{name: "unchanged, older copy", stored: 5, serial: 0, want: 5},
		{name: "unchanged, newer serial", stored: 5, serial: 9, want: 9, written: true},
		{name: "changed", stored: 5, serial: 5, changed: true, want: 6, written: true},
		{name: "changed, older copy", stored: 5, serial: 2, changed: true, want: 6, written: true},
		{name: "changed, newer serial", stored: 5, serial: 9, changed: true, want: 9, written: true},
		{name: "other lineage", stored: 5, serial: 3, otherLineage: true, changed: true, want: 3, written: true},
		{name: "other lineage, same content", stored: 5, serial: 2, otherLineage: true, want: 2, written: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newStore(t)
			b := st.Open(t)
			base := sample()
			var before, backupBefore []byte
			if tt.stored > 0 {
				first := base.DeepCopy()
				first.Serial = tt.stored
				write(t, b, first)
				if first.Serial != tt.stored {
					t.Fatalf("first write of serial %d stored serial %d", tt.stored, first.Serial)
				}
				before = get(t, st, StateObject)
				backupBefore = get(t, st, BackupObject)
			}
			s := base.DeepCopy()
			s.Serial = tt.serial
			if tt.otherLineage {
				s.Lineage = state.New().Lineage
			}
			if tt.changed {
				s.Outputs["changed"] = &state.Output{Value: json.RawMessage(`true`), Type: json.RawMessage(`"bool"`)}
			}
			write(t, st.Open(t), s)
			if s.Serial != tt.want {
				t.Errorf("Write set serial %d, want %d", s.Serial, tt.want)
			}
			got := read(t, b)
			if got.Serial != tt.want || got.Lineage != s.Lineage || !state.ContentEqual(got, s) {
				t.Errorf("stored lineage %s serial %d, want the written lineage %s serial %d", got.Lineage, got.Serial, s.Lineage, tt.want)
			}
			after := get(t, st, StateObject)
			if written := !bytes.Equal(after, before); written != tt.written {
				t.Errorf("document rewritten = %v, want %v", written, tt.written)
			}
			if backup := get(t, st, BackupObject); !tt.written && !bytes.Equal(backup, backupBefore) {
				t.Errorf("an unchanged write replaced the backup with:\n%s", backup)
			}
		})
	}
}

// testBackup: every write that changes the document keeps the previous one
// as the backup, byte for byte; the first write and unchanged writes make
// none.
func testBackup(t *testing.T, newStore NewStore) {
	st := newStore(t)
	b := st.Open(t)
	s := sample()
	write(t, b, s)
	if backup := get(t, st, BackupObject); backup != nil {
		t.Fatalf("the first write made a backup:\n%s", backup)
	}
	first := get(t, st, StateObject)

	s.Outputs["collector"].Value = json.RawMessage(`"127.0.0.2:9618"`)
	write(t, b, s)
	if backup := get(t, st, BackupObject); !bytes.Equal(backup, first) {
		t.Fatalf("backup after the second write:\n%s\nwant the first document:\n%s", backup, first)
	}
	second := get(t, st, StateObject)

	unchanged := s.DeepCopy()
	unchanged.Serial = 0
	write(t, st.Open(t), unchanged)
	if backup := get(t, st, BackupObject); !bytes.Equal(backup, first) {
		t.Fatalf("an unchanged write replaced the backup with:\n%s", backup)
	}

	s.RemoveInstance(state.Address{Type: "pool", Name: "w", Key: 1})
	write(t, b, s)
	backup := get(t, st, BackupObject)
	if !bytes.Equal(backup, second) {
		t.Fatalf("backup after the third write:\n%s\nwant the second document:\n%s", backup, second)
	}
	prev, err := state.Decode(backup, "backup")
	if err != nil {
		t.Fatalf("backup: %v", err)
	}
	if prev.Serial != 2 || s.Serial != 3 {
		t.Fatalf("backup serial %d, state serial %d; want 2 and 3", prev.Serial, s.Serial)
	}
}

// testBadDocuments: a stored document that cannot be read is an error
// naming the state, and is never overwritten.
func testBadDocuments(t *testing.T, newStore NewStore) {
	good, err := state.Encode(sample())
	if err != nil {
		t.Fatal(err)
	}
	replace := func(old, new string) []byte {
		if !bytes.Contains(good, []byte(old)) {
			t.Fatalf("encoded state lacks %q:\n%s", old, good)
		}
		return bytes.Replace(good, []byte(old), []byte(new), 1)
	}
	tests := []struct {
		name string
		doc  []byte
		want string
	}{
		{"empty", []byte{}, "state document is empty"},
		{"truncated", good[:len(good)/2], "truncated state document"},
		{"corrupt", replace(`"serial"`, `"serial" x`), "corrupt state document"},
		{"newer format", replace(`"format_version": 1`, `"format_version": 2`), "state was written by a newer pond (format 2); this pond reads format 1"},
		{"missing lineage", []byte(`{"format_version": 1, "serial": 1}`), `missing "lineage"`},
		{"newer pond", replace(`"pond_version": "test"`, `"pond_version": "99.0.0"`),
			"state was written by pondctl 99.0.0, newer than this pondctl, which writes pond_version " + state.PondVersion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newStore(t)
			b := st.Open(t)
			st.Put(t, StateObject, tt.doc)
			_, err := b.Read(t.Context())
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), st.Location()) {
				t.Fatalf("Read error = %v, want one naming %s and containing %q", err, st.Location(), tt.want)
			}
			if tt.name == "newer format" && !errors.Is(err, state.ErrNewerFormat) {
				t.Errorf("Read error %v does not wrap state.ErrNewerFormat", err)
			}
			if tt.name == "newer pond" && !errors.Is(err, state.ErrNewerPond) {
				t.Errorf("Read error %v does not wrap state.ErrNewerPond", err)
			}
			err = b.Write(t.Context(), sample())
			if err == nil || !strings.Contains(err.Error(), "refusing to overwrite") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Write error = %v, want a refusal containing %q", err, tt.want)
			}
			if after := get(t, st, StateObject); !bytes.Equal(after, tt.doc) {
				t.Fatalf("the document was changed to:\n%s", after)
			}
			if backup := get(t, st, BackupObject); backup != nil {
				t.Fatalf("a backup was written:\n%s", backup)
			}
		})
	}
}

func testNilState(t *testing.T, newStore NewStore) {
	st := newStore(t)
	if err := st.Open(t).Write(t.Context(), nil); err == nil {
		t.Fatal("Write(nil) succeeded")
	}
	if doc := get(t, st, StateObject); doc != nil {
		t.Fatalf("Write(nil) stored:\n%s", doc)
	}
}

// testCancelledContext: with a cancelled context, Lock and Write fail and
// leave nothing behind.
func testCancelledContext(t *testing.T, newStore NewStore) {
	st := newStore(t)
	b := st.Open(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := b.Lock(ctx, state.NewLockInfo("apply", ""))
	if !errors.Is(err, context.Canceled) || errors.Is(err, state.ErrLocked) {
		t.Fatalf("Lock with a cancelled context: %v, want an error wrapping context.Canceled", err)
	}
	if err := b.Write(ctx, sample()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Write with a cancelled context: %v, want an error wrapping context.Canceled", err)
	}
	for _, obj := range []Object{StateObject, BackupObject, LockObject} {
		if data := get(t, st, obj); data != nil {
			t.Fatalf("%s stored with a cancelled context:\n%s", obj, data)
		}
	}
	id, err := b.Lock(t.Context(), state.NewLockInfo("apply", ""))
	if err != nil {
		t.Fatalf("Lock after the cancelled one: %v", err)
	}
	unlock(t, b, id)
}
