package config

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/pond-htc/pond/condor/testenv"
)

// pythonCondor returns the module name of HTCondor's Python bindings
// available here, or skips the test.
func pythonCondor(t *testing.T) string {
	t.Helper()
	for _, m := range []string{"htcondor2", "htcondor"} {
		if exec.Command("python3", "-c", "import "+m).Run() == nil {
			return m
		}
	}
	testenv.SkipOrFail(t, "HTCondor Python bindings not available: pip install htcondor")
	return ""
}

// TestOracleParam compares our expansion with HTCondor's own configuration
// reader (htcondor.param with CONDOR_CONFIG pointing at the file).
func TestOracleParam(t *testing.T) {
	mod := pythonCondor(t)
	src := `use ROLE:Personal
use ROLE:Execute
A = 1
A = $(A) 2
EMPTY =
if defined EMPTY
Y = emptydefined
endif
if version >= 8.0
V = yes
endif
if 0
N = 1
elif 1
N = 2
else
N = 3
endif
B = $(NOPE:def $(A))
D = $$(Memory)
A_EXPR = 3*4+1
E = $INT(HOUR) $INT(A_EXPR)
G = $(DOLLAR)x
L = a \
  b
M = x # not a comment
H = $ENV(POND_ORACLE_ENV)
I = $ENV(POND_ORACLE_NOPE:fallback)
S = abcdef
SS = $SUBSTR(S,1,3)
if ! defined NOPE
ND = yes
endif
if version > 25.99.0
VNEW = yes
else
VNEW = no
endif
DE = $(EMPTY:dflt)
FP = /d/run.sh
FN = $Fn(FP)|$Fx(FP)|$Fp(FP)
WHICH = S
NN = $($(WHICH))
if 2
NUM = yes
endif
ML @=end
  first
  second
@end
`
	names := []string{"DAEMON_LIST", "CONDOR_HOST", "COLLECTOR_HOST", "A", "Y", "V", "N", "B", "D", "E", "G", "L", "M", "H", "I", "SS", "ML", "ND", "VNEW", "DE", "NUM", "FN", "NN",
		"NEGOTIATOR_INTERVAL", "NEGOTIATOR_MIN_INTERVAL", "UPDATE_INTERVAL", "MAX_JOBS_RUNNING", "JOB_DEFAULT_REQUESTMEMORY", "PREEMPT", "KILL", "SUSPEND", "WANT_VACATE"}
	dir := t.TempDir()
	path := filepath.Join(dir, "condor_config")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `
import json, sys
import ` + mod + ` as h
out = {}
for k in sys.argv[1:]:
    v = h.param.get(k)
    if v is None:
        out[k] = None
    elif isinstance(v, bool):
        out[k] = "True" if v else "False"
    else:
        out[k] = str(v)
print(json.dumps(out))
`
	cmd := exec.Command("python3", append([]string{"-c", script}, names...)...)
	cmd.Env = append(os.Environ(), "CONDOR_CONFIG="+path, "POND_ORACLE_ENV=hello")
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("oracle: %v", err)
	}
	var want map[string]*string
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatalf("oracle output %q: %v", b, err)
	}
	c := New(Options{LookupEnv: func(k string) (string, bool) {
		if k == "POND_ORACLE_ENV" {
			return "hello", true
		}
		return "", false
	}})
	if err := c.ParseInto(path, []byte(src)); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		got, ok := c.Get(n)
		w := want[n]
		switch {
		case w == nil && ok && got != "":
			t.Errorf("%s: HTCondor has it undefined, we have %q", n, got)
		case w != nil && got != *w:
			// HTCondor prints typed booleans capitalised; compare loosely.
			if gb, ok1 := ParseBool(got); ok1 {
				if wb, ok2 := ParseBool(*w); ok2 && gb == wb {
					continue
				}
			}
			t.Errorf("%s = %q, HTCondor says %q", n, got, *w)
		}
	}
}
