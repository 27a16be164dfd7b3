package schedd_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/internal/asuser"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/schedd"
	"github.com/pond-htc/pond/condor/submit"
	"github.com/pond-htc/pond/condor/testenv"
	"github.com/pond-htc/pond/condor/tools"
	"github.com/pond-htc/pond/condor/wire"
)

// TestRemoveEventNamesTheUser: the job log's events of a condor_release,
// condor_hold and condor_rm, and the job's HoldReason, give the reason
// and the user who asked ("via condor_rm (by user alice)"), as HTCondor's
// schedd writes them, and HTCondor's own job-log reader reads the abort
// reason back when its bindings are installed.
func TestRemoveEventNamesTheUser(t *testing.T) {
	t.Parallel()
	key, err := auth.NewSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	const issuer = "removedby.test"
	token := func(subject string) string {
		tok, err := auth.Mint(key, auth.Claims{Issuer: issuer, Subject: subject, Scopes: []auth.Scope{auth.Write},
			IssuedAt: time.Now(), Expires: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	cfg := config.New(config.Options{Host: config.HostInfo{FullHostname: "submit.example.org", Hostname: "submit",
		IPAddress: "127.0.0.1", CPUs: 1, MemoryMB: 1024}})
	if err := cfg.ParseInto("test.cfg", []byte("UID_DOMAIN = example.org\n")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// The owners have no local accounts: the schedd acts with the test's
	// own rights for their files.
	s, err := schedd.New(ctx, schedd.Options{Config: cfg, Name: "schedd@submit", Address: scheddAddress, DataDir: t.TempDir(),
		Account: func(string) (*asuser.Account, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mux := http.NewServeMux()
	prefix := wire.PathPrefix + "schedd"
	v := &auth.Verifier{Issuer: issuer, Keys: []ed25519.PublicKey{key.Public()}}
	mux.Handle(prefix+"/", http.StripPrefix(prefix, auth.Require(v, auth.Write, s.Handler())))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	dir := t.TempDir()
	for _, who := range []string{"alice", "bob@example.org"} {
		c := wire.NewSchedd(srv.Listener.Addr().String(), token(who))
		f, err := submit.Parse(filepath.Join(dir, "job.sub"), []byte("executable = /bin/true\nlog = job.log\nhold = true\nqueue\n"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := tools.SubmitFile(ctx, c, f, submit.Options{Owner: who, SubmitDir: dir, Env: []string{},
			LookupEnv: func(string) (string, bool) { return "", false }})
		if err != nil {
			t.Fatalf("submit as %s: %v", who, err)
		}
		id := fmt.Sprint(resp.Cluster)
		for _, action := range []string{wire.ActRelease, wire.ActHold} {
			if _, err := c.Act(ctx, &wire.ActRequest{Action: action, Args: []string{id}}); err != nil {
				t.Fatalf("%s as %s: %v", action, who, err)
			}
		}
		// The job's HoldReason and its event's say the same.
		name, _, _ := strings.Cut(who, "@")
		jobs, err := c.Queue(ctx, &wire.QueryJobsRequest{Args: []string{id}})
		if err != nil || len(jobs) != 1 {
			t.Fatalf("the job of %s: %v %v", who, jobs, err)
		}
		if got, want := jobs[0].Ad["HoldReason"], `"via condor_hold (by user `+name+`)"`; got != want {
			t.Errorf("HoldReason %s, want %s", got, want)
		}
		req := &wire.ActRequest{Action: wire.ActRemove, Args: []string{id}}
		if _, err := c.Act(ctx, req); err != nil {
			t.Fatalf("remove as %s: %v", who, err)
		}
	}

	want := []string{"via condor_rm (by user alice)", "via condor_rm (by user bob)"}
	fh, err := os.Open(filepath.Join(dir, "job.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	evs, err := joblog.ReadAll(fh, time.Local)
	if err != nil {
		t.Fatal(err)
	}
	var got, others []string
	for _, ev := range evs {
		switch {
		case ev.Type == joblog.Aborted:
			got = append(got, ev.Message)
		case ev.Type == joblog.Released || ev.Type == joblog.Held && strings.HasPrefix(ev.Message, "via "):
			others = append(others, ev.Message)
		}
	}
	if wantOthers := []string{"via condor_release (by user alice)", "via condor_hold (by user alice)", "via condor_release (by user bob)", "via condor_hold (by user bob)"}; strings.Join(others, "\n") != strings.Join(wantOthers, "\n") {
		t.Errorf("release and hold reasons %q, want %q", others, wantOthers)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("abort reasons %q, want %q", got, want)
	}

	if exec.Command("python3", "-c", "import htcondor2").Run() != nil {
		testenv.LogOrFail(t, "HTCondor's bindings (htcondor2) are not installed: the log is not read by HTCondor's reader")
		return
	}
	script := `
import sys, htcondor2
for e in htcondor2.JobEventLog(sys.argv[1]).events(stop_after=0):
    if e.type == htcondor2.JobEventType.JOB_ABORTED:
        print(e["Reason"])
`
	out, err := exec.Command("python3", "-c", script, filepath.Join(dir, "job.log")).CombinedOutput()
	if err != nil {
		t.Fatalf("HTCondor's reader: %v\n%s", err, out)
	}
	if g := strings.TrimSpace(string(out)); g != strings.Join(want, "\n") {
		t.Errorf("HTCondor's reader gives the reasons %q, want %q", g, want)
	}
}
