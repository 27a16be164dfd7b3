package schedd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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

// Queue-management requests as HTCondor's client numbers them.
const (
	qNewCluster        = 10002
	qNewProc           = 10003
	qSetAttribute      = 10006
	qSetAttribute2     = 10027
	qCloseSocket       = 10028
	qSetEffectiveOwner = 10030
	qCommitTransaction = 10031
)

// serveCEDAR serves the schedd's CEDAR commands on a loopback port, with
// FS granting what the agent grants: root administers, any other local
// user reads and manages its own jobs.
func serveCEDAR(t testing.TB, s *schedd.Schedd) string {
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
		Timeout:  5 * time.Minute,
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go srv.ServeConn(context.Background(), c, nil)
		}
	}()
	return ln.Addr().String()
}

// qclient speaks the client side of the queue-management protocol.
type qclient struct {
	st *cedar.Stream
}

func dialQmgmt(ctx context.Context, addr string) (*qclient, error) {
	st, _, err := cedartest.Dial(ctx, addr, schedd.CmdQmgmtWrite)
	if err != nil {
		return nil, err
	}
	return &qclient{st: st}, nil
}

func (c *qclient) close() { c.st.Conn().Close() }

// send sends one request: its number and arguments (int, string, or byte
// for the flags).
func (c *qclient) send(num int, args ...any) error {
	if err := c.st.PutInt(int64(num)); err != nil {
		return err
	}
	for _, a := range args {
		var err error
		switch v := a.(type) {
		case int:
			err = c.st.PutInt(int64(v))
		case string:
			err = c.st.PutString(v)
		case byte:
			err = c.st.PutChar(v)
		default:
			panic(fmt.Sprintf("argument %T", a))
		}
		if err != nil {
			return err
		}
	}
	return c.st.EndMessage()
}

// result reads a reply: rval, and errno when rval is negative.
func (c *qclient) result() (rval, errno int64, err error) {
	if rval, err = c.st.GetInt(); err != nil {
		return 0, 0, err
	}
	if rval < 0 {
		if errno, err = c.st.GetInt(); err != nil {
			return 0, 0, err
		}
	}
	return rval, errno, nil
}

// call sends a request and reads its reply, which ends its message.
func (c *qclient) call(num int, args ...any) (rval, errno int64, err error) {
	if err := c.send(num, args...); err != nil {
		return 0, 0, err
	}
	if rval, errno, err = c.result(); err != nil {
		return 0, 0, err
	}
	if num == qNewCluster && rval < 0 {
		if _, err := c.st.GetAd(); err != nil {
			return 0, 0, err
		}
	}
	return rval, errno, c.st.EndRead()
}

// commit commits the transaction and returns its result and reason.
func (c *qclient) commit() (rval, errno int64, reason string, err error) {
	if err := c.send(qCommitTransaction, 0); err != nil {
		return 0, 0, "", err
	}
	if rval, errno, err = c.result(); err != nil {
		return 0, 0, "", err
	}
	ad, err := c.st.GetAd()
	if err != nil {
		return 0, 0, "", err
	}
	reason, _ = ad.EvalAttr("ErrorReason").StringValue()
	return rval, errno, reason, c.st.EndRead()
}

// procAttrs are the attributes of proc i of a test submit.
func procAttrs(i int) [][2]string {
	return [][2]string{{"Args", strconv.Quote(strconv.Itoa(i))}, {"Item", strconv.Itoa(i)}}
}

// submitProcs builds a cluster of n procs the way htcondor2 does (the
// cluster ad on proc -1, then each proc's own attributes, sent without
// waiting for each reply: SetAttribute2 with no-ack), with bad(i) giving
// extra attributes for proc i, and commits it unless drop, in which case
// it closes the connection before the commit. It returns the cluster and
// the commit's result.
func submitProcs(ctx context.Context, addr string, n int, extra map[string]string, bad func(i int) [][2]string, drop bool) (int, int64, string, error) {
	c, err := dialQmgmt(ctx, addr)
	if err != nil {
		return 0, 0, "", err
	}
	defer c.close()
	cl, errno, err := c.call(qNewCluster)
	if err != nil || cl < 0 {
		return 0, 0, "", fmt.Errorf("NewCluster: %d errno %d %v", cl, errno, err)
	}
	cluster := int(cl)
	const noAck = byte(2)
	attrs := [][2]string{{"Cmd", `"/bin/true"`}, {"JobUniverse", "5"}, {"RequestCpus", "1"}, {"JobStatus", "5"},
		{"Owner", "undefined"}, {"HoldReason", `"submitted held"`}}
	for k, v := range extra {
		attrs = append(attrs, [2]string{k, v})
	}
	for i := 0; i < n; i++ {
		p, errno, err := c.call(qNewProc, cluster)
		if err != nil || p != int64(i) {
			return 0, 0, "", fmt.Errorf("NewProc %d: %d errno %d %v", i, p, errno, err)
		}
		set := procAttrs(i)
		if i == 0 {
			for _, a := range attrs {
				if err := c.send(qSetAttribute2, cluster, -1, a[1], a[0], noAck); err != nil {
					return 0, 0, "", err
				}
			}
		}
		if bad != nil {
			set = append(set, bad(i)...)
		}
		for _, a := range set {
			if err := c.send(qSetAttribute2, cluster, i, a[1], a[0], noAck); err != nil {
				return 0, 0, "", err
			}
		}
	}
	if drop {
		return cluster, 0, "", nil
	}
	rval, _, reason, err := c.commit()
	return cluster, rval, reason, err
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

	// Remove root's job.
	st, sess, err := cedartest.Dial(ctx, addr, schedd.CmdActOnJobs)
	if err != nil {
		t.Fatal(err)
	}
	out["user"] = sess.User
	act := classad.NewAd()
	act.SetInt("JobAction", 3)
	act.SetString("ActionIds", rootJob)
	act.SetString("RemoveReason", "not mine")
	if err := st.PutAd(act, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.EndMessage(); err != nil {
		t.Fatal(err)
	}
	res, err := st.GetAd()
	if err != nil {
		t.Fatal(err)
	}
	out["remove_denied"], _ = res.EvalAttr("result_total_5").IntValue()
	out["remove_success"], _ = res.EvalAttr("result_total_1").IntValue()
	if r, _ := res.EvalAttr("ActionResult").IntValue(); r == 1 {
		// The schedd would act: confirm, as HTCondor's client does.
		_ = st.EndRead()
		_ = st.PutInt(1)
		_ = st.EndMessage()
		_, _ = st.GetInt()
	}
	st.Conn().Close()

	// Edit root's job, act as root.
	c, err := dialQmgmt(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	id := strings.Split(rootJob, ".")
	rc, _ := strconv.Atoi(id[0])
	if _, out["edit_errno"], err = c.call(qSetAttribute, rc, 0, `"red"`, "Colour"); err != nil {
		t.Fatal(err)
	}
	if _, out["effective_owner"], err = c.call(qSetEffectiveOwner, "root"); err != nil {
		t.Fatal(err)
	}
	if rval, _, reason, err := c.commit(); err != nil || rval != 0 {
		t.Fatalf("commit of nothing: %d %q %v", rval, reason, err)
	}
	c.close()

	// Submit a job whose Owner is root.
	_, rval, reason, err = submitProcs(ctx, addr, 1, map[string]string{"Owner": `"root"`}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	out["submit_as_root"] = rval
	out["submit_as_root_why"] = strings.Contains(reason, "only an administrator")

	// Its own job is its own.
	q, _, err := cedartest.Dial(ctx, addr, schedd.CmdQueryJobAds)
	if err != nil {
		t.Fatal(err)
	}
	qa := classad.NewAd()
	qa.Set("Requirements", mustParse(t, fmt.Sprintf("ClusterId == %d", cluster)))
	qa.SetString("Projection", "Owner")
	if err := q.PutAd(qa, nil); err != nil {
		t.Fatal(err)
	}
	if err := q.EndMessage(); err != nil {
		t.Fatal(err)
	}
	ad, err := q.GetAd()
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := ad.Lookup("Owner"); ok {
		out["own_job_owner_after"] = e.String()
	}
	q.Conn().Close()

	b, _ := json.Marshal(out)
	fmt.Printf("RESULT %s\n", b)
}

func mustParse(t testing.TB, s string) classad.Expr {
	t.Helper()
	e, err := classad.ParseExpr(s)
	if err != nil {
		t.Fatal(err)
	}
	return e
}
