package acceptance

import (
	"encoding/json"
	"os/user"
	"slices"
	"strings"
	"testing"
)

// historyRecord is a record of pondctl history -json.
type historyRecord struct {
	Serial      uint64 `json:"serial"`
	Time        string `json:"time"`
	Command     string `json:"command"`
	User        string `json:"user"`
	Host        string `json:"host"`
	PondVersion string `json:"pond_version"`
	Summary     struct {
		Add, Change, Remove int
	} `json:"summary"`
	Changes []struct {
		Address    string   `json:"address"`
		Action     string   `json:"action"`
		From       string   `json:"from"`
		Attributes []string `json:"attributes"`
	} `json:"changes"`
}

func (w *workdir) history(args ...string) []historyRecord {
	w.t.Helper()
	r := w.expect(0, append([]string{"history", "-json"}, args...)...)
	var recs []historyRecord
	if err := json.Unmarshal([]byte(r.stdout), &recs); err != nil {
		w.t.Fatalf("history -json: %v\n%s", err, r.stdout)
	}
	return recs
}

// actions renders a record's changes as "address action [from] (attrs)".
func (r historyRecord) actions() []string {
	var out []string
	for _, c := range r.Changes {
		s := c.Address + " " + c.Action
		if c.From != "" {
			s += " " + c.From
		}
		if len(c.Attributes) > 0 {
			s += " (" + strings.Join(c.Attributes, ",") + ")"
		}
		out = append(out, s)
	}
	return out
}

// TestHistory: every command that writes the state records who ran it and
// what it changed, and pondctl history shows it, newest first; a failed
// apply leaves a record only when it wrote the state.
func TestHistory(t *testing.T) {
	t.Parallel()
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	w := newWorkdir(t, "")
	w.write("main.pond.hcl", "pool \"p\" {\n  nodes = 1\n}\n")
	if r := w.expect(0, "history"); !strings.Contains(r.stdout, "no history") {
		t.Fatalf("history of no state:\n%s", r.stdout)
	}
	w.expect(0, "apply", "-auto-approve")
	w.write("main.pond.hcl", "pool \"p\" {\n  nodes = 1\n  attributes = { Site = \"campus\" }\n}\n")
	w.expect(0, "apply", "-auto-approve")
	w.write("main.pond.hcl", "pool \"q\" {\n  nodes = 1\n  attributes = { Site = \"campus\" }\n}\n\nmoved {\n  from = pool.p\n  to   = pool.q\n}\n")
	w.expect(0, "apply", "-auto-approve")

	// A new pool named as the moved one fails before anything is written:
	// no record.
	w.write("main.pond.hcl", "pool \"q\" {\n  nodes = 1\n  attributes = { Site = \"campus\" }\n}\n")
	w.write("extra.pond.hcl", "pool \"p\" {\n  nodes = 1\n}\n")
	w.expect(1, "apply", "-auto-approve")
	if recs := w.history(); len(recs) != 3 {
		t.Fatalf("%d records after an apply that wrote nothing, want 3: %+v", len(recs), recs)
	}
	// With a pool that can be created beside it, the failed apply writes
	// the state: a record of what it did.
	w.write("extra.pond.hcl", "pool \"p\" {\n  nodes = 1\n}\n\npool \"ok\" {\n  nodes = 1\n}\n")
	w.expect(1, "apply", "-auto-approve")
	w.write("extra.pond.hcl", "")
	w.expect(0, "destroy", "-auto-approve")

	recs := w.history()
	want := []struct {
		command string
		actions []string
	}{
		{"destroy", []string{"pool.ok delete", "pool.q delete"}},
		{"apply", []string{"pool.ok create"}},
		{"apply", []string{"pool.q moved pool.p"}},
		{"apply", []string{"pool.p update (attributes,node_details)"}},
		{"apply", []string{"pool.p create"}},
	}
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d: %+v", len(recs), len(want), recs)
	}
	for i, r := range recs {
		got := r.actions()
		if r.Command != want[i].command || !slices.Equal(got, want[i].actions) {
			t.Errorf("record %d: %s %q, want %s %q", i, r.Command, got, want[i].command, want[i].actions)
		}
		if r.User != me.Username || r.Host == "" || r.PondVersion == "" || !strings.HasSuffix(r.Time, "Z") {
			t.Errorf("record %d: user %q host %q version %q time %q, want user %q, a host, a version, a UTC time", i, r.User, r.Host, r.PondVersion, r.Time, me.Username)
		}
		if i > 0 && r.Serial >= recs[i-1].Serial {
			t.Errorf("record %d has serial %d, not older than the record before's %d", i, r.Serial, recs[i-1].Serial)
		}
	}
	if s := recs[0].Summary; s.Remove != 2 || s.Add != 0 || s.Change != 0 {
		t.Errorf("destroy summary %+v", s)
	}
	var st struct {
		Serial uint64 `json:"serial"`
	}
	if err := json.Unmarshal([]byte(w.expect(0, "state", "pull").stdout), &st); err != nil || st.Serial != recs[0].Serial {
		t.Fatalf("state serial %d (%v), newest record's %d", st.Serial, err, recs[0].Serial)
	}

	// The table: newest first, with the summary; with an address, only
	// the records that touched it, with the attributes changed.
	r := w.expect(0, "-no-color", "history")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 6 || !strings.Contains(lines[0], "SERIAL") || !strings.Contains(lines[1], "destroy") || !strings.Contains(lines[1], "+0 ~0 -2") ||
		!strings.Contains(lines[1], me.Username+"@") || !strings.Contains(lines[5], "+1 ~0 -0") {
		t.Fatalf("history table:\n%s", r.stdout)
	}
	r = w.expect(0, "-chdir="+w.dir, "history", "-n", "2", "pool.p")
	lines = strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], "pool.q moved from pool.p") || !strings.Contains(lines[2], "pool.p update (attributes, node_details)") {
		t.Fatalf("history -n 2 pool.p:\n%s", r.stdout)
	}
	if recs := w.history("-since", "1h", "pool.ok"); len(recs) != 2 {
		t.Fatalf("history -since 1h pool.ok: %d records, want 2", len(recs))
	}

	// state commands record too; a push keeps the pushed history and
	// records the push.
	w.write("main.pond.hcl", "pool \"q\" {\n  nodes = 1\n}\n")
	w.expect(0, "apply", "-auto-approve")
	w.write("pushed.json", w.expect(0, "state", "pull").stdout)
	w.expect(0, "state", "mv", "pool.q", "pool.r")
	w.expect(0, "state", "rm", "pool.r")
	recs = w.history("-n", "3")
	if len(recs) != 3 || recs[0].Command != "state rm" || recs[1].Command != "state mv" ||
		!slices.Equal(recs[0].actions(), []string{"pool.r removed"}) || !slices.Equal(recs[1].actions(), []string{"pool.r moved pool.q"}) {
		t.Fatalf("records of state rm and mv: %+v", recs)
	}
	w.expect(0, "state", "push", "-force", "pushed.json")
	recs = w.history()
	if len(recs) != 7 || recs[0].Command != "state push" || !slices.Equal(recs[0].actions(), []string{"pool.q create"}) ||
		recs[1].Command != "apply" || !slices.Equal(recs[1].actions(), []string{"pool.q create"}) {
		t.Fatalf("history after pushing the state pulled before state mv and rm: %d records, %+v", len(recs), recs)
	}
	// POND_STATE_HISTORY_KEEP bounds the history; a value it does not take is
	// refused before anything changes.
	env := w.env
	w.env = append(env, "POND_STATE_HISTORY_KEEP=lots")
	if r := w.expect(1, "destroy", "-auto-approve"); !strings.Contains(r.stderr, "POND_STATE_HISTORY_KEEP") {
		t.Fatalf("destroy with POND_STATE_HISTORY_KEEP=lots:\n%s", r)
	}
	if recs := w.history(); len(recs) != 7 {
		t.Fatalf("%d records after a refused destroy, want 7", len(recs))
	}
	w.env = append(env, "POND_STATE_HISTORY_KEEP=2")
	w.expect(0, "destroy", "-auto-approve")
	w.env = env
	if recs := w.history(); len(recs) != 2 || recs[0].Command != "destroy" || recs[1].Command != "state push" {
		t.Fatalf("history kept with POND_STATE_HISTORY_KEEP=2: %+v", recs)
	}

	// Bad flags exit 1 and say why.
	for _, args := range [][]string{{"-n", "-1"}, {"-since", "soon"}, {"-bogus"}, {"pool."}, {"pool.a", "pool.b"}} {
		r := w.expect(1, append([]string{"history"}, args...)...)
		if strings.TrimSpace(r.stderr) == "" {
			t.Errorf("history %q failed without saying why", args)
		}
	}
}
