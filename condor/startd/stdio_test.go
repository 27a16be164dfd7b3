package startd

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/wire"
)

// TestOpenStdioFiles checks which of a job's standard streams get a file
// in its scratch directory: only Out and Err that name a file, the
// streams the startd sends back; the others go to /dev/null and leave no
// file to create and remove.
func TestOpenStdioFiles(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ad         string
		files      []string
		stdoutNull bool
		stderrNull bool
	}{
		{"neither", `[Out = "/dev/null"; Err = "/dev/null"]`, nil, true, true},
		{"unset", `[]`, nil, true, true},
		{"output", `[Out = "out.txt"; Err = "/dev/null"]`, []string{"_condor_stdout"}, false, true},
		{"both", `[Out = "out.txt"; Err = "err.txt"]`, []string{"_condor_stderr", "_condor_stdout"}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job, err := classad.ParseNewAd(tc.ad)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			cmd := exec.Command("/bin/true")
			closeStdio, err := openStdio(cmd, dir, job, &wire.ActivateRequest{}, func(string) bool { return false })
			if err != nil {
				t.Fatal(err)
			}
			defer closeStdio()
			ents, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range ents {
				got = append(got, e.Name())
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.files) {
				t.Errorf("scratch directory holds %v, want %v", got, tc.files)
			}
			for _, s := range []struct {
				name string
				f    any
				null bool
			}{{"stdin", cmd.Stdin, true}, {"stdout", cmd.Stdout, tc.stdoutNull}, {"stderr", cmd.Stderr, tc.stderrNull}} {
				f := s.f.(*os.File)
				if isNull := f.Name() == os.DevNull; isNull != s.null {
					t.Errorf("%s is %s, want /dev/null: %v", s.name, f.Name(), s.null)
				}
				if !s.null && filepath.Dir(f.Name()) != dir {
					t.Errorf("%s is %s, outside the scratch directory", s.name, f.Name())
				}
			}
			// What goes to /dev/null is writable.
			if _, err := cmd.Stdout.(*os.File).WriteString("x"); err != nil {
				t.Errorf("writing stdout: %v", err)
			}
		})
	}
}
