package evaltool

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(args, &out, &errb)
	return out.String(), errb.String(), code
}

// The cases reproduce the examples of HTCondor's classad_eval manual page,
// printed as HTCondor 25 prints them (ads with their attributes sorted,
// lists as their element expressions).
func TestManualExamples(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"assignment", []string{"a = 2", "a * 2"}, "[ a = 2 ]\n4\n"},
		{"no whitespace", []string{"a=2", "a*2"}, "[ a = 2 ]\n4\n"},
		{"two assignments", []string{"a = 2", "b = 2", "a + b"}, "[ a = 2; b = 2 ]\n4\n"},
		{"inline ad", []string{"[ a = 2; b = 2 ]", "a + b"}, "[ a = 2; b = 2 ]\n4\n"},
		{"no context", []string{`strcat("foo", "bar")`}, "[  ]\n\"foobar\"\n"},
		{"changing context", []string{"x = y", "x", "y = 7", "x", `[ x = 6; z = "foo"; ]`, "x"},
			"[ x = y ]\nundefined\n[ x = y; y = 7 ]\n7\n[ x = 6; y = 7; z = \"foo\" ]\n6\n"},
		{"quiet part way", []string{"x = y", "x", "-quiet", "y = 7", "x", `[ x = 6; z = "foo"; ]`, "x"},
			"[ x = y ]\nundefined\n7\n6\n"},
		{"quiet first", []string{"-quiet", "a = 1.5", "a", "{ a, \"s\" }"}, "1.500000000000000E+00\n{ a,\"s\" }\n"},
		{"same context printed once", []string{"a = 1", "a", "a + 1"}, "[ a = 1 ]\n1\n2\n"},
		{"negative number is an expression", []string{"-quiet", "-1"}, "-1\n"},
		{"comparison is not an assignment", []string{"-quiet", "a == 1"}, "undefined\n"},
		{"dash expression is not an option", []string{"r = 3", "-r", "-bogus"}, "[ r = 3 ]\n-3\nundefined\n"},
		{"non-ASCII bytes as octal escapes", []string{"-quiet", `strcat("é", "x")`}, "\"\\303\\251x\"\n"},
		{"several assignments in one argument", []string{"a = 2; b = 2", "a + b"}, "[ a = 2; b = 2 ]\n4\n"},
		{"assignments in HTCondor's order", []string{"zz = 1", "B = 2", "a = [ y = 1; X = 2 ]", "zz"}, "[ a = [ X = 2; y = 1 ]; B = 2; zz = 1 ]\n1\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := run(t, tt.args...)
			if code != 0 || out != tt.want {
				t.Errorf("Run(%q) = %d\n got %q\nwant %q\nstderr %q", tt.args, code, out, tt.want, errOut)
			}
		})
	}
}

func TestFiles(t *testing.T) {
	dir := t.TempDir()
	job := filepath.Join(dir, "job.ad")
	slot := filepath.Join(dir, "slot.ad")
	old := filepath.Join(dir, "old.ad")
	if err := os.WriteFile(job, []byte("[ RequestMemory = 1024; Requirements = TARGET.Memory >= MY.RequestMemory ]\n[ ignored = 1 ]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(slot, []byte("[ Memory = 2048; Requirements = TARGET.RequestMemory < 4096 ]"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(old, []byte("JobUniverse = 5\nOwner = \"alice\"\n\nJobUniverse = 9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, "-quiet", "-my-file", job, "-target-file", slot, "MY.Requirements", "TARGET.Requirements")
	if code != 0 || out != "true\ntrue\n" {
		t.Errorf("got %d %q (stderr %q)", code, out, errOut)
	}
	// condor_q -long:new prints a list of ads.
	long := filepath.Join(dir, "long.ad")
	if err := os.WriteFile(long, []byte("{\n[\n  ClusterId = 7;\n  Owner = \"bob\"\n],\n[\n  ClusterId = 8\n]\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = run(t, "-file", long, "ClusterId")
	if code != 0 || out != "[ Owner = \"bob\"; ClusterId = 7 ]\n7\n" {
		t.Errorf("condor_q -long:new file: got %d %q (stderr %q)", code, out, errOut)
	}
	out, _, code = run(t, "-file", old, "JobUniverse")
	if code != 0 || out != "[ Owner = \"alice\"; JobUniverse = 5 ]\n5\n" {
		t.Errorf("old-syntax file: got %d %q", code, out)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"bad expression", []string{"1 +"}, 1, "1:4"},
		{"bad assignment", []string{"a = (1"}, 1, "1:7"},
		{"bad ad", []string{"[ a = ; ]"}, 1, "1:7"},
		{"missing file", []string{"-file", "/nonexistent/x.ad", "a"}, 1, "no such file"},
		{"missing file name", []string{"-target-file"}, 255, "needs a file name"},
		{"nothing to do", nil, 255, "Usage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errOut, code := run(t, tt.args...)
			if code != tt.code || !strings.Contains(errOut, tt.msg) {
				t.Errorf("Run(%q) = %d, stderr %q; want %d and %q", tt.args, code, errOut, tt.code, tt.msg)
			}
		})
	}
}
