package health

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/pond-htc/pond/condor/startd"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/knobs"
)

// TestQuarantineRecord checks that a quarantine is recorded, read back
// while it lasts, forgotten when it lifts or is over, and that a record
// that cannot be read is an error naming the file, not a node that takes
// jobs again.
func TestQuarantineRecord(t *testing.T) {
	dir := t.TempDir()
	var tags []map[string]string
	h := &Quarantines{DataDir: dir, Logger: slog.New(slog.DiscardHandler),
		SetTags: func(m map[string]string) error { tags = append(tags, m); return nil }}
	if q, err := h.Load(); q != nil || err != nil {
		t.Fatalf("no record: Load = %v, %v; want nil, nil", q, err)
	}
	long := strings.Repeat("é", 100) // 200 bytes
	q := &startd.Quarantine{Reason: long, Since: time.Now(), Until: time.Now().Add(time.Hour)}
	h.Changed(q)
	got, err := h.Load()
	if err != nil || got == nil || got.Reason != long {
		t.Fatalf("Load after Changed = %v, %v; want the quarantine", got, err)
	}
	tag := tags[len(tags)-1][api.TagQuarantined]
	if len(tag) > maxQuarantineTag || !utf8.ValidString(tag) || !strings.HasPrefix(long, tag) || tag == "" {
		t.Errorf("tag %q: want a valid prefix of the reason of at most %d bytes", tag, maxQuarantineTag)
	}
	h.Changed(nil)
	if got, err := h.Load(); got != nil || err != nil {
		t.Fatalf("Load after the quarantine lifted = %v, %v; want nil, nil", got, err)
	}
	if tag := tags[len(tags)-1][api.TagQuarantined]; tag != "" {
		t.Errorf("tag after the quarantine lifted = %q, want empty", tag)
	}
	path := filepath.Join(dir, QuarantineFile)
	for _, tt := range []struct {
		name, body string
		wantErr    bool
	}{
		{"over", `{"reason":"r","until":"2001-01-01T00:00:00Z"}`, false},
		{"not JSON", `{`, true},
		{"no end", `{"reason":"r"}`, true},
	} {
		if err := os.WriteFile(path, []byte(tt.body), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := h.Load()
		if got != nil || (err != nil) != tt.wantErr || (err != nil && !strings.Contains(err.Error(), path)) {
			t.Errorf("%s: Load = %v, %v; want nil and an error naming %s: %v", tt.name, got, err, path, tt.wantErr)
		}
	}
}

func TestCheckKnobs(t *testing.T) {
	for _, tt := range []struct {
		knobs map[string]string
		want  string // in the error, "" for none
	}{
		{map[string]string{}, ""},
		{map[string]string{knobs.BlackholeFailures: "-1"}, "must not be negative"},
		{map[string]string{knobs.EndTime: "soon"}, knobs.EndTime},
		{map[string]string{knobs.QuarantineTime: "x"}, knobs.QuarantineTime},
	} {
		err := CheckKnobs(func(k string) (string, bool) { v, ok := tt.knobs[k]; return v, ok })
		if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%v: %v, want an error with %q", tt.knobs, err, tt.want)
		}
		if _, ok := errors.AsType[*knobError](err); tt.want == "must not be negative" && !ok {
			t.Errorf("%v: %T, want a knobError", tt.knobs, err)
		}
	}
}
