package submit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
)

func testOpts(dir string) Options {
	return Options{
		ClusterID: 42, Owner: "alice", UIDDomain: "example.org", FileSystemDomain: "example.org",
		QDate: time.Unix(1700000000, 0), SubmitDir: dir, Env: []string{"HOME=/home/alice", "PATH=/bin", "LANG=C"},
		LookupEnv: func(k string) (string, bool) {
			if k == "HOME" {
				return "/home/alice", true
			}
			return "", false
		},
		Arch: "X86_64", OpSys: "LINUX", ScheddName: "schedd@host",
	}
}

func jobsT(t *testing.T, src string) []Job {
	t.Helper()
	f, err := Parse("job.sub", []byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	jobs, err := f.Jobs(context.Background(), testOpts("/sub"))
	if err != nil {
		t.Fatalf("Jobs: %v", err)
	}
	return jobs
}

func TestParseArguments(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		v2   bool
		err  string
	}{
		{`one two  three`, []string{"one", "two", "three"}, false, ""},
		{`"3 simple arguments"`, []string{"3", "simple", "arguments"}, true, ""},
		{`"one 'two with spaces' 3"`, []string{"one", "two with spaces", "3"}, true, ""},
		{`"one ""two"" 'spacey ''quoted'' argument'"`, []string{"one", `"two"`, "spacey 'quoted' argument"}, true, ""},
		{`"''"`, []string{""}, true, ""},
		{`"a'b c'd"`, []string{"ab cd"}, true, ""},
		{`""`, nil, true, ""},
		{`"unterminated 'x"`, nil, true, "unterminated single quote"},
		{`"no end`, nil, true, "must end with a double quote"},
		{`"bad " quote"`, nil, true, "must be doubled"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, v2, err := ParseArguments(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || v2 != tt.v2 || !cmp.Equal(got, tt.want) {
				t.Errorf("ParseArguments(%q) = %q, %v, %v; want %q, %v", tt.in, got, v2, err, tt.want, tt.v2)
			}
			if tt.v2 {
				back, err := ParseArgumentsV2(JoinArgumentsV2(got))
				if err != nil || !cmp.Equal(back, got, cmp.Comparer(func(a, b []string) bool { return strings.Join(a, "\x00") == strings.Join(b, "\x00") })) {
					t.Errorf("round trip of %q via %q = %q, %v", got, JoinArgumentsV2(got), back, err)
				}
			}
		})
	}
}

func TestParseEnvironment(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		v2   bool
		err  string
	}{
		{`one=1;two=2`, []string{"one=1", "two=2"}, false, ""},
		{`"one=1 two=""2"" three='spacey ''quoted'' value'"`, []string{"one=1", `two="2"`, "three=spacey 'quoted' value"}, true, ""},
		{`"A= B=x=y"`, []string{"A=", "B=x=y"}, true, ""},
		{`"novalue"`, nil, true, "not NAME=value"},
		{`"A='x"`, nil, true, "unterminated"},
	}
	for _, tt := range tests {
		got, v2, err := ParseEnvironment(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: err = %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || v2 != tt.v2 || !cmp.Equal(got, tt.want) {
			t.Errorf("ParseEnvironment(%q) = %q, %v, %v", tt.in, got, v2, err)
		}
	}
}

func TestJobAttributes(t *testing.T) {
	jobs := jobsT(t, `# a typical job
universe       = vanilla
executable     = bin/sim
arguments      = "-n $(Process) 'two words'"
environment    = "MODE=fast GREETING='hello world'"
input          = in.$(Process)
output         = out/$(Cluster).$(Process)
error          = err.$(ClusterId)
log            = sim.log
request_cpus   = 2
request_memory = 2GB
request_disk   = 1.5 G
requirements   = Machine != "bad"
rank           = Memory
+Project       = "pond"
MY.Priority2   = 7
transfer_input_files = a.txt, b.txt
should_transfer_files = YES
when_to_transfer_output = ON_EXIT
notification   = Error
priority       = 5
queue 2
`)
	if len(jobs) != 2 {
		t.Fatalf("got %d jobs", len(jobs))
	}
	j := jobs[1]
	want := map[string]string{
		"ClusterId": "42", "ProcId": "1", "JobUniverse": "5", "Owner": `"alice"`, "User": `"alice@example.org"`,
		"QDate": "1700000000", "EnteredCurrentStatus": "1700000000", "JobStatus": "1",
		"Cmd": `"/sub/bin/sim"`, "Arguments": `"-n 1 two' 'words"`,
		"Environment": `"GREETING=hello' 'world MODE=fast"`,
		"In":          `"in.1"`, "Out": `"out/42.1"`, "Err": `"err.42"`, "UserLog": `"/sub/sim.log"`, "Iwd": `"/sub"`,
		"RequestCpus": "2", "RequestMemory": "2048", "RequestDisk": "1572864",
		"Rank": "Memory", "Project": `"pond"`, "Priority2": "7",
		"TransferInput": `"a.txt,b.txt"`, "ShouldTransferFiles": `"YES"`, "WhenToTransferOutput": `"ON_EXIT"`,
		"JobNotification": "3", "JobPrio": "5", "GlobalJobId": `"schedd@host#42.1#1700000000"`,
		"Requirements": `(Machine != "bad") && (TARGET.Arch == "X86_64") && (TARGET.OpSys == "LINUX") && (TARGET.Disk >= RequestDisk) && (TARGET.Memory >= RequestMemory) && (TARGET.Cpus >= RequestCpus) && (TARGET.HasFileTransfer)`,
		"NumJobStarts": "0", "MyType": `"Job"`,
	}
	for k, w := range want {
		if g := j[k]; g != w {
			t.Errorf("%s = %s, want %s", k, g, w)
		}
	}
	if _, ok := j["Args"]; ok {
		t.Errorf("new-syntax arguments also set Args")
	}
	argv, err := Argv(j)
	if err != nil || !cmp.Equal(argv, []string{"-n", "1", "two words"}) {
		t.Errorf("Argv = %q, %v", argv, err)
	}
	env, err := Environ(j)
	if err != nil || !cmp.Equal(env, []string{"GREETING=hello world", "MODE=fast"}) {
		t.Errorf("Environ = %q, %v", env, err)
	}
}

func TestDefaultsAndOldSyntax(t *testing.T) {
	j := jobsT(t, "executable = /bin/echo\narguments = a  b c\nenvironment = A=1;B=2\nqueue\n")[0]
	want := map[string]string{
		"Args": `"a b c"`, "Environment": `"A=1 B=2"`, "RequestMemory": "128", "RequestCpus": "1",
		"RequestDisk": "MAX({1024, (TransferInputSizeMB+1) * 1.25}) * 1024", "In": `"/dev/null"`,
		"ShouldTransferFiles": `"IF_NEEDED"`, "Rank": "0.0", "JobUniverse": "5", "ProcId": "0",
		"Requirements": `(TARGET.Arch == "X86_64") && (TARGET.OpSys == "LINUX") && (TARGET.Disk >= RequestDisk) && (TARGET.Memory >= RequestMemory) && ((TARGET.FileSystemDomain == MY.FileSystemDomain) || (TARGET.HasFileTransfer))`,
	}
	for k, w := range want {
		if g := j[k]; g != w {
			t.Errorf("%s = %s, want %s", k, g, w)
		}
	}
	if _, ok := j["UserLog"]; ok {
		t.Errorf("UserLog set without log")
	}
	argv, _ := Argv(j)
	env, _ := Environ(j)
	if !cmp.Equal(argv, []string{"a", "b", "c"}) || !cmp.Equal(env, []string{"A=1", "B=2"}) {
		t.Errorf("Argv %q Environ %q", argv, env)
	}
}

func TestGetenvAndHold(t *testing.T) {
	j := jobsT(t, "executable = x\ngetenv = true\nenvironment = \"PATH=/opt/bin\"\nhold = true\nqueue\n")[0]
	if got := j["Environment"]; got != `"HOME=/home/alice LANG=C PATH=/opt/bin"` {
		t.Errorf("Environment = %s", got)
	}
	if j["JobStatus"] != "5" || j["HoldReasonCode"] != "15" {
		t.Errorf("hold: JobStatus %s HoldReasonCode %s", j["JobStatus"], j["HoldReasonCode"])
	}
	j = jobsT(t, "executable = x\ngetenv = HOME, LA*\nqueue\n")[0]
	if got := j["Environment"]; got != `"HOME=/home/alice LANG=C"` {
		t.Errorf("getenv list: Environment = %s", got)
	}
}

func TestQueueExpansion(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"a.dat", "b.dat", "c.txt"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "d.dat"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rows.txt"), []byte("1, x y\n2 z\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		src  string
		want []string // per job: "proc:arguments"
	}{
		{"plain", "queue", []string{"0:"}},
		{"count", "queue 3", []string{"0:", "1:", "2:"}},
		{"count macro", "N = 2\nqueue $(N)", []string{"0:", "1:"}},
		{"macro names in any case", "Name = v\narguments = $(NAME)$(name)\nqueue", []string{"0:vv"}},
		{"substr of a loop variable", "arguments = $SUBSTR(x, 1, 2)\nqueue x in (abcd)", []string{"0:bc"}},
		{"file name of a loop variable", "arguments = $Fn(x) $Fx(x)\nqueue x in (/in/a.dat)", []string{"0:a .dat"}},
		{"choice by process", "arguments = $CHOICE(Process, $(Cluster)a, b)\nqueue 2", []string{"0:42a", "1:b"}},
		{"zero", "queue 0", nil},
		{"in", "arguments = $(x)\nqueue x in (a, b c)", []string{"0:a", "1:b", "2:c"}},
		{"in bare", "arguments = $(Item)\nqueue in a b", []string{"0:a", "1:b"}},
		{"in multi-line", "arguments = $(x)\nqueue x in (\n  a\n  b\n)", []string{"0:a", "1:b"}},
		{"in with count", "arguments = $(x).$(Step).$(Row)\nqueue 2 x in (a, b)", []string{"0:a.0.0", "1:a.1.0", "2:b.0.1", "3:b.1.1"}},
		{"in slice", "arguments = $(x)\nqueue x in [1:] (a, b, c)", []string{"0:b", "1:c"}},
		{"in slice step", "arguments = $(x)\nqueue x in [::-2] (a, b, c)", []string{"0:c", "1:a"}},
		{"from inline", "arguments = $(a)-$(b)\nqueue a,b from (\n  1, 2 3\n  4 5\n)", []string{"0:1-2 3", "1:4-5"}},
		{"from file", "arguments = $(a)-$(b)\nqueue a b from rows.txt", []string{"0:1-x y", "1:2-z"}},
		{"matching", "arguments = $(f)\nqueue f matching *.dat", []string{"0:a.dat", "1:b.dat", "2:d.dat"}},
		{"matching files", "arguments = $(f)\nqueue f matching files *.dat", []string{"0:a.dat", "1:b.dat"}},
		{"matching dirs", "arguments = $(f)\nqueue f matching dirs *.dat", []string{"0:d.dat"}},
		{"two queues", "arguments = one\nqueue\narguments = two\nqueue 2", []string{"0:one", "1:two", "2:two"}},
		{"file funcs", "arguments = $Fn(f) $Fx(f) $Fnx(f)\nqueue f in (/p/q/r.txt)", []string{"0:r .txt r.txt"}},
		{"int", "arguments = $INT(Process,%02d) $(Process:x)\nqueue 2", []string{"0:00 0", "1:01 1"}},
		{"macro default", "arguments = $(nothing:dflt)\nqueue", []string{"0:dflt"}},
		{"env", "arguments = $ENV(HOME)\nqueue", []string{"0:/home/alice"}},
		{"user macro", "base = run\narguments = $(base)_$(Process)\nqueue 2", []string{"0:run_0", "1:run_1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse("job.sub", []byte("executable = /bin/echo\n"+tt.src+"\n"))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			opts := testOpts(dir)
			jobs, err := f.Jobs(context.Background(), opts)
			if err != nil {
				t.Fatalf("Jobs: %v", err)
			}
			var got []string
			for _, j := range jobs {
				a := ""
				if v, ok := j["Args"]; ok {
					a, _ = classad.UnquoteString(v)
				}
				got = append(got, j["ProcId"]+":"+a)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("jobs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"no equals", "executable /bin/echo\nqueue", "job.sub:1:1: expected command = value or queue"},
		{"bad name", "  exe cutable = x\nqueue", `job.sub:1:3: invalid command or attribute name "exe cutable"`},
		{"bad queue", "executable = x\nqueue foo bar", "job.sub:2:1: bad queue statement"},
		{"unclosed list", "executable = x\nqueue x in (a,\nb", "job.sub:2:12: queue item list opened with ( is never closed"},
		{"bad slice", "executable = x\nqueue x in [a:] (b)", "bad slice"},
		{"no queue", "executable = x", "no queue statement"},
		{"no executable", "queue", "no executable given"},
		{"bad args", "executable = x\narguments = \"a 'b\"\nqueue", "job.sub:2:1: arguments: unterminated single quote"},
		{"bad env", "executable = x\nenvironment = \"novalue\"\nqueue", "job.sub:2:1: environment"},
		{"bad universe", "executable = x\nuniverse = grid\nqueue", `job.sub:2:1: universe "grid" is not supported`},
		{"bad stf", "executable = x\nshould_transfer_files = maybe\nqueue", "should_transfer_files must be YES, NO or IF_NEEDED"},
		{"bad unit", "executable = x\nrequest_memory = 2XB\nqueue", `unknown size unit "XB"`},
		{"bad count", "executable = x\nqueue abc def", "bad queue statement"},
		{"bad count expr", "executable = x\nN = z\nqueue $(N)", "queue count \"z\" is not a non-negative integer"},
		{"cycle", "executable = $(a)\na = $(b)\nb = $(a)\nqueue", "circular macro reference"},
		{"missing from file", "executable = x\nqueue a from /nonexistent/rows", "queue from /nonexistent/rows"},
		{"too many", "executable = x\nqueue 2000000", "more than 1000000 jobs"},
		{"bad notification", "executable = x\nnotification = sometimes\nqueue", "notification must be"},
		{"custom no value", "executable = x\n+Foo =\nqueue", "custom attribute Foo has no value"},
		{"bad cpus", "executable = x\nrequest_cpus = 1.5\nqueue", "request_cpus must be a whole number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse("job.sub", []byte(tt.src))
			if err == nil {
				_, err = f.Jobs(context.Background(), testOpts("/sub"))
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
			var se *Error
			if !errors.As(err, &se) {
				t.Errorf("error is %T, not *Error", err)
			}
		})
	}
}

func TestWarnings(t *testing.T) {
	f, err := Parse("job.sub", []byte("executable = x\nexecutible = y\nmydir = /d\noutput = $(mydir)/o\n+Custom = 1\nqueue\n"))
	if err != nil {
		t.Fatal(err)
	}
	w := f.Warnings()
	if len(w) != 1 || w[0].Line != 2 || !strings.Contains(w[0].String(), "job.sub:2:1: WARNING: the line 'executible = y' was unused") {
		t.Errorf("warnings = %v", w)
	}
}

func TestCancel(t *testing.T) {
	f, err := Parse("job.sub", []byte("executable = x\nqueue 10000"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.Jobs(ctx, testOpts("/")); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in, unit string
		want     int64
		num      bool
	}{
		{"1024", "M", 1024, true}, {"2GB", "M", 2048, true}, {"2 G", "M", 2048, true}, {"1.5g", "M", 1536, true},
		{"512K", "M", 1, true}, {"1MiB", "K", 1024, true}, {"1T", "M", 1048576, true}, {"100", "K", 100, true},
		{"MemoryUsage * 2", "M", 0, false}, {"ifThenElse(x, 1, 2)", "M", 0, false},
	}
	for _, tt := range tests {
		got, num, err := parseSize(tt.in, tt.unit)
		if err != nil || got != tt.want || num != tt.num {
			t.Errorf("parseSize(%q, %s) = %d, %v, %v", tt.in, tt.unit, got, num, err)
		}
	}
}

func BenchmarkJobs1000(b *testing.B) {
	src := "executable = /bin/echo\narguments = \"$(Process) 'a b'\"\noutput = out.$(Process)\nrequest_memory = 1G\nqueue 1000\n"
	f, err := Parse("b.sub", []byte(src))
	if err != nil {
		b.Fatal(err)
	}
	opts := testOpts("/tmp")
	b.ReportAllocs()
	for b.Loop() {
		jobs, err := f.Jobs(context.Background(), opts)
		if err != nil || len(jobs) != 1000 {
			b.Fatal(err, len(jobs))
		}
	}
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "jobs/s")
}

func ExampleFile_Jobs() {
	f, err := Parse("hello.sub", []byte("executable = /bin/echo\narguments = \"hello $(Item)\"\nqueue in (world, pond)\n"))
	if err != nil {
		panic(err)
	}
	jobs, err := f.Jobs(context.Background(), Options{ClusterID: 7, SubmitDir: "/tmp"})
	if err != nil {
		panic(err)
	}
	for _, j := range jobs {
		fmt.Println(j["ClusterId"], j["ProcId"], j["Cmd"], j["Arguments"])
	}
	// Output:
	// 7 0 "/bin/echo" "hello world"
	// 7 1 "/bin/echo" "hello pond"
}

func TestApplyConfig(t *testing.T) {
	c := config.New(config.Options{Host: config.HostInfo{FullHostname: "cm.example.org", Hostname: "cm", IPAddress: "10.0.0.1", CPUs: 1, MemoryMB: 1024}})
	if err := c.ParseInto("t.cfg", []byte("JOB_DEFAULT_REQUESTMEMORY = 512\nUID_DOMAIN = campus.edu\n")); err != nil {
		t.Fatal(err)
	}
	var o Options
	o.ApplyConfig(c)
	if o.UIDDomain != "campus.edu" || o.FileSystemDomain != "cm.example.org" || o.DefaultRequestMemory != "512" || o.DefaultRequestCpus != "1" {
		t.Errorf("options = %+v", o)
	}
	f, err := Parse("x.sub", []byte("initialdir = run1\nexecutable = bin/x\nlog = x.log\nqueue"))
	if err != nil {
		t.Fatal(err)
	}
	o.SubmitDir, o.Owner = "/home/a", "a"
	o.Stat = func(p string) (os.FileInfo, error) { return os.Stat("/") }
	jobs, err := f.Jobs(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	j := jobs[0]
	if j["RequestMemory"] != "512" || j["User"] != `"a@campus.edu"` || j["Cmd"] != `"/home/a/bin/x"` || j["Iwd"] != `"/home/a/run1"` || j["UserLog"] != `"/home/a/run1/x.log"` {
		t.Errorf("job = %v", j)
	}
}

func TestConditionalsAndInclude(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "common.sub"), []byte("request_memory = 1G\n+Site = \"$(site:none)\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := `executable = /bin/x
site = campus
if defined site
  arguments = at-$(site)
elif defined other
  arguments = other
else
  arguments = nowhere
endif
if ! defined nothing
  include : common.sub
endif
if version >= 9.0
  priority = 3
endif
if false
  queue 5
endif
queue
`
	f, err := Parse("cond.sub", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := f.Jobs(context.Background(), testOpts(dir))
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 {
		t.Fatalf("%d jobs, want 1", len(jobs))
	}
	j := jobs[0]
	for k, w := range map[string]string{"Args": `"at-campus"`, "RequestMemory": "1024", "Site": `"campus"`, "JobPrio": "3"} {
		if j[k] != w {
			t.Errorf("%s = %s, want %s", k, j[k], w)
		}
	}
	bad := []struct{ src, want string }{
		{"executable = x\nendif\nqueue", "cond.sub:2:1: endif without if"},
		{"executable = x\nif true\nqueue", "cond.sub:2:1: if without endif"},
		{"executable = x\nif $(a) == 1\nendif\nqueue", "complex conditionals are not supported"},
		{"executable = x\ninclude : missing.sub\nqueue", "cond.sub:2:1: include " + filepath.Join(dir, "missing.sub")},
		{"executable = x\ninclude :\nqueue", "include needs a file name"},
	}
	for _, tt := range bad {
		f, err := Parse("cond.sub", []byte(tt.src))
		if err == nil {
			_, err = f.Jobs(context.Background(), testOpts(dir))
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: err = %v, want %q", tt.src, err, tt.want)
		}
	}
}

// TestAsCondorSubmit checks, one class at a time, job ads the differential
// test against HTCondor 24 (compat_test.go) found different, with the
// values condor_submit gives.
func TestAsCondorSubmit(t *testing.T) {
	const (
		arch    = `(TARGET.Arch == "X86_64") && (TARGET.OpSys == "LINUX")`
		dm      = `(TARGET.Disk >= RequestDisk) && (TARGET.Memory >= RequestMemory)`
		ifNeed  = `((TARGET.FileSystemDomain == MY.FileSystemDomain) || (TARGET.HasFileTransfer))`
		unset   = "<unset>"
		exeLine = "executable = /bin/echo\n"
	)
	tests := []struct {
		name string
		src  string
		want map[string]string // attribute -> value, or unset
	}{
		{"old arguments unescape double quotes", `arguments = one \"two\" three` + "\n",
			map[string]string{"Args": `"one \"two\" three"`}},
		{"old arguments keep other backslashes", `arguments = a\\b` + "\n",
			map[string]string{"Args": `"a\\\\b"`}},
		{"empty arguments", "arguments =\n", map[string]string{"Arguments": `""`, "Args": unset}},
		{"new arguments quote runs of spaces", `arguments = "one 'two  three' '' 'it''s'"` + "\n",
			map[string]string{"Arguments": `"one two'  'three '' it''''s"`}},
		{"transfer list names with spaces", "should_transfer_files = YES\ntransfer_input_files = my file.txt , b.txt,\n",
			map[string]string{"TransferInput": `"my file.txt,b.txt"`}},
		{"output remaps lose their quotes", `transfer_output_remaps = "a = b; c = d"` + "\n",
			map[string]string{"TransferOutputRemaps": `"a = b; c = d"`}},
		{"GPUs clause", "request_gpus = 1\n",
			map[string]string{"Requirements": arch + " && " + dm + " && (TARGET.GPUs >= RequestGPUs) && " + ifNeed}},
		{"no GPUs clause for zero GPUs", "request_gpus = 0\n",
			map[string]string{"Requirements": arch + " && " + dm + " && " + ifNeed}},
		{"no GPUs clause when the expression has GPUs", "request_gpus = 2\nrequirements = GPUs > 3\n",
			map[string]string{"Requirements": "(GPUs > 3) && " + arch + " && " + dm + " && " + ifNeed}},
		{"Memory clause kept", "requirements = Memory > 1024\n",
			map[string]string{"Requirements": "(Memory > 1024) && " + arch + " && " + dm + " && " + ifNeed}},
		{"Cpus clause only with request_cpus", "request_cpus = 2\n",
			map[string]string{"Requirements": arch + " && " + dm + " && (TARGET.Cpus >= RequestCpus) && " + ifNeed}},
		{"local universe: no file-system clause", "universe = local\nshould_transfer_files = NO\n",
			map[string]string{"Requirements": arch + " && " + dm}},
		{"scheduler universe: no file-system clause", "universe = scheduler\n",
			map[string]string{"Requirements": arch + " && " + dm}},
		{"file-system domain in the expression", "requirements = FileSystemDomain == \"x\"\n",
			map[string]string{"Requirements": `(FileSystemDomain == "x") && ` + arch + " && " + dm + " && (TARGET.HasFileTransfer)"}},
		{"always transferring: no FileSystemDomain", "should_transfer_files = YES\n",
			map[string]string{"FileSystemDomain": unset, "Requirements": arch + " && " + dm + " && (TARGET.HasFileTransfer)"}},
		{"max_retries", "max_retries = 3\n", map[string]string{"JobMaxRetries": "3", "MaxRetries": unset,
			"OnExitRemove": "NumJobCompletions > JobMaxRetries || ExitCode is 0"}},
		{"max_retries with on_exit_remove and success_exit_code", "max_retries = 2\nsuccess_exit_code = 4\non_exit_remove = ExitCode == 3\n",
			map[string]string{"JobMaxRetries": "2", "JobSuccessExitCode": "4",
				"OnExitRemove": "NumJobCompletions > JobMaxRetries || ExitCode is JobSuccessExitCode || ExitCode == 3"}},
		{"retry_until an exit code", "retry_until = 3\n", map[string]string{"JobMaxRetries": "2", "RetryUntil": "3",
			"OnExitRemove": "NumJobCompletions > JobMaxRetries || ExitCode is 0 || ExitCode is 3"}},
		{"retry_until an expression", "max_retries = 4\nretry_until = ExitCode > 10\n", map[string]string{"JobMaxRetries": "4",
			"OnExitRemove": "NumJobCompletions > JobMaxRetries || ExitCode is 0 || ExitCode > 10"}},
		{"deferral_time", "deferral_time = 100\n", map[string]string{"DeferralTime": "100", "DeferralWindow": "0", "DeferralPrepTime": "300"}},
		{"deferral_window and deferral_prep_time", "deferral_time = 100\ndeferral_window = 5\ndeferral_prep_time = 3\n",
			map[string]string{"DeferralTime": "100", "DeferralWindow": "5", "DeferralPrepTime": "3"}},
		{"unset $ENV is UNDEFINED", "x = $ENV(POND_NOT_SET)\n+X = \"$(x)|$ENV(POND_NOT_SET:dflt)|$ENV(HOME)\"\n",
			map[string]string{"X": `"UNDEFINED|dflt|/home/alice"`}},
		{"a default with a quote is no macro", "a = 1\n+X = \"$(a:'q')|$ENV(HOME:'q')|$(gone:x(y))\"\n",
			map[string]string{"X": `"$(a:'q')|$ENV(HOME:'q')|x(y)"`}},
		{"missing macro with default, Node", "+X = \"$(missing:dflt)|$(Node)|$(Process)\"\n",
			map[string]string{"X": `"dflt||0"`}},
		{"concurrency limits", "concurrency_limits = foo, Bar:2 Z\n",
			map[string]string{"ConcurrencyLimits": `"bar:2,foo,z"`}},
		{"old environment becomes Environment", "environment = A=1;B=x y\n",
			map[string]string{"Environment": `"A=1 B=x' 'y"`, "Env": unset}},
		{"env command keeps the old syntax", "env = A=1;B=2\n",
			map[string]string{"Env": `"A=1;B=2"`, "EnvDelim": `";"`, "Environment": unset}},
		{"environment sorted by name", `environment = "Z=1 A=2"` + "\n",
			map[string]string{"Environment": `"A=2 Z=1"`}},
		{"relative executable not transferred", "executable = bin/x\ntransfer_executable = false\n",
			map[string]string{"Cmd": `"bin/x"`, "TransferExecutable": "false"}},
		{"relative executable transferred", "executable = bin/x\n",
			map[string]string{"Cmd": `"/sub/bin/x"`, "TransferExecutable": unset}},
		{"input", "input = in.txt\n", map[string]string{"In": `"in.txt"`, "StreamIn": "false", "TransferIn": unset}},
		{"stream_output without output", "stream_output = true\n", map[string]string{"StreamOut": "false"}},
		{"stream_output with output", "output = o\nstream_output = true\n", map[string]string{"StreamOut": "true"}},
		{"nice user", "nice_user = true\n", map[string]string{"NiceUser": unset, "AcctGroup": `"nice-user"`,
			"AccountingGroup": `"nice-user.alice"`, "MaxJobRetirementTime": "0"}},
		{"hold", "hold = true\n", map[string]string{"JobStatus": "5", "HoldReasonCode": "15", "HoldReasonSubCode": unset}},
		{"no Cpus clause for one CPU", "request_cpus = 1\n",
			map[string]string{"Requirements": arch + " && " + dm + " && " + ifNeed}},
		{"Cpus clause for an expression", "request_cpus = 1+1\n",
			map[string]string{"Requirements": arch + " && " + dm + " && (TARGET.Cpus >= RequestCpus) && " + ifNeed}},
		{"kill_sig by number", "kill_sig = 9\n", map[string]string{"KillSig": `"SIGKILL"`}},
		{"kill_sig by name", "kill_sig = sigusr1\n", map[string]string{"KillSig": `"SIGUSR1"`}},
		{"hold reasons are expressions", "periodic_hold_reason = strcat(\"x\", 1)\non_exit_hold_reason = \"y\"\n",
			map[string]string{"PeriodicHoldReason": `strcat("x", 1)`, "OnExitHoldReason": `"y"`}},
		{"accounting group user alone", "accounting_group_user = bob\n",
			map[string]string{"AcctGroup": unset, "AcctGroupUser": `"bob"`, "AccountingGroup": `"bob"`}},
		{"accounting group without a user", "accounting_group = physics\n",
			map[string]string{"AcctGroup": `"physics"`, "AcctGroupUser": `"alice"`, "AccountingGroup": `"physics.alice"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := tt.src
			if !strings.Contains(src, "executable") {
				src = exeLine + src
			}
			j := jobsT(t, src+"queue\n")[0]
			for k, w := range tt.want {
				g, ok := j[k]
				if !ok {
					g = unset
				}
				if g != w {
					t.Errorf("%s = %s, want %s", k, g, w)
				}
			}
		})
	}
}

// TestRefusedAsCondorSubmit checks the submit files condor_submit refuses
// are refused, saying where.
func TestRefusedAsCondorSubmit(t *testing.T) {
	dir := t.TempDir()
	tests := []struct{ src, want string }{
		{"executable = /bin/echo\ninitialdir = nowhere\nqueue\n", "x.sub:2:1: initialdir " + filepath.Join(dir, "nowhere") + " does not exist"},
		{"executable = /bin/echo\ninitialdir = x.sub\nqueue\n", "x.sub:2:1: initialdir " + filepath.Join(dir, "x.sub") + " is not a directory"},
		{"executable = /bin/echo\nshould_transfer_files = NO\ntransfer_input_files = a\nqueue\n", "x.sub:3:1: transfer_input_files names files to transfer, but should_transfer_files is NO"},
		{"executable = /bin/echo\nshould_transfer_files = NO\ntransfer_executable = true\nqueue\n", "x.sub:3:1: transfer_executable is true, but should_transfer_files is NO"},
		{"executable = /bin/echo\nkill_sig = 99\nqueue\n", "x.sub:2:1: kill_sig: invalid signal 99"},
		{"executable = /bin/echo\n+Y = $(gone:\"s\")\nqueue\n", `x.sub:2:1: +Y: "$(gone:\"s\")" is not a ClassAd expression`},
		{"executable = /bin/echo\non_exit_hold_reason = plain words\nqueue\n", `x.sub:2:1: on_exit_hold_reason: "plain words" is not a ClassAd expression`},
		{"executable = /bin/echo\nrequirements = Memory > $$(Memory)\nqueue\n", `x.sub:2:1: requirements: "Memory > $$(Memory)" is not a ClassAd expression`},
		{"executable = /bin/echo\nkill_sig = KILL\nqueue\n", "x.sub:2:1: kill_sig: invalid signal KILL"},
	}
	if err := os.WriteFile(filepath.Join(dir, "x.sub"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		f, err := Parse("x.sub", []byte(tt.src))
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.Jobs(context.Background(), testOpts(dir))
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want %s", tt.src, err, tt.want)
		}
	}
	f, err := Parse("x.sub", []byte("executable = /bin/echo\ninitialdir = .\nqueue\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Jobs(context.Background(), testOpts(dir)); err != nil {
		t.Errorf("an existing initialdir: %v", err)
	}
}

// TestNoSharedFileSystemWarned: should_transfer_files = NO, which asks
// for the job to run in its initialdir on a shared file system, is warned
// of at its line, not ignored in silence; YES and IF_NEEDED are not.
func TestNoSharedFileSystemWarned(t *testing.T) {
	for _, c := range []struct {
		value string
		warn  bool
	}{{"NO", true}, {"false", true}, {"YES", false}, {"IF_NEEDED", false}} {
		f, err := Parse("x.sub", []byte("executable = /bin/echo\nshould_transfer_files = "+c.value+"\nqueue\n"))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, w := range f.Warnings() {
			got = append(got, w.String())
		}
		if warned := len(got) == 1 && strings.HasPrefix(got[0], "x.sub:2:1: WARNING: should_transfer_files = NO: pond runs every job in a scratch directory"); warned != c.warn || (!c.warn && len(got) != 0) {
			t.Errorf("should_transfer_files = %s: warnings %q, want a warning: %v", c.value, got, c.warn)
		}
	}
}

// TestNoUnusedWarningForIfDefined: a macro only "if defined" tests is
// used, as condor_submit sees it.
func TestNoUnusedWarningForIfDefined(t *testing.T) {
	f, err := Parse("x.sub", []byte("executable = /bin/echo\nflavour = big\nother = 1\nif defined flavour\n+F = 1\nelif ! defined other\n+F = 2\nendif\nunused_thing = 3\nqueue\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range f.Warnings() {
		got = append(got, w.String())
	}
	if len(got) != 1 || !strings.Contains(got[0], "unused_thing") {
		t.Errorf("warnings %q, want only one for unused_thing", got)
	}
}

// TestExecutableChecked checks the executables condor_submit refuses on
// the submit host (missing, a directory, empty, a script with DOS line
// endings), and event logs in a directory that is not there, are refused
// at their command, each executable checked once
// however many jobs name it, and that one not transferred, or a submit
// without the check (a schedd's materialization), is not looked at.
func TestExecutableChecked(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{"ok.sh": "#!/bin/sh\necho ok\n", "empty.sh": "", "crlf.sh": "#!/bin/sh\r\necho hi\r\n", "bin": "\x7fELF\r\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	calls := 0
	counting := func(p string) error { calls++; return CheckExecutable(p) }
	for _, c := range []struct {
		src   string
		check func(string) error
		want  string // "" for no error
	}{
		{"executable = ok.sh\nqueue 3\n", counting, ""},
		{"executable = bin\nqueue\n", counting, ""},
		{"executable = missing\nqueue\n", counting, "x.sub:1:1: executable file " + filepath.Join(dir, "missing") + " does not exist"},
		{"\nexecutable = empty.sh\nqueue\n", counting, "x.sub:2:1: executable file " + filepath.Join(dir, "empty.sh") + " has zero length"},
		{"executable = crlf.sh\nqueue\n", counting, "x.sub:1:1: executable file " + filepath.Join(dir, "crlf.sh") + " is a script with CRLF"},
		{"executable = " + dir + "\nqueue\n", counting, "is a directory"},
		{"executable = /nowhere/prog\ntransfer_executable = false\nqueue\n", counting, ""},
		{"executable = missing\nqueue\n", nil, ""},
		{"executable = ok.sh\nlog = nodir/x.log\nqueue\n", counting, "x.sub:2:1: log file " + filepath.Join(dir, "nodir", "x.log") + ": the directory " + filepath.Join(dir, "nodir") + " does not exist"},
		{"executable = ok.sh\nlog = ok.sh/x.log\nqueue\n", counting, "is not a directory"},
		{"executable = ok.sh\ndagman_log = nodir/n.log\nqueue\n", counting, "x.sub:2:1: log file"},
		{"executable = ok.sh\nlog = fine.log\nqueue 2\n", counting, ""},
	} {
		f, err := Parse("x.sub", []byte(c.src))
		if err != nil {
			t.Fatal(err)
		}
		opts := testOpts(dir)
		opts.CheckExecutable = c.check
		if c.check != nil {
			opts.CheckLog = CheckLog
		}
		calls = 0
		_, err = f.Jobs(context.Background(), opts)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v", c.src, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: error %v, want %q", c.src, err, c.want)
		case strings.Contains(c.src, "queue 3") && calls != 1:
			t.Errorf("%q: the executable was checked %d times for 3 jobs, want once", c.src, calls)
		}
	}
}
