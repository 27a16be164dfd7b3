package startd

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/startd/jobshim"
	"github.com/pond-htc/pond/condor/testenv"
)

// TestSupervisorRefusesOtherSpecs sends the supervisor a spec of another
// protocol, and one with a field it does not know: it runs neither job,
// and says why.
func TestSupervisorRefusesOtherSpecs(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	for _, tc := range []struct {
		name, spec, want string
	}{
		{"another protocol", `{"protocol": %d, "path": "/bin/sh", "args": ["/bin/sh", "-c", "touch %s"], "dir": "/"}`, "protocol"},
		{"an unknown field", `{"protocol": %d, "path": "/bin/sh", "args": ["/bin/sh", "-c", "touch %s"], "dir": "/", "confine_harder": true}`, "confine_harder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			protocol := jobshim.Protocol
			if tc.want == "protocol" {
				protocol++
			}
			raw := fmt.Sprintf(tc.spec, protocol, marker)
			null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer null.Close()
			_, err = startSupervisorWith(isolation{}, jobshim.Spec{}, func(w io.Writer, _ jobshim.Spec) error {
				_, err := io.Copy(w, bytes.NewBufferString(raw))
				return err
			}, null, null, null)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("starting the supervisor: %v, want an error about %s", err, tc.want)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Error("the job ran")
			}
		})
	}
}

// TestJobEnvironmentIsTheSpecs runs jobs with an environment and with
// none: either way the job sees the spec's variables only, none of its
// supervisor's own (GOMAXPROCS=1, GORACE).
func TestJobEnvironmentIsTheSpecs(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
	}{
		{"some", []string{"PATH=/usr/bin:/bin", "POND_TEST=1"}},
		{"none", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out, err := os.Create(filepath.Join(dir, "out"))
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			spec := jobshim.Spec{Path: "/usr/bin/env", Args: []string{"env"}, Dir: dir, Env: tc.env}
			p, err := startSupervisor(isolation{}, spec, out, out, out)
			if err != nil {
				t.Fatal(err)
			}
			p.wait()
			if p.final == nil || p.final.ExitCode != 0 {
				t.Fatalf("env ended with %+v (%v)", p.final, p.waitErr)
			}
			got := strings.Fields(readAll(filepath.Join(dir, "out")))
			want := tc.env
			if want == nil {
				want = []string{}
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("the job's environment is %q, want %q", got, want)
			}
		})
	}
}

// TestScratchPathUnderPrivateTmp runs a job whose scratch directory lies
// two levels below /tmp, which the job gets a private copy of: the job
// works in its scratch directory all the same, and of the path to it only
// the first level is made on disk in its private /tmp; the rest is in a
// small tmpfs.
func TestScratchPathUnderPrivateTmp(t *testing.T) {
	iso := testIsolation(t)
	if len(iso.mounts) == 0 || !slices.Contains(iso.mounts, "/tmp") {
		testenv.SkipOrFailf(t, "no private /tmp here: %s", iso.why)
	}
	dir := t.TempDir() // /tmp/TestScratch.../001
	if !strings.HasPrefix(dir, "/tmp/") || strings.Count(strings.TrimPrefix(dir, "/tmp/"), "/") < 1 {
		t.Skipf("the test directory %s is not two levels below /tmp", dir)
	}
	scratch := filepath.Join(dir, "execute", "dir_1")
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		t.Fatal(err)
	}
	spec := jobshim.Spec{Path: "/bin/sh", Args: []string{"/bin/sh", "-c", "pwd; echo made > made; stat -f -c %T " + filepath.Dir(dir)},
		Dir: scratch, Env: []string{"PATH=/usr/bin:/bin"}}
	var err error
	if spec.Mounts, err = scratchMounts(scratch, iso.mounts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeScratch(scratch) })
	out, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	p, err := startSupervisor(iso, spec, out, out, out)
	if err != nil {
		t.Fatal(err)
	}
	p.wait()
	got := readAll(out.Name())
	if p.final == nil || p.final.ExitCode != 0 {
		t.Fatalf("the job ended with %+v (%v): %s", p.final, p.waitErr, got)
	}
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if len(lines) != 2 || lines[0] != scratch || lines[1] != "tmpfs" {
		t.Errorf("the job printed %q, want its scratch directory %s and tmpfs for %s", lines, scratch, filepath.Dir(dir))
	}
	if readAll(filepath.Join(scratch, "made")) != "made\n" {
		t.Error("what the job wrote in its scratch directory is not there")
	}
	// In its private /tmp, the first level of the path, empty.
	private := filepath.Join(nsDir(scratch), "tmp")
	top := strings.SplitN(strings.TrimPrefix(dir, "/tmp/"), "/", 2)[0]
	var made []string
	_ = filepath.WalkDir(private, func(p string, _ fs.DirEntry, _ error) error {
		if p != private {
			made = append(made, strings.TrimPrefix(p, private+"/"))
		}
		return nil
	})
	if !slices.Equal(made, []string{top}) {
		t.Errorf("the job's private /tmp holds %q, want only %q", made, top)
	}
}
