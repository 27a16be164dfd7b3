package slurm

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pond-htc/pond/overlay/glidein"
)

func line(fields ...string) string { return strings.Join(fields, sep) }

func at(s string) time.Time {
	t, err := time.ParseInLocation("2006-01-02T15:04:05", s, time.Local)
	if err != nil {
		panic(err)
	}
	return t
}

func TestParseSqueue(t *testing.T) {
	const t1, t2, t3 = "2026-11-25T06:28:48", "2026-11-25T06:28:49", "2026-11-25T06:28:50"
	tests := []struct {
		name   string
		out    string
		prefix string
		want   []glidein.Glidein
	}{
		{"empty", "", "pond-", nil},
		{"pending for resources", line("3", "pond-a", "PENDING", "Resources", "", t1, "N/A", "N/A", "pond-a") + "\n", "pond-",
			[]glidein.Glidein{{ID: "pond-a", SiteID: "3", State: glidein.Queued, Reason: "Resources", Submitted: at(t1)}}},
		{"pending, not yet looked at", line("3", "pond-a", "PENDING", "None", "", t1, "N/A", "N/A", "pond-a"), "pond-",
			[]glidein.Glidein{{ID: "pond-a", SiteID: "3", State: glidein.Queued, Submitted: at(t1)}}},
		{"running", line("4", "pond-b", "RUNNING", "None", "n1", t1, t2, t3, "pond-b"), "pond-",
			[]glidein.Glidein{{ID: "pond-b", SiteID: "4", Host: "n1", State: glidein.Running, Submitted: at(t1), Started: at(t2)}}},
		{"completing", line("4", "pond-b", "COMPLETING", "None", "n1", t1, t2, t3, "pond-b"), "pond-",
			[]glidein.Glidein{{ID: "pond-b", SiteID: "4", Host: "n1", State: glidein.Finishing, Reason: "COMPLETING: ended, its final state not known yet", Submitted: at(t1), Started: at(t2), Ended: at(t3)}}},
		{"completed", line("5", "pond-c", "COMPLETED", "None", "n2", t1, t2, t3, "pond-c"), "pond-",
			[]glidein.Glidein{{ID: "pond-c", SiteID: "5", Host: "n2", State: glidein.Done, Submitted: at(t1), Started: at(t2), Ended: at(t3)}}},
		{"failed", line("9", "pond-x1", "FAILED", "NonZeroExitCode", "n1", t1, t2, t3, "pond-x1"), "pond-",
			[]glidein.Glidein{{ID: "pond-x1", SiteID: "9", Host: "n1", State: glidein.Failed, Reason: "FAILED non-zero exit code", Submitted: at(t1), Started: at(t2), Ended: at(t3)}}},
		{"timeout", line("9", "pond-t", "TIMEOUT", "TimeLimit", "n1", t1, t2, t3, "pond-t"), "pond-",
			[]glidein.Glidein{{ID: "pond-t", SiteID: "9", Host: "n1", State: glidein.Failed, Reason: "TIMEOUT (TimeLimit)", Submitted: at(t1), Started: at(t2), Ended: at(t3)}}},
		{"node failure", line("9", "pond-n", "NODE_FAIL", "None", "n1", t1, t2, t3, ""), "pond-",
			[]glidein.Glidein{{ID: "pond-n", SiteID: "9", Host: "n1", State: glidein.Failed, Reason: "NODE_FAIL", Submitted: at(t1), Started: at(t2), Ended: at(t3)}}},
		{"out of memory", line("9", "pond-m", "OUT_OF_MEMORY", "None", "n1", t1, t2, t3, ""), "pond-",
			[]glidein.Glidein{{ID: "pond-m", SiteID: "9", Host: "n1", State: glidein.Failed, Reason: "OUT_OF_MEMORY", Submitted: at(t1), Started: at(t2), Ended: at(t3)}}},
		{"cancelled while queued", line("10", "pond-q", "CANCELLED", "None", "", t1, "N/A", t3, "pond-q"), "pond-",
			[]glidein.Glidein{{ID: "pond-q", SiteID: "10", State: glidein.Cancelled, Reason: "CANCELLED", Submitted: at(t1), Ended: at(t3)}}},
		{"renamed: the comment says", line("11", "renamed", "RUNNING", "None", "n1", t1, t2, t3, "pond-r"), "pond-",
			[]glidein.Glidein{{ID: "pond-r", SiteID: "11", Host: "n1", State: glidein.Running, Submitted: at(t1), Started: at(t2)}}},
		{"unknown state", line("12", "pond-u", "WEIRD", "Something", "", t1, "N/A", "N/A", ""), "pond-",
			[]glidein.Glidein{{ID: "pond-u", SiteID: "12", State: glidein.Queued, Reason: "Slurm state WEIRD Something", Submitted: at(t1)}}},
		{"other prefix", line("3", "pond-a", "PENDING", "None", "", t1, "N/A", "N/A", "pond-a"), "pond-b", nil},
		{"not pond's", line("3", "myjob", "RUNNING", "None", "n1", t1, t2, t3, "(null)") + "\n" + line("4", "x", "RUNNING", "None", "n1", t1, t2, t3, "pond-../x"), "", nil},
		{"malformed lines are skipped", "garbage\n" + line("x", "pond-a", "RUNNING", "", "", "", "", "", "") + "\n" + line("3", "pond-a") + "\n" +
			line("5", "pond-c", "COMPLETED", "None", "n2", "junk", "", "Unknown", "pond-c"), "pond-",
			[]glidein.Glidein{{ID: "pond-c", SiteID: "5", Host: "n2", State: glidein.Done}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []glidein.Glidein
			for _, j := range parseSqueue(tt.out) {
				if g, ok := glideinOf(j, tt.prefix); ok {
					got = append(got, g)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestParseSacct(t *testing.T) {
	const t1, t2, t3 = "2026-11-25T06:28:48", "2026-11-25T06:28:49", "2026-11-25T06:28:50"
	tests := []struct {
		name string
		out  string
		want []glidein.Glidein
	}{
		{"completed, from the completion log", line("2", "pond-a", "COMPLETED", "", "n2", t1, t2, t3, "0:0", ""),
			[]glidein.Glidein{{ID: "pond-a", SiteID: "2", Host: "n2", State: glidein.Done, Submitted: at(t1), Started: at(t2), Ended: at(t3)}}},
		{"failed with an exit code", line("9", "pond-b", "FAILED", "None", "n1", t1, t2, t3, "1:0", "pond-b"),
			[]glidein.Glidein{{ID: "pond-b", SiteID: "9", Host: "n1", State: glidein.Failed, Reason: "FAILED exit code 1", Submitted: at(t1), Started: at(t2), Ended: at(t3)}}},
		{"failed its validation", line("9", "pond-b", "FAILED", "NonZeroExitCode", "n1", t1, t2, t3, "3:0", "pond-b"),
			[]glidein.Glidein{{ID: "pond-b", SiteID: "9", Host: "n1", State: glidein.Failed, Reason: "FAILED exit code 3: validation failed", Submitted: at(t1), Started: at(t2), Ended: at(t3)}}},
		{"killed by a signal", line("9", "pond-b", "FAILED", "", "n1", t1, t2, t3, "0:9", ""),
			[]glidein.Glidein{{ID: "pond-b", SiteID: "9", Host: "n1", State: glidein.Failed, Reason: "FAILED signal 9", Submitted: at(t1), Started: at(t2), Ended: at(t3)}}},
		{"cancelled by someone", line("10", "pond-c", "CANCELLED by 1000", "", "n1", t1, t2, t3, "0:0", ""),
			[]glidein.Glidein{{ID: "pond-c", SiteID: "10", Host: "n1", State: glidein.Cancelled, Reason: "CANCELLED by uid 1000", Submitted: at(t1), Started: at(t2), Ended: at(t3)}}},
		{"cancelled before it started", line("11", "pond-d", "CANCELLED by 0", "", "None assigned", t1, "Unknown", t3, "0:0", ""),
			[]glidein.Glidein{{ID: "pond-d", SiteID: "11", State: glidein.Cancelled, Reason: "CANCELLED by uid 0", Submitted: at(t1), Ended: at(t3)}}},
		{"timeout", line("12", "pond-e", "TIMEOUT", "", "n1", t1, t2, t3, "0:0", ""),
			[]glidein.Glidein{{ID: "pond-e", SiteID: "12", Host: "n1", State: glidein.Failed, Reason: "TIMEOUT", Submitted: at(t1), Started: at(t2), Ended: at(t3)}}},
		{"requeued, pending", line("13", "pond-f", "PENDING", "BeginTime", "None assigned", t1, "Unknown", "Unknown", "0:0", ""),
			[]glidein.Glidein{{ID: "pond-f", SiteID: "13", State: glidein.Queued, Reason: "BeginTime", Submitted: at(t1)}}},
		{"job steps and wrong field counts are skipped", line("13.batch", "batch", "COMPLETED", "", "n1", t1, t2, t3, "0:0", "") + "\n" + line("14", "pond-g", "COMPLETED"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []glidein.Glidein
			for _, j := range parseSacct(tt.out) {
				if g, ok := glideinOf(j, glidein.IDPrefix); ok {
					got = append(got, g)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// TestParseSacctExits reads what sacct -j says of how jobs ended, and
// the reason a glidein that failed its validation then has: squeue's
// FAILED with the exit code sacct gives, named for what it means, with
// the message of the glidein's status file when there is one.
func TestParseSacctExits(t *testing.T) {
	out := strings.Join([]string{
		line("9", "FAILED", "3:0", "NonZeroExitCode"),
		line("9.batch", "FAILED", "3:0", ""),
		line("10", "CANCELLED by 1000", "0:15", "None"),
		line("11", "COMPLETED", "0:0", "None") + "\r",
		line("12", "FAILED", "garbage", "None"),
		line("13", "FAILED", "3:0"),
		"",
		"junk",
	}, "\n")
	want := map[string]job{
		"9":  {id: "9", state: "FAILED", exit: "3:0", reason: "NonZeroExitCode"},
		"10": {id: "10", state: "CANCELLED", by: "1000", exit: "0:15", reason: "None"},
		"11": {id: "11", state: "COMPLETED", exit: "0:0", reason: "None"},
	}
	got := parseSacctExits(out)
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(job{})); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	const t1 = "2026-11-25T06:28:48"
	for _, tt := range []struct {
		name, exit, detail, want string
	}{
		{"squeue alone", "", "", "FAILED non-zero exit code"},
		{"exit code from sacct", "3:0", "", "FAILED exit code 3: validation failed"},
		{"and the status file", "3:0", "validation failed: check cvmfs: exit status 1", "FAILED exit code 3: validation failed: check cvmfs: exit status 1"},
		{"another exit code", "1:0", "", "FAILED exit code 1"},
	} {
		j := parseSqueue(line("9", "pond-v", "FAILED", "NonZeroExitCode", "n1", t1, t1, t1, "pond-v"))[0]
		j.exit, j.detail = tt.exit, tt.detail
		if g, _ := glideinOf(j, glidein.IDPrefix); g.Reason != tt.want {
			t.Errorf("%s: reason %q, want %q", tt.name, g.Reason, tt.want)
		}
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"UNLIMITED", 0, false},
		{"INFINITE", 0, false},
		{"", 0, false},
		{"30", 30 * time.Minute, true},
		{"30:15", 30*time.Minute + 15*time.Second, true},
		{"00:10:00", 10 * time.Minute, true},
		{"2-00:00:00", 48 * time.Hour, true},
		{"1-12", 36 * time.Hour, true},
		{"1-12:30", 36*time.Hour + 30*time.Minute, true},
		{"1:2:3:4", 0, false},
		{"-5", 0, false},
		{"x-1", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseDuration(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseDuration(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"no work_dir", Config{}, "work_dir is required"},
		{"relative work_dir", Config{WorkDir: "work"}, `work_dir "work" must be an absolute path`},
		{"percent in work_dir", Config{WorkDir: "/w/%j"}, "may not hold %"},
		{"bad partition", Config{WorkDir: "/w", Partition: "debug,bad name"}, `partition "debug,bad name": "bad name" is not a partition name`},
		{"bad account", Config{WorkDir: "/w", Account: "a;b"}, `account "a;b"`},
		{"bad qos", Config{WorkDir: "/w", QOS: "$(x)"}, `qos "$(x)"`},
		{"bad constraint", Config{WorkDir: "/w", Constraint: "a b"}, `constraint "a b"`},
		{"negative time limit", Config{WorkDir: "/w", TimeLimit: -time.Second}, "time_limit -1s is negative"},
		{"negative cpus", Config{WorkDir: "/w", CPUs: -1}, "cpus -1 is negative"},
		{"negative memory", Config{WorkDir: "/w", MemoryMB: -1}, "memory_mb -1 is negative"},
		{"extra not an option", Config{WorkDir: "/w", Extra: []string{"gres=gpu:1"}}, `extra[0] "gres=gpu:1": not an sbatch option`},
		{"extra two lines", Config{WorkDir: "/w", Extra: []string{"--a\n--b"}}, "an option is one line"},
		{"extra sets the job name", Config{WorkDir: "/w", Extra: []string{"--nice", "#SBATCH --job-name=x"}}, "extra[1] \"#SBATCH --job-name=x\": --job-name is set by pond itself"},
		{"extra sets -J", Config{WorkDir: "/w", Extra: []string{"-Jx"}}, "-Jx is set by pond itself"},
		{"extra makes an array", Config{WorkDir: "/w", Extra: []string{"--array=1-10"}}, "--array is set by pond itself"},
		{"bad env", Config{WorkDir: "/w", Env: []string{"NOVALUE"}}, `env "NOVALUE" is not NAME=VALUE`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New: %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
	s, err := New(Config{WorkDir: "/w/", Extra: []string{"--gres=gpu:1", "#SBATCH  --nice=5"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Config(); got.WorkDir != "/w" || got.Commands.Sbatch != "sbatch" || got.History != 7*24*time.Hour ||
		!cmp.Equal(got.Extra, []string{"#SBATCH --gres=gpu:1", "#SBATCH --nice=5"}) {
		t.Errorf("defaults: %+v", got)
	}
}

// TestScriptQuoting runs the batch script (with /bin/sh, without Slurm)
// and finds the arguments and environment exactly as given.
func TestScriptQuoting(t *testing.T) {
	dir := t.TempDir()
	s, err := New(Config{WorkDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	tricky := []string{"it's", `"quoted"`, "$HOME", "`id`", "a b", "line\nbreak", "", "{dir}/x", `back\slash`}
	req := glidein.Request{ID: "pond-q", Args: append([]string{"-c", `printf '%s\0' "$@"; printf 'ENV=%s\0' "$POND_X"`, "sh"}, tricky...),
		Env: map[string]string{"POND_X": "it's $HOME `id`"}, Lifetime: 90 * time.Second}
	script := filepath.Join(dir, "script")
	if err := os.WriteFile(script, []byte(s.script(req, dir, "/bin/sh")), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("/bin/sh", script).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	want := append([]string{}, tricky...)
	want[7] = dir + "/x"
	want = append(want, "ENV=it's $HOME `id`")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if !strings.Contains(s.script(req, dir, "/bin/sh"), "+ 120 ))") {
		t.Errorf("POND_GLIDEIN_END is not the 2-minute limit from now:\n%s", s.script(req, dir, "/bin/sh"))
	}
}

// FuzzParse feeds squeue's and sacct's parsers anything: they never panic,
// and what they report as a glidein has a valid ID and a known state, and
// as a job's exit a job id and EXITCODE:SIGNAL.
func FuzzParse(f *testing.F) {
	f.Add(line("9", "FAILED", "3:0", "NonZeroExitCode") + "\n" + line("9.batch", "FAILED", "3:0", ""))
	f.Add(line("3", "pond-a", "PENDING", "Resources", "", "2026-11-25T06:28:48", "N/A", "N/A", "pond-a"))
	f.Add(line("10", "pond-c", "CANCELLED by 1000", "", "n1", "2026-11-25T06:28:48", "Unknown", "2026-11-25T06:28:50", "0:9", ""))
	f.Add("garbage\n\x1f\x1f")
	f.Add("1-2:3:4")
	f.Fuzz(func(t *testing.T, out string) {
		exits := parseSacctExits(out)
		for id, j := range exits {
			if id != j.id || !isJobID(id) || !isExitCode(j.exit) {
				t.Fatalf("exit %+v under %q from %q", j, id, out)
			}
		}
		for _, jobs := range [][]job{parseSqueue(out), parseSacct(out)} {
			for _, j := range jobs {
				g, ok := glideinOf(j, glidein.IDPrefix)
				if !ok {
					continue
				}
				if !strings.HasPrefix(g.ID, glidein.IDPrefix) || g.SiteID == "" {
					t.Fatalf("glidein %+v from %q", g, out)
				}
				switch g.State {
				case glidein.Queued, glidein.Running, glidein.Done, glidein.Failed, glidein.Cancelled, glidein.Finishing:
				default:
					t.Fatalf("state %q from %q", g.State, out)
				}
			}
		}
		if d, ok := parseDuration(out); ok && d < 0 {
			t.Fatalf("parseDuration(%q) = %v", out, d)
		}
		_ = parseKeyValues(out)
	})
}
