package config

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func testOpts() Options {
	return Options{
		LookupEnv: func(k string) (string, bool) {
			if k == "POND_TEST" {
				return "from-env", true
			}
			return "", false
		},
		Host: HostInfo{Hostname: "node1", FullHostname: "node1.example.org", IPAddress: "10.0.0.1", CPUs: 4, MemoryMB: 8192, Username: "alice"},
	}
}

func parseT(t *testing.T, src string) *Config {
	t.Helper()
	c := New(testOpts())
	if err := c.ParseInto("test.cfg", []byte(src)); err != nil {
		t.Fatalf("parse: %v", err)
	}
	return c
}

func TestGet(t *testing.T) {
	tests := []struct {
		name, src, knob, want string
		defined               bool
	}{
		{"simple", "A = 1", "A", "1", true},
		{"case-insensitive", "Foo_Bar = x", "FOO_BAR", "x", true},
		{"later wins", "A = 1\nA = 2", "a", "2", true},
		{"macro", "A = x\nB = $(A)y", "B", "xy", true},
		{"late binding", "B = $(A)y\nA = x", "B", "xy", true},
		{"self append", "A = 1\nA = $(A) 2", "A", "1 2", true},
		{"self append default", "DAEMON_LIST = $(DAEMON_LIST) STARTD", "DAEMON_LIST", "MASTER STARTD", true},
		{"undefined empty", "B = [$(NOPE)]", "B", "[]", true},
		{"default", "B = $(NOPE:dflt)", "B", "dflt", true},
		{"default nested", "A = 1\nB = $(NOPE:x$(A))", "B", "x1", true},
		{"default unused", "A = 1\nB = $(A:9)", "B", "1", true},
		{"env", "B = $ENV(POND_TEST)", "B", "from-env", true},
		{"env default", "B = $ENV(NOPE:d)", "B", "d", true},
		{"int", "A = 3*4+1\nB = $INT(A)", "B", "13", true},
		{"int format", "A = 7\nB = $INT(A,%03d)", "B", "007", true},
		{"real", "A = 1.5*2\nB = $REAL(A)", "B", "3", true},
		{"choice", "I = 1\nB = $CHOICE(I, a, b, c)", "B", "b", true},
		{"substr", "A = abcdef\nB = $SUBSTR(A,2,3)", "B", "cde", true},
		{"choice expands the chosen item", "A = x\nI = 0\nB = $CHOICE(I, $(A)y, z)", "B", "xy", true},
		{"nested name", "W = A\nA = got\nB = $($(W))", "B", "got", true},
		{"file name", "F = /d/run.sh\nB = $Fn(F)", "B", "run", true},
		{"random integer step", "B = $RANDOM_INTEGER(5, 9, 10)", "B", "5", true},
		{"dollar", "B = $(DOLLAR)x", "B", "$x", true},
		{"match-time kept", "B = $$(Memory)", "B", "$$(Memory)", true},
		{"continuation", "A = a \\\n  b", "A", "a b", true},
		{"continuation comment", "A = a \\\n# c\\\n  b", "A", "a b", true},
		{"hash not comment", "A = x # y", "A", "x # y", true},
		{"multi-line", "A @=end\nline1\nline2\n@end\nB = 2", "A", "line1\nline2", true},
		{"empty", "A =", "A", "", true},
		{"undefined", "", "NOPE", "", false},
		{"if true", "if true\nA = 1\nelse\nA = 2\nendif", "A", "1", true},
		{"if false", "if false\nA = 1\nelse\nA = 2\nendif", "A", "2", true},
		{"elif", "if 0\nA = 1\nelif 1\nA = 2\nelse\nA = 3\nendif", "A", "2", true},
		{"defined", "X = 1\nif defined X\nA = yes\nendif", "A", "yes", true},
		{"defined empty", "X =\nif defined X\nA = yes\nendif", "A", "", false},
		{"not defined", "if ! defined X\nA = yes\nendif", "A", "yes", true},
		{"version", "if version >= 8.0\nA = new\nendif", "A", "new", true},
		{"version old", "if version < 8.0\nA = old\nendif", "A", "", false},
		{"defined nothing", "if defined\nA = yes\nelse\nA = no\nendif", "A", "no", true},
		{"version two parts", "if version > 25.99\nA = yes\nelse\nA = no\nendif", "A", "no", true},
		{"expanded bool", "B = yes\nif $(B)\nA = on\nendif", "A", "on", true},
		{"nested dead", "if false\nif true\nA = 1\nendif\nendif", "A", "", false},
		{"use personal", "use ROLE : Personal", "DAEMON_LIST", "MASTER COLLECTOR NEGOTIATOR STARTD SCHEDD", true},
		{"use roles", "use ROLE:CentralManager\nuse ROLE:Submit, Execute", "DAEMON_LIST", "MASTER COLLECTOR NEGOTIATOR SCHEDD STARTD", true},
		{"use pslot", "use FEATURE:PartitionableSlot(2, cpus=2)", "SLOT_TYPE_2", "cpus=2", true},
		{"default table", "", "NEGOTIATOR_INTERVAL", "60", true},
		{"default expanded", "CONDOR_HOST = cm", "COLLECTOR_HOST", "cm", true},
		{"host facts", "", "CONDOR_HOST", "node1.example.org", true},
		{"subsys name stored", "SCHEDD.X = 1", "SCHEDD.X", "1", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := parseT(t, tt.src)
			got, ok := c.Get(tt.knob)
			if ok != tt.defined || got != tt.want {
				t.Errorf("Get(%q) = %q, %v; want %q, %v", tt.knob, got, ok, tt.want, tt.defined)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"circular", "A = $(B)\nB = $(A)", "test.cfg:2:1: cannot define B: circular macro reference"},
		{"circular self via default", "A = $(X:$(B))\nB = $(A)", "circular"},
		{"no equals", "A 1", "test.cfg:1:1: expected NAME = value"},
		{"bad name", "A B = 1", `invalid configuration name "A B"`},
		{"else without if", "else", "test.cfg:1:1: else without if"},
		{"endif without if", "  endif", "test.cfg:1:3: endif without if"},
		{"unterminated if", "A = 1\nif true\nB = 2", "test.cfg:2: if without endif"},
		{"bad condition", "if $(NOPE) ~ 3\nendif", "bad if condition"},
		{"comparison", "N = 3\nif $(N) == 3\nendif", "complex conditionals are not supported"},
		{"bad version", "if version >= 8\nendif", "bad version"},
		{"missing include", "include : /nonexistent/x.cfg", "cannot include /nonexistent/x.cfg"},
		{"include command", "include command : echo hi", "include command is not supported"},
		{"unknown template", "use ROLE:Sushi", `unknown ROLE template "Sushi"`},
		{"unknown category", "use NOPE:X", `unknown metaknob category "nope"`},
		{"error directive", "error : stop $(HOSTNAME)", "test.cfg:1:1: error: stop node1"},
		{"multi-line unclosed", "A @=end\nx", "test.cfg:1:3: multi-line value A @=end is never closed by @end"},
		{"second else", "if true\nelse\nelse\nendif", "test.cfg:3:1: second else"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(testOpts())
			err := c.ParseInto("test.cfg", []byte(tt.src))
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Errorf("error %T is not *Error", err)
			}
		})
	}
}

func TestSetRefusesCycle(t *testing.T) {
	c := parseT(t, "A = $(B)")
	if err := c.Set("B", "x$(A)"); !errors.Is(err, ErrCircular) {
		t.Fatalf("Set cycle: got %v, want ErrCircular", err)
	}
	if _, ok := c.Raw("B"); ok {
		t.Errorf("refused definition of B was kept")
	}
	if err := c.Set("B", "ok"); err != nil {
		t.Fatal(err)
	}
	if v, _ := c.Get("A"); v != "ok" {
		t.Errorf("A = %q", v)
	}
	if err := c.Set("bad name", "x"); err == nil {
		t.Errorf("Set accepted an invalid name")
	}
}

func TestTypedGetters(t *testing.T) {
	c := parseT(t, "I = 5 * $(MINUTE)\nF = 2.5\nB1 = yes\nB2 = False\nBAD = abc\nD = 90s\nE =")
	if v, err := c.Int("I", 0); err != nil || v != 300 {
		t.Errorf("Int(I) = %d, %v", v, err)
	}
	if v, err := c.Int("NOPE", 7); err != nil || v != 7 {
		t.Errorf("Int(NOPE) = %d, %v", v, err)
	}
	if v, err := c.Int("E", 7); err != nil || v != 7 {
		t.Errorf("Int(E) = %d, %v", v, err)
	}
	if v, err := c.Int("BAD", 7); err == nil || v != 7 || !strings.Contains(err.Error(), "test.cfg, line 5") {
		t.Errorf("Int(BAD) = %d, %v", v, err)
	}
	if v, err := c.Int("F", 1); err == nil {
		t.Errorf("Int(F) = %d accepted a float", v)
	}
	if v, err := c.Float("F", 0); err != nil || v != 2.5 {
		t.Errorf("Float(F) = %v, %v", v, err)
	}
	if v, err := c.Bool("B1", false); err != nil || !v {
		t.Errorf("Bool(B1) = %v, %v", v, err)
	}
	if v, err := c.Bool("B2", true); err != nil || v {
		t.Errorf("Bool(B2) = %v, %v", v, err)
	}
	if _, err := c.Bool("BAD", true); err == nil {
		t.Errorf("Bool(BAD) accepted abc")
	}
	if v, err := c.Duration("UPDATE_INTERVAL", 0); err != nil || v != 300*time.Second {
		t.Errorf("Duration(UPDATE_INTERVAL) = %v, %v", v, err)
	}
	if v, err := c.Duration("D", 0); err != nil || v != 90*time.Second {
		t.Errorf("Duration(D) = %v, %v", v, err)
	}
	if got := c.List("DAEMON_LIST"); len(got) != 1 || got[0] != "MASTER" {
		t.Errorf("List(DAEMON_LIST) = %q", got)
	}
}

func TestDefaults(t *testing.T) {
	c := New(testOpts())
	want := map[string]string{
		"UPDATE_INTERVAL": "300", "CLASSAD_LIFETIME": "900", "NEGOTIATOR_INTERVAL": "60",
		"NEGOTIATOR_MIN_INTERVAL": "5", "START": "TRUE", "RANK": "0", "PREEMPT": "False",
		"SUSPEND": "False", "KILL": "False", "MAX_JOBS_RUNNING": "10000", "NUM_SLOTS": "4",
		"DAEMON_LIST": "MASTER", "JOB_DEFAULT_REQUESTMEMORY": "128", "FLOCK_TO": "",
	}
	for k, w := range want {
		if got, ok := c.Get(k); !ok || got != w {
			t.Errorf("%s = %q, %v; want %q", k, got, ok, w)
		}
	}
}

func TestSubsystemView(t *testing.T) {
	c := parseT(t, "X = plain\nSCHEDD.X = sched\nMINE.X = local\nY = $(X)")
	tests := []struct{ subsys, local, knob, want string }{
		{"", "", "X", "plain"},
		{"SCHEDD", "", "X", "sched"},
		{"schedd", "mine", "X", "local"},
		{"STARTD", "", "X", "plain"},
		{"SCHEDD", "", "Y", "sched"},
		{"schedd", "mine", "Y", "local"},
	}
	for _, tt := range tests {
		v := c.ForSubsystem(tt.subsys, tt.local)
		if got, _ := v.Get(tt.knob); got != tt.want {
			t.Errorf("%s/%s %s = %q, want %q", tt.subsys, tt.local, tt.knob, got, tt.want)
		}
	}
}

func TestInclude(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "conf.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("main.cfg", "A = main\ninclude : conf.d/extra.cfg\ninclude ifexist : conf.d/missing.cfg\nC = $(B)!\n")
	write("conf.d/extra.cfg", "B = extra\nD = $(A)\n")
	c, err := Load(filepath.Join(dir, "main.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	for k, w := range map[string]string{"C": "extra!", "D": "main"} {
		if got, _ := c.Get(k); got != w {
			t.Errorf("%s = %q, want %q", k, got, w)
		}
	}
	src, _ := c.Source("B")
	if src.Line != 1 || !strings.HasSuffix(src.File, "extra.cfg") {
		t.Errorf("Source(B) = %v", src)
	}
	write("loop.cfg", "include : loop.cfg\n")
	if _, err := Load(filepath.Join(dir, "loop.cfg")); err == nil || !strings.Contains(err.Error(), "include nesting") {
		t.Errorf("include loop: %v", err)
	}
}

func TestConfigVal(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantOut    string
		wantErr    string
		wantStatus int
	}{
		{"value", []string{"NEGOTIATOR_INTERVAL"}, "60\n", "", 0},
		{"expanded", []string{"collector_host"}, "cm.example\n", "", 0},
		{"raw", []string{"-raw", "COLLECTOR_HOST"}, "$(CONDOR_HOST)\n", "", 0},
		{"undefined", []string{"NOPE"}, "", "Not defined: NOPE\n", 1},
		{"set", []string{"-set", "NEGOTIATOR_INTERVAL = 5", "NEGOTIATOR_INTERVAL"}, "5\n", "", 0},
		{"bad set", []string{"-set", "oops"}, "", "expected \"NAME = value\"", 1},
		{"verbose", []string{"-v", "CONDOR_HOST"}, "CONDOR_HOST = cm.example\n # at: test.cfg, line 1\n # raw: CONDOR_HOST = cm.example\n", "", 0},
		{"dump pattern", []string{"-dump", "NEGOTIATOR_MIN"}, "# Configuration from machine: node1.example.org\n\n# Parameters with names that match NEGOTIATOR_MIN:\nNEGOTIATOR_MIN_INTERVAL = 5\n", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := parseT(t, "CONDOR_HOST = cm.example")
			var out, errb bytes.Buffer
			st := ConfigVal(c, tt.args, &out, &errb)
			if st != tt.wantStatus || out.String() != tt.wantOut || !strings.Contains(errb.String(), tt.wantErr) {
				t.Errorf("status %d out %q err %q; want %d %q %q", st, out.String(), errb.String(), tt.wantStatus, tt.wantOut, tt.wantErr)
			}
		})
	}
}

// TestConfigValSecrets checks that config_val prints no knob that holds a
// secret, by its name or because POND_SECRET_KNOBS names it, nor a knob
// whose value would show one, however it is asked.
func TestConfigValSecrets(t *testing.T) {
	const text = "CONDOR_HOST = cm.example\nDB_PASSWORD = hunter2\nPOND_ENCRYPT = c2VhLWtleQ==\n" +
		"POND_SECRET_KNOBS = DB_CONN\nDB_CONN = postgres://svc:s3cr3t@db\nDSN = user=svc password=$(DB_PASSWORD)\nTEAM = red\n"
	tests := []struct {
		name       string
		args       []string
		wantOut    string
		wantErr    string
		wantStatus int
	}{
		{"by its name", []string{"DB_PASSWORD"}, "", "Not shown: DB_PASSWORD holds a secret", 1},
		{"raw", []string{"-raw", "db_password"}, "", "Not shown: DB_PASSWORD", 1},
		{"the gossip key", []string{"POND_ENCRYPT"}, "", "Not shown: POND_ENCRYPT", 1},
		{"named secret", []string{"DB_CONN"}, "", "Not shown: DB_CONN", 1},
		{"expands to one", []string{"DSN"}, "", "Not shown: DSN", 1},
		{"others still shown", []string{"TEAM", "DB_PASSWORD"}, "red\n", "Not shown: DB_PASSWORD", 1},
		{"raw reference shown", []string{"-raw", "DSN"}, "user=svc password=$(DB_PASSWORD)\n", "", 0},
		{"verbose", []string{"-v", "DB_CONN"}, "DB_CONN = (secret)\n # at: test.cfg, line 5\n # raw: DB_CONN = (secret)\n", "", 0},
		{"dump", []string{"-dump", "-expand"}, "", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := parseT(t, text)
			var out, errb bytes.Buffer
			st := ConfigVal(c, tt.args, &out, &errb)
			if tt.name == "dump" {
				for _, line := range []string{"\nDB_CONN = (secret)\n", "\nDB_PASSWORD = (secret)\n", "\nDSN = (secret)\n",
					"\nPOND_ENCRYPT = (secret)\n", "\nTEAM = red\n", "\nCONDOR_HOST = cm.example\n"} {
					if !strings.Contains(out.String(), line) {
						t.Errorf("-dump does not show %q:\n%s", line, out.String())
					}
				}
			} else if st != tt.wantStatus || out.String() != tt.wantOut || !strings.Contains(errb.String(), tt.wantErr) {
				t.Errorf("status %d out %q err %q; want %d %q %q", st, out.String(), errb.String(), tt.wantStatus, tt.wantOut, tt.wantErr)
			}
			for _, secret := range []string{"hunter2", "s3cr3t", "c2VhLWtleQ=="} {
				if strings.Contains(out.String()+errb.String(), secret) {
					t.Errorf("config_val shows %q:\n%s%s", secret, out.String(), errb.String())
				}
			}
		})
	}
}

func TestSlotTypes(t *testing.T) {
	c := parseT(t, "use FEATURE:PartitionableSlot\nSLOT_TYPE_2 = cpus = 1, memory=25%\nNUM_SLOTS_TYPE_2 = 2\nSLOT_TYPE_3 = 1/4")
	got, err := c.SlotTypes()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != 1 || !got[0].Partitionable || got[0].Resources["cpus"] != "100%" ||
		got[1].Count != 2 || got[1].Resources["memory"] != "25%" || got[1].Resources["cpus"] != "1" {
		t.Errorf("SlotTypes = %+v", got)
	}
	def, err := New(testOpts()).SlotTypes()
	if err != nil || len(def) != 1 || def[0].Count != 4 {
		t.Errorf("default SlotTypes = %+v, %v", def, err)
	}
	bad := parseT(t, "SLOT_TYPE_1 = cpus=\nNUM_SLOTS_TYPE_1 = 1")
	if _, err := bad.SlotTypes(); err == nil {
		t.Errorf("bad slot type accepted")
	}
}

func TestNames(t *testing.T) {
	c := New(Options{NoDefaults: true})
	if err := c.ParseInto("x", []byte("b = 1\nA = 2\nC = 3")); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Names(), ","); got != "A,b,C" {
		t.Errorf("Names = %s", got)
	}
}

func BenchmarkParseAndGet(b *testing.B) {
	src := []byte("use ROLE:Personal\nNEGOTIATOR_INTERVAL = 5\nSTART = $(START) && Memory > 10\nA = $(B) $(C)\nB = $(C)x\nC = 1\n")
	opts := testOpts()
	b.ReportAllocs()
	for b.Loop() {
		c := New(opts)
		if err := c.ParseInto("b.cfg", src); err != nil {
			b.Fatal(err)
		}
		if v, _ := c.Get("A"); v != "1x 1" {
			b.Fatal(v)
		}
	}
}

func TestLoadFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("condor_config", "A = main\nB = main\nC = main\nLOCAL_CONFIG_FILE = local.cfg\nLOCAL_CONFIG_DIR = config.d\n")
	write("local.cfg", "B = local\n")
	write("config.d/10-first", "C = first\nD = first\n")
	write("config.d/20-second", "D = second\n")
	write("config.d/30-skip~", "D = backup\n")
	write("config.d/.hidden", "D = hidden\n")
	write("config.d/40-script.sh", "D = script\n")
	c := New(testOpts())
	read, err := c.LoadFiles(filepath.Join(dir, "condor_config"))
	if err != nil {
		t.Fatal(err)
	}
	if len(read) != 4 {
		t.Errorf("read %v", read)
	}
	for k, w := range map[string]string{"A": "main", "B": "local", "C": "first", "D": "second"} {
		if got, _ := c.Get(k); got != w {
			t.Errorf("%s = %q, want %q", k, got, w)
		}
	}
	if got := ConfigPath(func(string) (string, bool) { return "/x/condor_config", true }); got != "/x/condor_config" {
		t.Errorf("ConfigPath = %q", got)
	}
	if got := ConfigPath(func(string) (string, bool) { return "", false }); got != "/etc/condor/condor_config" {
		t.Errorf("ConfigPath default = %q", got)
	}
	write("bad/condor_config", "LOCAL_CONFIG_FILE = missing.cfg\n")
	if _, err := New(testOpts()).LoadFiles(filepath.Join(dir, "bad/condor_config")); err == nil || !strings.Contains(err.Error(), "missing.cfg") {
		t.Errorf("missing local file: %v", err)
	}
}

func TestSplitFileList(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{"a,b", []string{"a", "b"}},
		{"my file.txt, b.txt ,", []string{"my file.txt", "b.txt"}},
		{"", nil},
		{" , ", nil},
	} {
		if got := SplitFileList(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("SplitFileList(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
