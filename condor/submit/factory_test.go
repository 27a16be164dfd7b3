package submit

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFactoryMatchesJobs checks that a job factory, and the factory
// remade from its digest on a host without the submitter's files or
// environment, build every proc exactly as an eager submit does.
func TestFactoryMatchesJobs(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "items.txt"), []byte("a 1\nb 2\nc,3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"in0", "in1", "in2"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, src string
		total     int
	}{
		{"count", "executable = /bin/echo\narguments = $(Process) $(Cluster)\nmax_materialize = 2\nqueue 5\n", 5},
		{"from file", "executable = /bin/echo\narguments = $(x) $(y) $(Row) $(Step)\nqueue 2 x, y from items.txt\n", 6},
		{"in list", "executable = /bin/echo\narguments = $(Item)\nqueue item in (red, green, blue)\n", 3},
		{"two statements", "executable = /bin/echo\narguments = one $(Process)\nqueue 2\narguments = two $(Process)\nrequest_memory = 1G\n+Extra = \"x$(Process)\"\nqueue 3\n", 5},
		{"initialdir and env", "executable = /bin/echo\ninitialdir = in$(Process)\nenvironment = \"H=$ENV(HOME)\"\ngetenv = true\nqueue 3\n", 3},
		{"matching", "executable = /bin/echo\narguments = $(f)\nqueue f matching *.txt\n", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			f, err := Parse(filepath.Join(dir, "job.sub"), []byte(tt.src))
			if err != nil {
				t.Fatal(err)
			}
			want, err := f.Jobs(ctx, testOpts(dir))
			if err != nil {
				t.Fatal(err)
			}
			fa, err := f.NewFactory(ctx, testOpts(dir))
			if err != nil {
				t.Fatal(err)
			}
			if fa.Total() != tt.total || len(want) != tt.total {
				t.Fatalf("factory makes %d jobs, Jobs %d; want %d", fa.Total(), len(want), tt.total)
			}
			digest, err := fa.Digest()
			if err != nil {
				t.Fatal(err)
			}
			for proc := range tt.total {
				got, err := fa.Job(proc)
				if err != nil {
					t.Fatalf("Job(%d): %v", proc, err)
				}
				if diff := cmp.Diff(want[proc], got); diff != "" {
					t.Errorf("proc %d differs from Jobs (-want +got):\n%s", proc, diff)
				}
			}
			// The remade factory must not read this host.
			if err := os.Rename(dir, dir+".gone"); err != nil {
				t.Fatal(err)
			}
			defer os.Rename(dir+".gone", dir)
			re, err := FactoryFromDigest(ctx, digest, nil)
			if err != nil {
				t.Fatal(err)
			}
			for proc := tt.total - 1; proc >= 0; proc-- { // any order
				got, err := re.Job(proc)
				if err != nil {
					t.Fatalf("from digest: Job(%d): %v", proc, err)
				}
				if diff := cmp.Diff(want[proc], got); diff != "" {
					t.Errorf("from digest: proc %d differs from Jobs (-want +got):\n%s", proc, diff)
				}
			}
			if _, err := re.Job(tt.total); err == nil {
				t.Errorf("Job(%d) of a factory of %d jobs: no error", tt.total, tt.total)
			}
		})
	}
}

// TestFactoryDigestKeepsNoEnvironment checks that a digest holds the
// submitter's environment only when getenv asks for it.
func TestFactoryDigestKeepsNoEnvironment(t *testing.T) {
	f, err := Parse("job.sub", []byte("executable = /bin/true\nqueue 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	fa, err := f.NewFactory(context.Background(), testOpts("/sub"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := fa.Digest()
	if err != nil {
		t.Fatal(err)
	}
	var d Digest
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Env) != 0 {
		t.Errorf("digest keeps the environment without getenv: %v", d.Env)
	}
	if !strings.Contains(string(data), `"source":"executable = /bin/true`) {
		t.Errorf("digest without the submit text: %s", data)
	}
}

func TestMaterializeLimits(t *testing.T) {
	tests := []struct {
		src       string
		mat, idle int
		bad       bool
	}{
		{"queue\n", 0, 0, false},
		{"max_materialize = 50\nqueue 10\n", 50, 0, false},
		{"max_idle = 20\nmax_materialize = 4*5\nqueue\n", 20, 20, false},
		{"max_idle = -1\nqueue\n", 0, 0, true},
		{"max_materialize = lots\nqueue\n", 0, 0, true},
	}
	for _, tt := range tests {
		f, err := Parse("job.sub", []byte(tt.src))
		if err != nil {
			t.Fatal(err)
		}
		m, i, err := f.MaterializeLimits()
		if (err != nil) != tt.bad || m != tt.mat || i != tt.idle {
			t.Errorf("%q: got %d, %d, %v; want %d, %d, bad %v", tt.src, m, i, err, tt.mat, tt.idle, tt.bad)
		}
	}
}
