package history

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDiffKnobs(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, new map[string]string
		want     string
	}{
		{"none", map[string]string{"A": "1"}, map[string]string{"A": "1"}, ""},
		{"changed", map[string]string{"A": "1"}, map[string]string{"A": "2"}, "A:1>2"},
		{"added", map[string]string{}, map[string]string{"B": "x"}, "B:>x"},
		{"removed", map[string]string{"B": "x"}, map[string]string{}, "B:x>"},
		{"case of the name only", map[string]string{"start": "true"}, map[string]string{"START": "true"}, ""},
		{"several, sorted", map[string]string{"b": "1", "C": "3"}, map[string]string{"a": "0", "B": "2"}, "a:>0 B:1>2 C:3>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, c := range DiffKnobs(tc.old, tc.new) {
				got = append(got, fmt.Sprintf("%s:%s>%s", c.Knob, c.Old, c.New))
			}
			if g := strings.Join(got, " "); g != tc.want {
				t.Fatalf("got %q, want %q", g, tc.want)
			}
		})
	}
}

func TestObserveNodeConfig(t *testing.T) {
	ctx := context.Background()
	t0 := time.Unix(1_700_000_000, 0)
	s, clk, reopen := openClocked(t, t0, Options{})
	observe := func(node, text, who string) error {
		return s.ObserveNodeConfig(node, ConfigHash(text), text, who)
	}
	steps := []struct {
		node, text, who string
		err             bool
		want            string // the changes recorded so far
	}{
		{"a", `{"START":"true","MAX_JOBS_RUNNING":"10"}`, "node/a", false, ""}, // the baseline
		{"a", `{"START":"true","MAX_JOBS_RUNNING":"10"}`, "node/a", false, ""}, // the same again
		{"b", `{"START":"false"}`, "node/b", false, ""},
		{"a", `{"START":"true","MAX_JOBS_RUNNING":"20","NEW":"x"}`, "alice", false, "a MAX_JOBS_RUNNING 10>20 alice|a NEW >x alice"},
		{"a", `{"START":"true","MAX_JOBS_RUNNING":"20","NEW":"x"}`, "node/a", false, "a MAX_JOBS_RUNNING 10>20 alice|a NEW >x alice"},
		{"b", `{}`, "node/b", false, "a MAX_JOBS_RUNNING 10>20 alice|a NEW >x alice|b START false> node/b"},
		{"b", `[1, 2]`, "node/b", true, "a MAX_JOBS_RUNNING 10>20 alice|a NEW >x alice|b START false> node/b"},
		{"b", `null`, "node/b", true, "a MAX_JOBS_RUNNING 10>20 alice|a NEW >x alice|b START false> node/b"},
		{"b", `{"A":` + strings.Repeat(" ", MaxConfigText) + `"1"}`, "node/b", true, "a MAX_JOBS_RUNNING 10>20 alice|a NEW >x alice|b START false> node/b"},
	}
	for i, st := range steps {
		clk.add(time.Second)
		err := observe(st.node, st.text, st.who)
		if (err != nil) != st.err {
			t.Fatalf("step %d: error %v, want one: %v", i, err, st.err)
		}
		// Reopened each step: the last configuration of each node is
		// read back, so a restart records no change that is none.
		s = reopen(s)
		rep, err := s.Query(ctx, Query{ConfigOnly: true, Since: t0})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range rep.Config {
			got = append(got, fmt.Sprintf("%s %s %s>%s %s", c.Node, c.Knob, c.Old, c.New, c.Who))
		}
		if g := strings.Join(got, "|"); g != st.want {
			t.Fatalf("step %d: changes %q, want %q", i, g, st.want)
		}
	}
	// A hash that is not the text's is refused.
	if err := s.ObserveNodeConfig("a", ConfigHash("{}"), `{"X":"1"}`, "x"); err == nil {
		t.Fatal("a text not of its hash was taken")
	}
	s.Close()
}

func FuzzObserveNodeConfig(f *testing.F) {
	f.Add(`{"A":"1"}`, `{"A":"2","B":""}`)
	f.Add(`{}`, `null`)
	f.Add(`[]`, `{"a":1}`)
	s, err := Open(context.Background(), filepath.Join(f.TempDir(), "history.db"), Options{Flush: time.Millisecond})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, text := range []string{a, b} {
			err := s.ObserveNodeConfig("n", ConfigHash(text), text, "fuzz")
			if _, perr := parseKnobs(text); (perr == nil) != (err == nil) && len(text) <= MaxConfigText {
				t.Fatalf("ObserveNodeConfig(%q): %v, parse %v", text, err, perr)
			}
		}
	})
}
