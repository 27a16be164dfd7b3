package tools_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/daemon/testpool"
)

// TestQViews checks each of condor q's views of a queue without a
// startd, where jobs stay as submitted: two clusters of one batch, a
// held cluster, a job of another owner.
func TestQViews(t *testing.T) {
	cm := testpool.Start(t, "cm", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR, SCHEDD"})
	dir := t.TempDir()
	as := func(user string) *pool {
		return &pool{t: t, dir: dir, env: []string{"POND_POOL_ADDR=" + cm.Addr, "POND_TOKEN=" + testpool.Token(t, user, auth.Write), "USER=" + user, "PWD=" + dir}}
	}
	alice, bob := as("alice"), as("bob")
	submit := func(p *pool, text string) {
		t.Helper()
		sub := filepath.Join(dir, "job.sub")
		if err := os.WriteFile(sub, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		p.must("submit", sub)
	}
	submit(alice, "executable = /bin/true\narguments = $(Process)\nbatch_name = big\nqueue 3\n")
	submit(alice, "executable = /bin/sleep\narguments = 60\nhold = true\nqueue 2\n")
	submit(alice, "executable = /bin/true\narguments = x\nbatch_name = big\nqueue 1\n")
	submit(bob, "executable = /bin/true\nqueue 1\n")

	totals := func(label string, all, idle, held int) *regexp.Regexp {
		return regexp.MustCompile(`(?m)^Total for ` + label + `: ` + itoa(all) + ` jobs; 0 completed, 0 removed, ` + itoa(idle) +
			` idle, 0 running, ` + itoa(held) + ` held, 0 suspended$`)
	}
	for _, tc := range []struct {
		name  string
		args  []string
		want  []*regexp.Regexp
		lines int // lines of jobs or batches (under the header)
	}{
		{"batches", nil, []*regexp.Regexp{
			regexp.MustCompile(`(?m)^OWNER +BATCH_NAME +SUBMITTED +DONE +RUN +IDLE +TOTAL +JOB_IDS$`),
			regexp.MustCompile(`(?m)^alice +big +\d\d/\d\d \d\d:\d\d +_ +_ +4 +4 1\.0-0$`),
			regexp.MustCompile(`(?m)^alice +ID: 2 +\d\d/\d\d \d\d:\d\d +_ +_ +_ +2 +2 2\.0-1$`),
			regexp.MustCompile(`(?m)^bob +ID: 4 +\d\d/\d\d \d\d:\d\d +_ +_ +1 +1 4\.0$`),
			totals("query", 7, 5, 2), totals("alice", 6, 4, 2), totals("bob", 1, 1, 0), totals("all users", 7, 5, 2),
		}, 3},
		{"batches of an owner", []string{"bob"}, []*regexp.Regexp{totals("query", 1, 1, 0), totals("bob", 1, 1, 0)}, 1},
		{"batches by a constraint", []string{"-constraint", "ProcId == 1"}, []*regexp.Regexp{
			regexp.MustCompile(`(?m)^alice +big +\d\d/\d\d \d\d:\d\d +_ +_ +1 +1 1\.1$`),
			regexp.MustCompile(`(?m)^alice +ID: 2 +\d\d/\d\d \d\d:\d\d +_ +_ +_ +1 +1 2\.1$`),
			totals("query", 2, 1, 1)}, 2},
		{"one line a job", []string{"-nobatch"}, []*regexp.Regexp{
			regexp.MustCompile(`(?m)^ ID +OWNER +SUBMITTED +RUN_TIME +ST +PRI +SIZE +CMD$`),
			regexp.MustCompile(`(?m)^ +1\.2 +alice +\d\d/\d\d \d\d:\d\d +0\+00:00:00 I +0 +0\.0 +true 2$`),
			regexp.MustCompile(`(?m)^ +2\.0 +alice +\d\d/\d\d \d\d:\d\d +0\+00:00:00 H +0 +0\.0 +sleep 60$`),
			regexp.MustCompile(`(?m)^ +4\.0 +bob +\d\d/\d\d \d\d:\d\d +0\+00:00:00 I +0 +0\.0 +true$`),
			totals("query", 7, 5, 2), totals("bob", 1, 1, 0)}, 7},
		{"held", []string{"-hold"}, []*regexp.Regexp{
			regexp.MustCompile(`(?m)^ ID +OWNER +HELD_SINCE +HOLD_REASON$`),
			regexp.MustCompile(`(?m)^ +2\.1 +alice +\d\d/\d\d \d\d:\d\d .+$`),
			totals("query", 7, 5, 2)}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := alice.must("q", tc.args...)
			for _, re := range tc.want {
				if !re.MatchString(out) {
					t.Errorf("no line matching %s in\n%s", re, out)
				}
			}
			// The lines between the column header and the totals.
			_, body, _ := strings.Cut(out, "-- Schedd:")
			_, body, _ = strings.Cut(body, "\n") // the schedd's line
			_, body, _ = strings.Cut(body, "\n") // the column header
			body, _, _ = strings.Cut(body, "\nTotal for query")
			if n := strings.Count(strings.TrimSpace(body), "\n") + 1; n != tc.lines {
				t.Errorf("%d lines, want %d:\n%s", n, tc.lines, body)
			}
		})
	}

	// -json: one array of the full ads, also when it is empty.
	var ads []map[string]any
	if out := alice.must("q", "-json"); json.Unmarshal([]byte(out), &ads) != nil || len(ads) != 7 || ads[6]["Owner"] != "bob" || ads[0]["Cmd"] == nil {
		t.Errorf("q -json = %s", out)
	}
	if out := alice.must("q", "-json", "99"); out != "[\n\n]\n\n" {
		t.Errorf("q -json of nothing = %q", out)
	}
	if out := alice.must("q", "1.1", "-json", "-af", "ProcId"); strings.Join(strings.Fields(out), "") != `[{"ProcId":1}]` {
		t.Errorf("q 1.1 -json -af ProcId = %q", out)
	}
	if out := alice.must("q", "-l", "4"); !strings.Contains(out, "Owner = \"bob\"\n") || !strings.HasSuffix(out, "\n\n") {
		t.Errorf("q -l 4 = %q", out)
	}
	if out := alice.must("q", "-af", "ClusterId", "ProcId * 2", "-constraint", "JobStatus == 5"); out != "2 0\n2 2\n" {
		t.Errorf("q -af = %q", out)
	}
	if _, errs, code := alice.run("q", "-af", "ProcId +"); code != 1 || !strings.Contains(errs, "-af ProcId +") {
		t.Errorf("q -af of a bad expression: exit %d, %q", code, errs)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
