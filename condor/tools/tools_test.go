package tools_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/daemon/testpool"
	"github.com/pond-htc/pond/condor/testenv"
	"github.com/pond-htc/pond/condor/tools"
)

type pool struct {
	t     *testing.T
	env   []string
	dir   string
	stdin string
}

func startPool(t *testing.T) *pool {
	cm := testpool.Start(t, "cm", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR, NEGOTIATOR, SCHEDD"})
	testpool.Start(t, "exec1", "", "", map[string]string{"HasMatlab": "true"}, testpool.Knobs{"DAEMON_LIST": "MASTER, STARTD", "CONDOR_HOST": cm.Addr})
	dir := t.TempDir()
	alice := testpool.Token(t, "alice", auth.Write)
	return &pool{t: t, dir: dir, env: []string{"POND_POOL_ADDR=" + cm.Addr, "POND_TOKEN=" + alice, "USER=alice", "PWD=" + dir}}
}

func (p *pool) run(tool string, args ...string) (string, string, int) {
	var out, errb bytes.Buffer
	code := tools.Tools()[tool](context.Background(), args, strings.NewReader(p.stdin), &out, &errb, p.env)
	return out.String(), errb.String(), code
}

func (p *pool) must(tool string, args ...string) string {
	p.t.Helper()
	out, errs, code := p.run(tool, args...)
	if code != 0 {
		p.t.Fatalf("%s %v: exit %d: %s%s", tool, args, code, out, errs)
	}
	return out
}

func TestToolsEndToEnd(t *testing.T) {
	p := startPool(t)
	sub := filepath.Join(p.dir, "job.sub")
	if err := os.WriteFile(sub, []byte("executable = /bin/echo\narguments = hi $(Process)\noutput = out.$(Process)\nlog = job.log\nrequirements = HasMatlab\nqueue 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := p.must("submit", sub)
	if want := "Submitting job(s)...\n3 job(s) submitted to cluster 1.\n"; out != want {
		t.Fatalf("submit printed %q, want %q", out, want)
	}
	testpool.Eventually(t, 30*time.Second, "jobs to finish", func() bool {
		return strings.Contains(p.must("q"), "Total for query: 0 jobs")
	})
	for i, want := range []string{"hi 0\n", "hi 1\n", "hi 2\n"} {
		b, _ := os.ReadFile(filepath.Join(p.dir, "out."+string(rune('0'+i))))
		if string(b) != want {
			t.Errorf("out.%d = %q, want %q", i, b, want)
		}
	}
	hist := p.must("history", "-af", "ClusterId", "ProcId", "ExitCode", "Owner")
	lines := strings.Split(strings.TrimSpace(hist), "\n")
	sort.Strings(lines)
	if len(lines) != 3 || lines[0] != "1 0 0 alice" || lines[2] != "1 2 0 alice" {
		t.Errorf("history -af = %q", hist)
	}
	testpool.Eventually(t, 30*time.Second, "claims to be released", func() bool { return p.must("status", "-af", "Name") == "slot1@exec1\n" })
	st := p.must("status")
	if !regexp.MustCompile(`(?m)^slot1@exec1\s+LINUX\s+X86_64\s+Unclaimed\s+Idle`).MatchString(st) ||
		!regexp.MustCompile(`(?m)^\s+X86_64/LINUX\s+1\s+0\s+0\s+1`).MatchString(st) {
		t.Errorf("status =\n%s", st)
	}
	js := p.must("status", "-json", "-constraint", "HasMatlab")
	var ads []map[string]any
	if err := json.Unmarshal([]byte(js), &ads); err != nil || len(ads) != 1 || ads[0]["Cpus"] != float64(4) {
		t.Errorf("status -json = %s (%v)", js, err)
	}

	// rm / hold / release on long jobs.
	if err := os.WriteFile(sub, []byte("executable = /bin/sleep\narguments = 600\nlog = job.log\nhold = true\nqueue 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.must("submit", sub)
	if out := p.must("q", "-af", "JobStatus"); out != "5\n5\n" {
		t.Fatalf("held submit: q -af JobStatus = %q", out)
	}
	if out := p.must("release", "2"); out != "All jobs in cluster 2 have been released\n" {
		t.Errorf("release printed %q", out)
	}
	testpool.Eventually(t, 30*time.Second, "jobs to run", func() bool { return p.must("q", "-af", "JobStatus") == "2\n2\n" })
	if out := p.must("hold", "-reason", "testing", "2.0"); out != "Job 2.0 held\n" {
		t.Errorf("hold printed %q", out)
	}
	if out := p.must("q", "2.0", "-af", "JobStatus", "HoldReason"); out != "5 testing (by user alice)\n" {
		t.Errorf("held job: %q", out)
	}
	if out := p.must("rm", "2"); out != "All jobs in cluster 2 have been marked for removal\n" {
		t.Errorf("rm printed %q", out)
	}
	removed := time.Now()
	for free := regexp.MustCompile(`(?m)^\s+Total\s+1\s+0\s+0\s+1`); ; time.Sleep(20 * time.Millisecond) {
		st := p.must("status")
		if free.MatchString(st) {
			break
		}
		if time.Since(removed) > time.Minute {
			t.Fatalf("the slot not free a minute after the rm:\n%s\n%s", st, p.must("q", "-af", "ClusterId", "ProcId", "JobStatus"))
		}
	}
	t.Logf("the slot free %s after the rm", time.Since(removed).Round(time.Millisecond))
	if _, errs, code := p.run("rm", "99"); code == 0 || !strings.Contains(errs, "Couldn't find/remove all jobs in cluster 99") {
		t.Errorf("rm of a missing cluster: %d %q", code, errs)
	}
	if _, errs, code := p.run("rm", "99.0"); code == 0 || strings.TrimSpace(errs) != "Job 99.0 not found" {
		t.Errorf("rm of a missing job: %d %q", code, errs)
	}
	if _, errs, code := p.run("q", "-constraint", "Owner =="); code == 0 || !strings.Contains(errs, "constraint") {
		t.Errorf("bad constraint: %d %q", code, errs)
	}
	log, _ := os.ReadFile(filepath.Join(p.dir, "job.log"))
	for _, ev := range []string{"Job was held.", "Job was released.", "Job was aborted."} {
		if !strings.Contains(string(log), ev) {
			t.Errorf("job log lacks %q:\n%s", ev, log)
		}
	}

	// A mistake found while expanding the file for its cluster is reported
	// at its place, and nothing is queued.
	if err := os.WriteFile(sub, []byte("executable = /bin/true\nuniverse = grid\nqueue 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := p.run("submit", sub); code == 0 || out != "" || !regexp.MustCompile(`job\.sub:2:\d+: universe "grid" is not supported`).MatchString(errs) {
		t.Errorf("submit of a bad universe: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if out := p.must("q", "-af", "ClusterId"); out != "" {
		t.Errorf("a failed submit queued jobs: %q", out)
	}
}

func TestSubmitErrors(t *testing.T) {
	p := &pool{t: t, dir: t.TempDir(), env: []string{"POND_POOL_ADDR=127.0.0.1:1", "USER=alice"}}
	sub := filepath.Join(p.dir, "bad.sub")
	os.WriteFile(sub, []byte("executable = /bin/echo\nqueue 2 in (a b\n"), 0o644)
	_, errs, code := p.run("submit", sub)
	if code == 0 || !regexp.MustCompile(`bad\.sub:\d+:\d+`).MatchString(errs) {
		t.Errorf("bad submit file: exit %d, %q", code, errs)
	}
	_, errs, code = (&pool{t: t, env: nil}).run("q")
	if code == 0 || !strings.Contains(errs, "POND_POOL_ADDR") {
		t.Errorf("no pool: exit %d, %q", code, errs)
	}
}

func TestEveryToolHasUsage(t *testing.T) {
	for name := range tools.Tools() {
		if u := tools.Usage(name); !strings.HasPrefix(u, "Usage: pondctl condor "+name+" ") {
			t.Errorf("tool %s has usage %q", name, u)
		}
	}
	if tools.Usage("nonesuch") != "" {
		t.Error("a tool that does not exist has a usage")
	}
}

// TestTokenSources checks where the tools find their token: POND_TOKEN,
// the file POND_TOKEN_FILE names, or the authority of the working
// directory (found from a subdirectory too), which makes one for the user
// running the tool; a client with another authority's token or none is
// refused.
func TestTokenSources(t *testing.T) {
	cm := testpool.Start(t, "cm", "", "", nil, testpool.Knobs{"DAEMON_LIST": "MASTER, COLLECTOR, NEGOTIATOR, SCHEDD"})
	ours, theirs, none := t.TempDir(), t.TempDir(), t.TempDir()
	testpool.WriteAuthority(t, ours)
	a, err := auth.OpenAuthority(filepath.Join(theirs, filepath.FromSlash(auth.AuthorityDir)))
	if err != nil {
		t.Fatal(err)
	}
	theirToken, err := a.Mint("alice", []auth.Scope{auth.Administrator}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ourToken := testpool.Token(t, "alice", auth.Read)
	ourFile := filepath.Join(none, "token")
	if err := os.WriteFile(ourFile, []byte(ourToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(ours, "jobs")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		env  []string
		ok   bool
	}{
		{"token in the environment", []string{"POND_TOKEN=" + ourToken, "PWD=" + none}, true},
		{"token file", []string{"POND_TOKEN_FILE=" + ourFile, "PWD=" + none}, true},
		{"working directory", []string{"PWD=" + ours}, true},
		{"subdirectory of the working directory", []string{"PWD=" + sub}, true},
		{"environment over working directory", []string{"POND_TOKEN=" + theirToken, "PWD=" + ours}, false},
		{"another working directory", []string{"PWD=" + theirs}, false},
		{"no token", []string{"PWD=" + none}, false},
		{"missing token file", []string{"POND_TOKEN_FILE=" + filepath.Join(none, "nope"), "PWD=" + ours}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := &pool{t: t, env: append([]string{"POND_POOL_ADDR=" + cm.Addr, "USER=alice"}, tt.env...)}
			out, errs, code := p.run("q", "-af", "ClusterId")
			if tt.ok && code != 0 {
				t.Fatalf("q: exit %d: %s%s", code, out, errs)
			}
			if !tt.ok && (code == 0 || !strings.Contains(errs, "ERROR")) {
				t.Fatalf("q: exit %d, stderr %q; want a refusal", code, errs)
			}
		})
	}
}

// TestSubmitOwnerFromToken checks that condor_submit's jobs belong to the
// token's subject, whatever USER says, and that the working directory's
// own token is the user's running the tool.
func TestSubmitOwnerFromToken(t *testing.T) {
	p := startPool(t)
	if err := os.WriteFile(filepath.Join(p.dir, "job.sub"), []byte("executable = /bin/true\nrequirements = false\nqueue\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.env = append(p.env, "USER=root")
	p.must("submit", "job.sub")
	if out := p.must("q", "-af", "Owner", "User"); !strings.HasPrefix(out, "alice alice@") {
		t.Errorf("job of alice's token submitted with USER=root: Owner and User %q, want alice", out)
	}
	// The working directory's token is the OS user's.
	testpool.WriteAuthority(t, p.dir)
	p.env = append(p.env, "POND_TOKEN=")
	p.must("submit", "job.sub")
	u, err := user.Current()
	if err != nil {
		testenv.SkipOrFailf(t, "the current user: %v", err)
	}
	if out := p.must("q", "-af", "Owner"); !strings.Contains(out, u.Username+"\n") {
		t.Errorf("owners %q, want a job of %s", out, u.Username)
	}
}
