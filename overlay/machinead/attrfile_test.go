package machinead

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestAttrFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "condor_config")
	f := &attrFile{path: path}
	mtime := time.Now()
	steps := []struct {
		name        string
		content     string // "" leaves the file as it is
		want        map[string]any
		wantChanged bool
		wantErr     bool
	}{
		{"first read", "STARTD_ATTRS = Team, Rack\nTEAM = \"red\"\nRack = 7\nOther = 1\n",
			map[string]any{"Team": "red", "Rack": int64(7)}, true, false},
		{"unchanged", "", map[string]any{"Team": "red", "Rack": int64(7)}, false, false},
		{"edited", "STARTD_ATTRS = Team HasGPU\nTeam = \"blue\"\nHasGPU = true\n",
			map[string]any{"Team": "blue", "HasGPU": true}, true, false},
		{"broken keeps the last", "STARTD_ATTRS = Team\nthis is not a knob\n",
			map[string]any{"Team": "blue", "HasGPU": true}, true, true},
		{"fixed", "STARTD_ATTRS = Team\nTeam = \"green\"\n", map[string]any{"Team": "green"}, true, false},
		{"a secret keeps the last", "STARTD_ATTRS = Team Db_Secret\nTeam = \"red\"\nDB_SECRET = hunter2\n",
			map[string]any{"Team": "green"}, true, true},
		{"a named secret keeps the last", "POND_SECRET_KNOBS = DB\nSTARTD_ATTRS = Team DB\nTeam = \"red\"\nDB = hunter2\n",
			map[string]any{"Team": "green"}, true, true},
	}
	for _, st := range steps {
		if st.content != "" {
			if err := os.WriteFile(path, []byte(st.content), 0o644); err != nil {
				t.Fatal(err)
			}
			mtime = mtime.Add(time.Second) // edits within one clock tick still count
			if err := os.Chtimes(path, mtime, mtime); err != nil {
				t.Fatal(err)
			}
		}
		got, changed, err := f.load()
		if (err != nil) != st.wantErr || changed != st.wantChanged {
			t.Fatalf("%s: changed %v, error %v; want changed %v, error %v", st.name, changed, err, st.wantChanged, st.wantErr)
		}
		if d := cmp.Diff(st.want, got); d != "" {
			t.Fatalf("%s: attributes (-want +got):\n%s", st.name, d)
		}
	}
	if got, _, err := (&attrFile{}).load(); got != nil || err != nil {
		t.Fatalf("no file: %v, %v", got, err)
	}
}
