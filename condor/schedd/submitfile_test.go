package schedd_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/submit"
	"github.com/pond-htc/pond/condor/tools"
)

// TestSubmitFileMany submits files of tools.DigestSubmitMin jobs or more,
// which condor submit sends as their digest: every job is queued as the
// file says, and a mistake in any job, found on the submit host (a
// missing initialdir of a late proc), queues nothing.
func TestSubmitFileMany(t *testing.T) {
	t.Parallel()
	n := tools.DigestSubmitMin + 200
	tests := []struct {
		name    string
		missing int // the directory of this proc is not there; -1 none
		wantErr string
	}{
		{"every directory there", -1, ""},
		{"a late proc's directory missing", n - 3, fmt.Sprintf("d%d does not exist", n-3)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nd := start(t)
			for i := range n {
				if i == tt.missing {
					continue
				}
				if err := os.Mkdir(filepath.Join(nd.jobs, fmt.Sprintf("d%d", i)), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			src := fmt.Sprintf("executable = /bin/true\narguments = $(Process)\ninitialdir = d$(Process)\nrequirements = false\nqueue %d\n", n)
			f, err := submit.Parse(filepath.Join(nd.jobs, "job.sub"), []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := tools.SubmitFile(context.Background(), nd.c, f, submit.Options{Owner: "alice", SubmitDir: nd.jobs,
				Env: []string{}, LookupEnv: func(string) (string, bool) { return "", false }})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("SubmitFile = %+v, %v; want an error with %q", resp, err, tt.wantErr)
				}
				if q := queued(t, nd); q != 0 {
					t.Fatalf("a submit with a mistake queued %d jobs", q)
				}
				return
			}
			if err != nil || resp.Jobs != n {
				t.Fatalf("SubmitFile = %+v, %v; want %d jobs", resp, err, n)
			}
			if q := queued(t, nd); q != n {
				t.Fatalf("%d jobs queued, want %d", q, n)
			}
			for _, p := range []int{0, n / 2, n - 1} {
				j := nd.job(fmt.Sprintf("%d.%d", resp.Cluster, p))
				if want := fmt.Sprintf(`"%s"`, filepath.Join(nd.jobs, fmt.Sprintf("d%d", p))); j["Iwd"] != want || j["Args"] != fmt.Sprintf(`"%d"`, p) {
					t.Errorf("job %d.%d: Iwd %s Args %s; want %s and \"%d\"", resp.Cluster, p, j["Iwd"], j["Args"], want, p)
				}
			}
		})
	}
}
