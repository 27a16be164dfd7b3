package submit

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pond-htc/pond/condor/testenv"
)

// pythonCondor returns the module name of HTCondor's Python bindings, or
// skips the test.
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

// oracleScript prints, for each submit text given as JSON on stdin, the
// item rows HTCondor derives from its queue statement and the expansion
// of the macro named "probe".
const oracleScript = `
import json, sys
import MODULE as h
try:
    from MODULE._submit import _submit_itemdata
except ImportError:
    _submit_itemdata = None
out = []
for text in json.load(sys.stdin):
    s = h.Submit(text)
    rec = {"probe": s.expand("probe") if "probe" in s else None}
    if _submit_itemdata is not None:
        keys, values = _submit_itemdata(s, s._handle)
    else:
        items = s.itemdata()
        keys = values = None
        if items is not None:
            items = list(items)
            if items and isinstance(items[0], dict):
                keys = "\n".join(items[0].keys())
                values = "\n".join("\x1f".join(d.values()) for d in items)
            else:
                values = "\n".join(items)
    rec["keys"] = keys
    rec["values"] = values
    out.append(rec)
print(json.dumps(out))
`

type oracleRec struct {
	Probe  *string `json:"probe"`
	Keys   *string `json:"keys"`
	Values *string `json:"values"`
}

func runOracle(t *testing.T, dir string, texts []string) []oracleRec {
	t.Helper()
	mod := pythonCondor(t)
	in, err := json.Marshal(texts)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("python3", "-c", strings.ReplaceAll(oracleScript, "MODULE", mod))
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(string(in))
	cmd.Env = append(os.Environ(), "POND_ORACLE=env-value")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("oracle: %v", err)
	}
	var recs []oracleRec
	if err := json.Unmarshal(out, &recs); err != nil {
		t.Fatalf("oracle output %q: %v", out, err)
	}
	if len(recs) != len(texts) {
		t.Fatalf("oracle answered %d of %d", len(recs), len(texts))
	}
	return recs
}

// TestOracleQueueItems compares queue item expansion with HTCondor's.
func TestOracleQueueItems(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"a.py", "b.py", "c.txt"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "rows.txt"), []byte("r1 x\n# skip\nr2, y z\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	queues := []string{
		"queue x in (a, b  c)",
		"queue x in a b, c",
		"queue x,y from (\n a b\n c,d\n)",
		"queue 3",
		"queue",
		"queue x matching *.py",
		"queue in (a,b)",
		"queue from (\nx y\n)",
		"queue x,y in (a,b)",
		"queue x from (\n#c\nA\n)",
		"queue a,b from (\n1,2,3\n)",
		"queue x in (a,,b)",
		"queue 2 x in (a)",
		"queue x, y from (\n a  ,  b , c \n)",
		"queue a b from rows.txt",
		"queue 2 a,b,c from (\n1 2 3 4\n5\n)",
	}
	var texts []string
	for _, q := range queues {
		texts = append(texts, "executable = /bin/echo\n"+q+"\n")
	}
	recs := runOracle(t, dir, texts)
	for i, text := range texts {
		f, err := Parse("oracle.sub", []byte(text))
		if err != nil {
			t.Errorf("%q: Parse: %v", queues[i], err)
			continue
		}
		q := f.Queues()[0]
		b := &jobBuilder{f: f, opts: testOpts(dir).withDefaults(), m: &macroSet{vals: map[string]string{}}}
		rows, err := b.items(&q)
		if err != nil {
			t.Errorf("%q: items: %v", queues[i], err)
			continue
		}
		rec := recs[i]
		if rec.Values == nil {
			if q.Mode != QueuePlain {
				t.Errorf("%q: HTCondor sees no items, we see mode %d", queues[i], q.Mode)
			}
			continue
		}
		if rec.Keys != nil && !cmp.Equal(strings.Split(*rec.Keys, "\n"), q.Vars, cmp.Comparer(strings.EqualFold)) {
			t.Errorf("%q: vars %q, HTCondor %q", queues[i], q.Vars, *rec.Keys)
		}
		var want [][]string
		for _, v := range strings.Split(*rec.Values, "\n") {
			row := strings.Split(v, "\x1f")
			for len(row) < len(q.Vars) {
				row = append(row, "")
			}
			want = append(want, row)
		}
		var got [][]string
		for i := range rows.len() {
			got = append(got, rows.row(i))
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%q: items differ from HTCondor (-htcondor +ours):\n%s", queues[i], diff)
		}
	}
}

// TestOracleMacros compares macro expansion with HTCondor's.
func TestOracleMacros(t *testing.T) {
	probes := []string{
		"f = /a/b/c.txt\nprobe = $Fp(f)|$Fn(f)|$Fx(f)|$Fnx(f)|$Fd(f)|$Fq(f)|$Fa(f)",
		"probe = $(nope:dflt)",
		"probe = $ENV(POND_ORACLE)",
		"probe = $ENV(POND_ORACLE_NOT_SET:fallback)",
		"n = 3+4\nprobe = $INT(n)",
		"n = 7\nprobe = $INT(n,%03d)",
		"a = x\nb = $(a)y\nprobe = [$(b)]",
		"probe = $$(Memory) $(DOLLAR)",
		"n = 2\nprobe = $CHOICE(n, zero, one, two)",
		"r = 1.5*3\nprobe = $REAL(r)",
		"s = abcdef\nprobe = $SUBSTR(s,1,3)|$SUBSTR(s,-2)",
		"w = s\ns = got\nprobe = $($(w))",
		"site = campus\nif defined site\nprobe = at-$(site)\nelse\nprobe = no\nendif",
		"if defined nosuch\nprobe = yes\nelif version >= 9.0\nprobe = new\nelse\nprobe = old\nendif",
		"if ! defined nosuch\nprobe = negated\nendif",
		"if 0\nprobe = zero\nelse\nprobe = nonzero\nendif",
	}
	var texts []string
	for _, p := range probes {
		texts = append(texts, "executable = /bin/echo\n"+p+"\nqueue\n")
	}
	recs := runOracle(t, t.TempDir(), texts)
	for i, p := range probes {
		f, err := Parse("oracle.sub", []byte(texts[i]))
		if err != nil {
			t.Fatal(err)
		}
		m := &macroSet{vals: map[string]string{}, env: func(k string) (string, bool) {
			if k == "POND_ORACLE" {
				return "env-value", true
			}
			return "", false
		}}
		b := &jobBuilder{f: f, opts: testOpts(t.TempDir()).withDefaults(), m: m, at: map[string]where{}}
		if err := b.run(context.Background(), f.Name, f.stmts, 0); err != nil {
			t.Errorf("%q: %v", p, err)
			continue
		}
		got, err := m.expand("$(probe)")
		if err != nil {
			t.Errorf("%q: %v", p, err)
			continue
		}
		if recs[i].Probe == nil || got != *recs[i].Probe {
			t.Errorf("%q: we expand to %q, HTCondor to %v", p, got, deref(recs[i].Probe))
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "<undefined>"
	}
	return *s
}
