package jsonfile

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	tests := []struct {
		name    string
		v       any
		wantErr bool
	}{
		{name: "map", v: map[string]int{"seq": 3}},
		{name: "replaces the old document", v: []string{"a", "b"}},
		{name: "unencodable", v: func() {}, wantErr: true},
	}
	path := filepath.Join(t.TempDir(), "doc.json")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := os.ReadFile(path)
			err := Write(path, tt.v)
			after, _ := os.ReadFile(path)
			if tt.wantErr {
				if err == nil || string(after) != string(before) {
					t.Fatalf("err = %v; document changed from %q to %q", err, before, after)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want, _ := json.MarshalIndent(tt.v, "", "  ")
			if string(after) != string(want) {
				t.Fatalf("file = %q, want %q", after, want)
			}
			if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
				t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
			}
			if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
				t.Fatalf("files left beside the document: %v", ents)
			}
		})
	}
}
