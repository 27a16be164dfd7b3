package factory

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestJournalSweepsCutShortWrites loads a journal beside the temporary
// files of writes a crash cut short: the records are read, and the
// temporary files removed, not taken for records.
func TestJournalSweepsCutShortWrites(t *testing.T) {
	dir := t.TempDir()
	j, err := openJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.put(&Record{ID: "g1"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{".g2.json.tmp-123456", "g3.json.tmp"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(`{"id": "half`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := j.load()
	if err != nil || len(recs) != 1 || recs[0].ID != "g1" {
		t.Fatalf("load: %v, %v; want the record g1", recs, err)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"g1.json"}) {
		t.Errorf("the journal's directory holds %v, want only g1.json", names)
	}
}
