package schedd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/cedar"
	"github.com/pond-htc/pond/condor/cedar/cedartest"
	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/schedd"
	"github.com/pond-htc/pond/condor/testenv"
	"github.com/pond-htc/pond/condor/wire"
)

// serveCEDAR serves the schedd's CEDAR commands on a loopback port, with
// FS granting what the agent grants: root administers, any other local
// user reads and manages its own jobs.
func serveCEDAR(t testing.TB, s *schedd.Schedd) string {
	t.Helper()
	return serveCEDARTimeout(t, s, 5*time.Minute)
}

// serveCEDARTimeout is serveCEDAR with the server's timeout.
func serveCEDARTimeout(t testing.TB, s *schedd.Schedd, timeout time.Duration) string {
	t.Helper()
	srv := cedar.NewServer(cedar.Options{
		Methods: []cedar.Method{&cedar.FS{Domain: "test", Grant: func(uid uint32, name string) *auth.Claims {
			scopes := []auth.Scope{auth.Read, auth.Write}
			if uid == 0 {
				scopes = append(scopes, auth.Administrator)
			}
			return &auth.Claims{Subject: name + "@test", Scopes: scopes}
		}}},
		Commands: schedd.CedarCommands(func() *schedd.Schedd { return s }),
		Timeout:  timeout,
	})
	addr := cedartest.Serve(t, srv)
	return addr
}

// submitProcs submits n procs over CEDAR as htcondor2 does, with extra
// attributes on the cluster ad and proc(i) on proc i, and commits unless
// drop. It returns the cluster and the commit's result.
func submitProcs(ctx context.Context, addr string, n int, extra map[string]string, proc func(i int) [][2]string, drop bool) (int, int64, string, error) {
	cl := append([]cedartest.Attr(nil), cedartest.BaseCluster...)
	for k, v := range extra {
		cl = append(cl, cedartest.Attr{Name: k, Value: v})
	}
	sub := cedartest.Submit{Procs: n, Cluster: cl, Drop: drop, Proc: func(i int) []cedartest.Attr {
		own := []cedartest.Attr{{Name: "Args", Value: strconv.Quote(strconv.Itoa(i))}, {Name: "Item", Value: strconv.Itoa(i)}}
		if proc != nil {
			for _, a := range proc(i) {
				own = append(own, cedartest.Attr{Name: a[0], Value: a[1]})
			}
		}
		return own
	}}
	return sub.Run(ctx, addr)
}

func queued(t testing.TB, n *node) int {
	t.Helper()
	return len(n.ids(&wire.QueryJobsRequest{}))
}

// TestCEDARSubmitAllOrNothing submits over CEDAR the way HTCondor's
// client does: a connection dropped before the commit leaves nothing
// queued, and so does a commit of 1,000 procs whose proc 500 fails (a
// value that does not parse, sent without ack; an Owner that is no user
// name), while the same submit without the bad attribute queues 1,000.
func TestCEDARSubmitAllOrNothing(t *testing.T) {
	t.Parallel()
	n := start(t)
	addr := serveCEDAR(t, n.s)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	if _, _, _, err := submitProcs(ctx, addr, 5, nil, nil, true); err != nil {
		t.Fatal(err)
	}
	// The schedd sees the closed connection after its last request.
	time.Sleep(200 * time.Millisecond)
	if got := queued(t, n); got != 0 {
		t.Fatalf("a submit dropped before its commit queued %d jobs", got)
	}

	for _, tc := range []struct {
		name, attr, value, reason string
	}{
		{"value that does not parse", "Bad", "((((", "does not parse"},
		{"Owner that is no user name", "Owner", `""`, "not a user name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, rval, reason, err := submitProcs(ctx, addr, 1000, nil, func(i int) [][2]string {
				if i == 500 {
					return [][2]string{{tc.attr, tc.value}}
				}
				return nil
			}, false)
			if err != nil {
				t.Fatal(err)
			}
			if rval != -1 || !strings.Contains(reason, tc.reason) {
				t.Errorf("commit = %d %q, want -1 and %q", rval, reason, tc.reason)
			}
			if got := queued(t, n); got != 0 {
				t.Errorf("a failed commit queued %d jobs", got)
			}
		})
	}

	cluster, rval, reason, err := submitProcs(ctx, addr, 1000, nil, nil, false)
	if err != nil || rval != 0 {
		t.Fatalf("commit = %d %q %v", rval, reason, err)
	}
	if got := queued(t, n); got != 1000 {
		t.Fatalf("queued %d jobs, want 1000", got)
	}
	ad := n.job(fmt.Sprintf("%d.500", cluster))
	if ad["Owner"] != `"root"` || ad["Item"] != "500" {
		t.Errorf("job %d.500: %v", cluster, ad)
	}
}

// otherUserEnv carries the schedd's address to the test binary run as
// another user (TestCEDAROtherUserClient).
const otherUserEnv = "POND_CEDAR_OTHER_USER_ADDR"

// TestCEDAROtherUserRefused runs the CEDAR client as user nobody (FS
// proves the uid of the process): it may submit its own jobs, but may not
// remove root's job, edit it, act as root, nor submit a job whose Owner is
// root; root's job is left as it was.
func TestCEDAROtherUserRefused(t *testing.T) {
	t.Parallel()
	testenv.NeedRoot(t, "running the client as user nobody")
	n := start(t)
	addr := serveCEDAR(t, n.s)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cluster, rval, reason, err := submitProcs(ctx, addr, 1, nil, nil, false)
	if err != nil || rval != 0 {
		t.Fatalf("root's submit: %d %q %v", rval, reason, err)
	}
	rootJob := fmt.Sprintf("%d.0", cluster)

	// The test binary, where nobody can run it.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "pond-cedar-client-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "client.test")
	copyFile(t, exe, bin)
	cmd := exec.CommandContext(ctx, bin, "-test.run=^TestCEDAROtherUserClient$", "-test.v")
	cmd.Env = []string{otherUserEnv + "=" + addr, "ROOT_JOB=" + rootJob, "HOME=/", "TMPDIR=/tmp"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the client as nobody: %v\n%s", err, out)
	}
	var got map[string]any
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "RESULT "); ok {
			if err := json.Unmarshal([]byte(rest), &got); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := map[string]any{
		"user":                "nobody@test",
		"own_submit":          0.0,
		"remove_denied":       1.0,
		"remove_success":      0.0,
		"edit_errno":          13.0,
		"effective_owner":     13.0,
		"submit_as_root":      -1.0,
		"submit_as_root_why":  true,
		"own_job_owner_after": `"nobody"`,
	}
	for k, v := range want {
		if fmt.Sprint(got[k]) != fmt.Sprint(v) {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	ad := n.job(rootJob)
	if ad["Owner"] != `"root"` || ad["JobStatus"] != "5" || ad["Colour"] != "" {
		t.Errorf("root's job after the other user's tries: %v", ad)
	}
	if got := queued(t, n); got != 2 {
		t.Errorf("%d jobs queued, want root's and nobody's", got)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCEDAROtherUserClient is the client TestCEDAROtherUserRefused runs
// as another user; it does nothing otherwise.
func TestCEDAROtherUserClient(t *testing.T) {
	t.Parallel()
	addr := os.Getenv(otherUserEnv)
	if addr == "" {
		return
	}
	rootJob := os.Getenv("ROOT_JOB")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := map[string]any{}

	// Its own submit is fine.
	cluster, rval, reason, err := submitProcs(ctx, addr, 1, nil, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	out["own_submit"] = rval
	if rval != 0 {
		t.Logf("own submit: %s", reason)
	}

	// Who the schedd takes it for.
	st, sess, err := cedartest.Dial(ctx, addr, cedartest.CmdQueryJobAds)
	if err != nil {
		t.Fatal(err)
	}
	st.Conn().Close()
	out["user"] = sess.User

	// Remove root's job.
	res, err := cedartest.Act(ctx, addr, cedartest.ActionRemove, rootJob, "not mine")
	if err != nil {
		t.Fatal(err)
	}
	out["remove_denied"], _ = res.EvalAttr("result_total_5").IntValue()
	out["remove_success"], _ = res.EvalAttr("result_total_1").IntValue()

	// Edit root's job, act as root.
	c, err := cedartest.DialQueue(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	id := strings.Split(rootJob, ".")
	rc, _ := strconv.Atoi(id[0])
	if _, out["edit_errno"], err = c.Call(cedartest.QSetAttribute, rc, 0, `"red"`, "Colour"); err != nil {
		t.Fatal(err)
	}
	if _, out["effective_owner"], err = c.Call(cedartest.QSetOwner, "root"); err != nil {
		t.Fatal(err)
	}
	if rval, _, reason, err := c.Commit(); err != nil || rval != 0 {
		t.Fatalf("commit of nothing: %d %q %v", rval, reason, err)
	}
	c.Close()

	// Submit a job whose Owner is root.
	_, rval, reason, err = submitProcs(ctx, addr, 1, map[string]string{"Owner": `"root"`}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	out["submit_as_root"] = rval
	out["submit_as_root_why"] = strings.Contains(reason, "only an administrator")

	// Its own job is its own.
	ads, err := cedartest.QueryJobs(ctx, addr, fmt.Sprintf("ClusterId == %d", cluster), "Owner")
	if err != nil || len(ads) != 1 {
		t.Fatalf("query of its own job: %v %v", ads, err)
	}
	if e, ok := ads[0].Lookup("Owner"); ok {
		out["own_job_owner_after"] = e.String()
	}

	b, _ := json.Marshal(out)
	fmt.Printf("RESULT %s\n", b)
}

// TestCEDARSubmitOutlivesTimeout submits over a session longer than the
// server's timeout, each request within it (as a big submit does), and
// it commits; a client that then idles past the timeout mid-transaction
// is cut off and leaves nothing queued.
func TestCEDARSubmitOutlivesTimeout(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
	n := start(t)
	addr := serveCEDARTimeout(t, n.s, timeout)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	slow := func(pause time.Duration, commit bool) (int64, error) {
		q, err := cedartest.DialQueue(ctx, addr)
		if err != nil {
			return 0, err
		}
		defer q.Close()
		cl, _, err := q.Call(cedartest.QNewCluster)
		if err != nil || cl < 0 {
			return 0, fmt.Errorf("NewCluster: %d %v", cl, err)
		}
		for i := 0; i < 4; i++ {
			time.Sleep(pause)
			if p, _, err := q.Call(cedartest.QNewProc, int(cl)); err != nil || p != int64(i) {
				return 0, fmt.Errorf("NewProc %d: %d %v", i, p, err)
			}
		}
		for _, a := range cedartest.BaseCluster {
			if rval, errno, err := q.Call(cedartest.QSetAttribute, int(cl), -1, a.Value, a.Name); err != nil || rval != 0 {
				return 0, fmt.Errorf("SetAttribute %s: %d errno %d %v", a.Name, rval, errno, err)
			}
		}
		if !commit {
			time.Sleep(pause)
		}
		rval, _, reason, err := q.Commit()
		if err == nil && rval != 0 {
			err = fmt.Errorf("commit: %d %s", rval, reason)
		}
		return rval, err
	}
	if _, err := slow(timeout/3, true); err != nil {
		t.Fatalf("a session of %v with a request every %v: %v", 4*timeout/3, timeout/3, err)
	}
	if got := queued(t, n); got != 4 {
		t.Fatalf("%d jobs queued, want 4", got)
	}
	if _, err := slow(timeout+300*time.Millisecond, false); err == nil {
		t.Fatal("a client idle past the timeout was still served")
	}
	time.Sleep(100 * time.Millisecond)
	if got := queued(t, n); got != 4 {
		t.Errorf("%d jobs queued after the idle client, want 4", got)
	}
}

// TestCEDARQueryOutlivesTimeout reads a job query's answer (32 ads of
// 1 MiB, more than the socket buffers hold) more slowly than the server's
// timeout allows for the whole, each ad within it: every ad arrives.
func TestCEDARQueryOutlivesTimeout(t *testing.T) {
	t.Parallel()
	// Long enough for one ad of 1 MiB to cross under the race detector on
	// a loaded machine (2 s was not, once).
	const timeout = 5 * time.Second
	n := start(t)
	addr := serveCEDARTimeout(t, n.s, timeout)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	big := map[string]string{"Big": `"` + strings.Repeat("x", schedd.MaxAttrValue-2) + `"`}
	if _, rval, reason, err := submitProcs(ctx, addr, 32, big, nil, false); err != nil || rval != 0 {
		t.Fatalf("submit: %d %q %v", rval, reason, err)
	}
	st, _, err := cedartest.Dial(ctx, addr, cedartest.CmdQueryJobAds)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Conn().Close()
	q := classad.NewAd()
	q.SetBool("Requirements", true)
	if err := st.PutAd(q, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.EndMessage(); err != nil {
		t.Fatal(err)
	}
	got := 0
	for {
		time.Sleep(timeout / 16)
		_ = st.SetDeadline(time.Now().Add(30 * time.Second))
		ad, err := st.GetAd()
		if err != nil {
			t.Fatalf("after %d ads: %v", got, err)
		}
		if err := st.EndRead(); err != nil {
			t.Fatal(err)
		}
		if v, ok := ad.EvalAttr("Owner").IntValue(); ok && v == 0 {
			break
		}
		got++
	}
	if got != 32 {
		t.Errorf("%d ads, want 32", got)
	}
}

// cmdQueryScheddHistory is HTCondor's QUERY_SCHEDD_HISTORY.
const cmdQueryScheddHistory = 515

// cedarQuery asks the schedd's CEDAR job query (or, with history, its
// history query) with the request ad q and returns how many job ads came
// and the last ad.
func cedarQuery(ctx context.Context, t *testing.T, addr string, q *classad.Ad, history bool) (int, *classad.Ad) {
	t.Helper()
	cmd := cedartest.CmdQueryJobAds
	if history {
		cmd = cmdQueryScheddHistory
	}
	st, _, err := cedartest.Dial(ctx, addr, cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Conn().Close()
	if err := st.PutAd(q, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.EndMessage(); err != nil {
		t.Fatal(err)
	}
	got := 0
	for {
		ad, err := st.GetAd()
		if err != nil {
			t.Fatalf("after %d ads: %v", got, err)
		}
		// The history's ads come in one message.
		v, ok := ad.EvalAttr("Owner").IntValue()
		if !history || ok && v == 0 {
			if err := st.EndRead(); err != nil {
				t.Fatal(err)
			}
		}
		if ok && v == 0 {
			return got, ad
		}
		got++
	}
}

// TestCEDARQueryLimitReadsFew asks HTCondor's job query with
// LimitResults, as `Schedd.query(limit=10)` does, of a queue of 5,000
// jobs: it gets the first 10 (or fewer when fewer match), and the schedd
// reads only what it sends, not the whole queue: the limited query
// allocates a small part of what the query of every job does.
func TestCEDARQueryLimitReadsFew(t *testing.T) {
	if schedd.RaceDetector {
		t.Skip("an allocation bound: run without the race detector (make allocs)")
	}
	const jobs = 5000
	n := start(t)
	addr := serveCEDAR(t, n.s)
	n.submitFile("alice", fmt.Sprintf("executable = /bin/true\nrequirements = false\nqueue %d\n", jobs))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	query := func(req, proj string, limit int64) *classad.Ad {
		q := classad.NewAd()
		e, err := classad.ParseExpr(req)
		if err != nil {
			t.Fatal(err)
		}
		q.Set("Requirements", e)
		if proj != "" {
			q.SetString("Projection", proj)
		}
		if limit > 0 {
			q.SetInt("LimitResults", limit)
		}
		return q
	}
	allocated := func(q *classad.Ad, history bool) (int, *classad.Ad, uint64) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		got, last := cedarQuery(ctx, t, addr, q, history)
		runtime.ReadMemStats(&after)
		return got, last, after.TotalAlloc - before.TotalAlloc
	}
	tests := []struct {
		name    string
		history bool
		req     string
		limit   int64
		want    int
	}{
		{"every job", false, "true", 0, jobs},
		{"ten", false, "true", 10, 10},
		{"ten of a constraint", false, `ProcId >= 4995 || Owner == "nobody"`, 10, 5},
		{"ten of an expression", false, `JobUniverse == 5 && ProcId % 2 == 1`, 10, 10},
		{"none match", false, "ProcId < 0", 10, 0},
		{"the history of every job", true, "true", 0, jobs},
		{"ten of the history", true, "true", 10, 10},
		{"ten of the history of an expression", true, `JobUniverse == 5 && ProcId % 2 == 1`, 10, 10},
	}
	all := map[bool]uint64{} // what the query of every job allocated, queue and history
	for _, tt := range tests {
		if tt.history && len(n.ids(&wire.QueryJobsRequest{})) > 0 {
			if _, err := n.c.Act(ctx, &wire.ActRequest{Action: wire.ActRemove, All: true}); err != nil {
				t.Fatal(err)
			}
		}
		t.Run(tt.name, func(t *testing.T) {
			q := query(tt.req, "ClusterId,ProcId,Owner", 0)
			if tt.limit > 0 && tt.history {
				q.SetInt("NumJobMatches", tt.limit)
			} else if tt.limit > 0 {
				q.SetInt("LimitResults", tt.limit)
			}
			got, last, bytes := allocated(q, tt.history)
			if got != tt.want {
				t.Errorf("%d ads, want %d", got, tt.want)
			}
			if m, _ := last.EvalAttr("NumJobMatches").IntValue(); m != int64(tt.want) {
				t.Errorf("NumJobMatches = %d, want %d", m, tt.want)
			}
			if _, ok := last.Lookup("ErrorCode"); ok {
				t.Errorf("the last ad carries an error: %s", last)
			}
			t.Logf("%d ads: %d KiB allocated", got, bytes>>10)
			if tt.limit == 0 {
				all[tt.history] = bytes
			} else if a := all[tt.history]; a > 0 && bytes > a/10 {
				t.Errorf("a query of %d of %d jobs allocated %d KiB, the query of every job %d KiB: it reads them all", tt.limit, jobs, bytes>>10, a>>10)
			}
		})
	}
}
