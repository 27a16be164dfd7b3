package schedd

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/cedar"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/internal/asuser"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// msg is one request's payload as HTCondor's client codes it in the
// clear: integers in 8 big-endian bytes, strings NUL-terminated, a byte
// for the flags.
func msg(num int, args ...any) []byte {
	var b []byte
	putInt := func(v int64) { b = binary.BigEndian.AppendUint64(b, uint64(v)) }
	putInt(int64(num))
	for _, a := range args {
		switch v := a.(type) {
		case int:
			putInt(int64(v))
		case string:
			b = append(append(b, v...), 0)
		case byte:
			b = append(b, v)
		case []byte:
			b = append(b, v...)
		default:
			panic(a)
		}
	}
	return b
}

// packets frames payloads as one message each, in packets of at most
// cedar.DefaultMaxPacket bytes.
func packets(payloads ...[]byte) []byte {
	var out []byte
	for _, p := range payloads {
		for {
			n, end := len(p), byte(1)
			if n > cedar.DefaultMaxPacket {
				n, end = cedar.DefaultMaxPacket, 0
			}
			out = append(out, end)
			out = binary.BigEndian.AppendUint32(out, uint32(n))
			out = append(out, p[:n]...)
			if p = p[n:]; end == 1 {
				break
			}
		}
	}
	return out
}

// discardConn drops what is written to it.
type discardConn struct{ net.Conn }

func (discardConn) Write(b []byte) (int, error) { return len(b), nil }

// reading returns a stream that reads raw and drops what it writes.
func reading(raw []byte) *cedar.Stream {
	a, b := net.Pipe()
	b.Close()
	return cedar.NewStream(discardConn{a}, bytes.NewReader(raw), cedar.Limits{})
}

// decode reads one request the way serveQmgmt does.
func decode(raw []byte) (*qRequest, error) {
	st := reading(raw)
	num, err := st.GetInt32()
	if err != nil {
		return nil, err
	}
	return readRequest(st, int(num))
}

// encode codes a decoded request back into its message.
func encode(r *qRequest) []byte {
	switch r.num {
	case qSetEffectiveOwner:
		return msg(r.num, r.owner)
	case qSetAllowProtectedAttrChanges, qGetCapabilities:
		return msg(r.num, int(r.arg))
	case qNewProc, qDestroyCluster:
		return msg(r.num, r.cluster)
	case qSetAttribute:
		return msg(r.num, r.cluster, r.proc, r.value, r.name)
	case qSetAttribute2:
		return msg(r.num, r.cluster, r.proc, r.value, r.name, byte(r.flags))
	case qSetAttributeByConstraint:
		return msg(r.num, r.constraint, r.value, r.name)
	case qSetAttributeByConstraint2:
		return msg(r.num, r.constraint, r.value, r.name, byte(r.flags))
	case qCommitTransaction:
		return msg(r.num, int(r.flags))
	case qGetAttributeFloat, qGetAttributeInt, qGetAttributeString, qGetAttributeExpr:
		return msg(r.num, r.cluster, r.proc, r.name)
	case qGetJobAd:
		return msg(r.num, r.cluster, r.proc)
	case qGetJobByConstraint:
		return msg(r.num, r.constraint)
	case qGetNextJob:
		return msg(r.num, int(r.arg))
	case qGetNextJobByConstraint:
		return msg(r.num, int(r.arg), r.constraint)
	case qGetAllJobsByConstraint:
		return msg(r.num, r.constraint, r.value)
	}
	return msg(r.num)
}

func TestReadRequest(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 2<<20)
	tests := []struct {
		name string
		raw  []byte
		want *qRequest
		err  string
	}{
		{"InitializeConnection", msg(qInitializeConnection), &qRequest{num: qInitializeConnection, known: true}, ""},
		{"InitializeReadOnlyConnection", msg(qInitializeReadOnlyConnection), &qRequest{num: qInitializeReadOnlyConnection, known: true}, ""},
		{"CloseSocket", msg(qCloseSocket), &qRequest{num: qCloseSocket, known: true}, ""},
		{"BeginTransaction", msg(qBeginTransaction), &qRequest{num: qBeginTransaction, known: true}, ""},
		{"AbortTransaction", msg(qAbortTransaction), &qRequest{num: qAbortTransaction, known: true}, ""},
		{"NewCluster", msg(qNewCluster), &qRequest{num: qNewCluster, known: true}, ""},
		{"NewProc", msg(qNewProc, 12), &qRequest{num: qNewProc, cluster: 12, known: true}, ""},
		{"DestroyCluster", msg(qDestroyCluster, 12), &qRequest{num: qDestroyCluster, cluster: 12, known: true}, ""},
		{"SetEffectiveOwner", msg(qSetEffectiveOwner, "alice"), &qRequest{num: qSetEffectiveOwner, owner: "alice", known: true}, ""},
		{"SetAllowProtectedAttrChanges", msg(qSetAllowProtectedAttrChanges, 1), &qRequest{num: qSetAllowProtectedAttrChanges, arg: 1, known: true}, ""},
		{"GetCapabilities", msg(qGetCapabilities, 0), &qRequest{num: qGetCapabilities, known: true}, ""},
		{"SetAttribute", msg(qSetAttribute, 3, -1, `"x"`, "Cmd"),
			&qRequest{num: qSetAttribute, cluster: 3, proc: -1, value: `"x"`, name: "Cmd", known: true}, ""},
		{"SetAttribute2", msg(qSetAttribute2, 3, 4, "1", "RequestCpus", byte(2)),
			&qRequest{num: qSetAttribute2, cluster: 3, proc: 4, value: "1", name: "RequestCpus", flags: 2, known: true}, ""},
		{"SetAttributeByConstraint", msg(qSetAttributeByConstraint, "ClusterId == 3", "1", "X"),
			&qRequest{num: qSetAttributeByConstraint, constraint: "ClusterId == 3", value: "1", name: "X", known: true}, ""},
		{"SetAttributeByConstraint2", msg(qSetAttributeByConstraint2, "true", "1", "X", byte(0)),
			&qRequest{num: qSetAttributeByConstraint2, constraint: "true", value: "1", name: "X", known: true}, ""},
		{"CommitTransaction", msg(qCommitTransaction, 0), &qRequest{num: qCommitTransaction, known: true}, ""},
		{"CommitTransactionNoFlags", msg(qCommitTransactionNoFlags), &qRequest{num: qCommitTransactionNoFlags, known: true}, ""},
		{"a request not served, with arguments", msg(10014, 3, 0), &qRequest{num: 10014}, ""},
		{"GetAttributeInt", msg(qGetAttributeInt, 3, 1, "JobStatus"), &qRequest{num: qGetAttributeInt, cluster: 3, proc: 1, name: "JobStatus", known: true}, ""},
		{"GetAttributeString", msg(qGetAttributeString, 3, 1, "Owner"), &qRequest{num: qGetAttributeString, cluster: 3, proc: 1, name: "Owner", known: true}, ""},
		{"GetAttributeExpr", msg(qGetAttributeExpr, 3, 1, "Cmd"), &qRequest{num: qGetAttributeExpr, cluster: 3, proc: 1, name: "Cmd", known: true}, ""},
		{"GetAttributeFloat", msg(qGetAttributeFloat, 3, 1, "X"), &qRequest{num: qGetAttributeFloat, cluster: 3, proc: 1, name: "X", known: true}, ""},
		{"GetJobAd", msg(qGetJobAd, 3, 1), &qRequest{num: qGetJobAd, cluster: 3, proc: 1, known: true}, ""},
		{"GetJobByConstraint", msg(qGetJobByConstraint, "true"), &qRequest{num: qGetJobByConstraint, constraint: "true", known: true}, ""},
		{"GetNextJob", msg(qGetNextJob, 1), &qRequest{num: qGetNextJob, arg: 1, known: true}, ""},
		{"GetNextJobByConstraint", msg(qGetNextJobByConstraint, 1, "true"), &qRequest{num: qGetNextJobByConstraint, arg: 1, constraint: "true", known: true}, ""},
		{"GetAllJobsByConstraint", msg(qGetAllJobsByConstraint, "true", "Owner\nJobStatus"),
			&qRequest{num: qGetAllJobsByConstraint, constraint: "true", value: "Owner\nJobStatus", known: true}, ""},
		{"GetJobAd without its proc", msg(qGetJobAd, 3), nil, "proc"},
		{"GetNextJobByConstraint without its constraint", msg(qGetNextJobByConstraint, 1), nil, "constraint"},
		{"a value over the attribute limit still decodes", msg(qSetAttribute, 3, 0, big, "X"),
			&qRequest{num: qSetAttribute, cluster: 3, value: big, name: "X", known: true}, ""},

		{"NewProc without its cluster", msg(qNewProc), nil, "cluster"},
		{"NewProc with a cluster over 32 bits", msg(qNewProc, 1<<40), nil, "does not fit 32 bits"},
		{"NewProc cut inside its integer", msg(qNewProc, 12)[:12], nil, "cluster"},
		{"SetAttribute without its name", msg(qSetAttribute, 3, 0, "1"), nil, "attribute name"},
		{"SetAttribute with a name without its NUL", append(msg(qSetAttribute, 3, 0, "1"), "Name"...), nil, "attribute name"},
		{"SetAttribute2 without its flags", msg(qSetAttribute2, 3, 0, "1", "X"), nil, "flags"},
		{"SetAttributeByConstraint without its value", msg(qSetAttributeByConstraint, "true"), nil, "value"},
		{"SetEffectiveOwner without its owner", msg(qSetEffectiveOwner), nil, "owner"},
		{"CommitTransaction without its flags", msg(qCommitTransaction), nil, "flags"},
		{"NewCluster with bytes after it", msg(qNewCluster, 7), nil, "unread bytes"},
		{"SetAttribute with bytes after it", msg(qSetAttribute, 3, 0, "1", "X", 9), nil, "unread bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decode(packets(tc.raw))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// FuzzReadRequest decodes any message as any request: no panic, and a
// request that decodes codes back to a message that decodes the same.
func FuzzReadRequest(f *testing.F) {
	for _, m := range [][]byte{
		msg(qNewCluster), msg(qNewProc, 1), msg(qSetAttribute, 1, 0, "1", "X"),
		msg(qSetAttribute2, 1, -1, `"a b"`, "Y", byte(2)), msg(qSetAttributeByConstraint2, "true", "1", "X", byte(0)),
		msg(qSetEffectiveOwner, "bob"), msg(qCommitTransaction, 0), msg(qGetCapabilities, 0), msg(10014, 1, 0),
		msg(qGetAttributeExpr, 1, 0, "Cmd"), msg(qGetNextJobByConstraint, 1, "true"), msg(qGetAllJobsByConstraint, "true", ""),
	} {
		f.Add(m)
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		r, err := decode(packets(payload))
		if err != nil {
			return
		}
		again, err := decode(packets(encode(r)))
		if !r.known {
			if err != nil || again.num != r.num || again.known {
				t.Fatalf("request %d not served: re-decoded as %+v, %v", r.num, again, err)
			}
			return
		}
		if err != nil {
			// A string holding no NUL always codes back; a flags
			// byte too.
			t.Fatalf("%+v does not decode again: %v", r, err)
		}
		if !reflect.DeepEqual(r, again) {
			t.Fatalf("decoded %+v, then %+v", r, again)
		}
	})
}

// newTestSchedd is a schedd over a job queue in a temporary directory.
func newTestSchedd(t testing.TB) *Schedd {
	t.Helper()
	cfg := config.New(config.Options{Host: config.HostInfo{FullHostname: "submit.example.org", Hostname: "submit",
		IPAddress: "127.0.0.1", CPUs: 1, MemoryMB: 1024}})
	if err := cfg.ParseInto("test.cfg", []byte("UID_DOMAIN = example.org\n")); err != nil {
		t.Fatal(err)
	}
	s, err := New(context.Background(), Options{Config: cfg, Name: "schedd@submit", Address: "submit.example.org:9618",
		DataDir: t.TempDir(), Account: func(string) (*asuser.Account, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	// Its start has filed the idle jobs (none) before a test looks.
	<-s.idleLoaded
	return s
}

// queueJob queues one held job of owner and returns its id.
func queueJob(t testing.TB, s *Schedd, owner string) jobqueue.JobID {
	t.Helper()
	ctx := context.Background()
	nc, err := s.NewCluster(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Submit(ctx, &wire.SubmitRequest{Cluster: nc.Cluster, Jobs: []wire.Ad{{
		"Owner": `"` + owner + `"`, "Cmd": `"/bin/true"`, "JobUniverse": "5", "RequestCpus": "1", "JobStatus": "5"}}})
	if err != nil {
		t.Fatal(err)
	}
	return jobqueue.JobID{Cluster: nc.Cluster}
}

// session is a queue-management session of user over a loopback
// connection, driven one request at a time.
type session struct {
	t      *testing.T
	m      *qmgmt
	client *cedar.Stream
	ctx    context.Context
}

func newSession(t *testing.T, s *Schedd, user string, readOnly bool) *session {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv := <-acc
	t.Cleanup(func() { c.Close(); srv.Close() })
	ctx := auth.WithClaims(context.Background(), &auth.Claims{Subject: user, Scopes: []auth.Scope{auth.Read, auth.Write}})
	m := &qmgmt{s: s, st: cedar.NewStream(srv, nil, cedar.Limits{}), readOnly: readOnly, who: callerOf(ctx)}
	return &session{t: t, m: m, client: cedar.NewStream(c, nil, cedar.Limits{}), ctx: ctx}
}

// reply is what a request answered.
type reply struct {
	none         bool // no reply (a request sent without ack, or one that answers nothing)
	rval, errno  int64
	ad           map[string]string
	sessionEnded bool
}

// do sends one request, serves it, and reads its reply.
func (s *session) do(raw []byte) reply {
	s.t.Helper()
	if _, err := s.client.Conn().Write(packets(raw)); err != nil {
		s.t.Fatal(err)
	}
	num, err := s.m.st.GetInt32()
	if err != nil {
		s.t.Fatal(err)
	}
	if err := s.m.request(s.ctx, int(num)); err != nil {
		if errors.Is(err, errQuit) {
			return reply{none: true, sessionEnded: true}
		}
		s.t.Fatalf("request %d: %v", num, err)
	}
	var r reply
	switch {
	case num == qGetCapabilities:
	case num == qInitializeConnection, num == qInitializeReadOnlyConnection:
		return reply{none: true}
	case num == qSetAttribute2 && raw[len(raw)-1]&setAttributeNoAck != 0:
		return reply{none: true}
	default:
		if r.rval, err = s.client.GetInt(); err != nil {
			s.t.Fatal(err)
		}
		if r.rval < 0 {
			if r.errno, err = s.client.GetInt(); err != nil {
				s.t.Fatal(err)
			}
		}
	}
	if num == qGetCapabilities || num == qCommitTransaction || num == qCommitTransactionNoFlags || (num == qNewCluster && r.rval < 0) {
		ad, err := s.client.GetAd()
		if err != nil {
			s.t.Fatal(err)
		}
		r.ad = map[string]string{}
		for _, n := range ad.Names() {
			e, _ := ad.Lookup(n)
			r.ad[n] = e.String()
		}
	}
	if err := s.client.EndRead(); err != nil {
		s.t.Fatal(err)
	}
	return r
}

// TestQmgmtRequests runs every request kind in a session of user alice,
// with bob's job in the queue: what each answers, and that the session
// goes on after a refused one.
func TestQmgmtRequests(t *testing.T) {
	t.Parallel()
	s := newTestSchedd(t)
	bob := queueJob(t, s, "bob")
	se := newSession(t, s, "alice", false)
	long := strings.Repeat("N", MaxAttrName+1)
	huge := `"` + strings.Repeat("v", MaxAttrValue) + `"`
	steps := []struct {
		name string
		raw  []byte
		want reply
	}{
		{"initialize", msg(qInitializeConnection), reply{none: true}},
		{"capabilities", msg(qGetCapabilities, 0), reply{ad: map[string]string{"LateMaterialize": "true"}}},
		{"act as oneself", msg(qSetEffectiveOwner, "alice"), reply{}},
		{"act as bob", msg(qSetEffectiveOwner, "bob"), reply{rval: -1, errno: eACCES}},
		{"change protected attributes", msg(qSetAllowProtectedAttrChanges, 1), reply{rval: -1, errno: eACCES}},
		{"NewProc with no cluster", msg(qNewProc, 99), reply{rval: -1, errno: eINVAL}},
		{"NewCluster", msg(qNewCluster), reply{rval: 2}},
		{"a second NewCluster", msg(qNewCluster), reply{rval: -1, errno: eINVAL, ad: map[string]string{"ErrorCode": "22"}}},
		{"NewProc", msg(qNewProc, 2), reply{rval: 0}},
		{"NewProc of another cluster", msg(qNewProc, 3), reply{rval: -1, errno: eINVAL}},
		{"set on the cluster ad", msg(qSetAttribute, 2, -1, `"/bin/true"`, "Cmd"), reply{}},
		{"set on the proc", msg(qSetAttribute, 2, 0, "1", "RequestCpus"), reply{}},
		{"set without ack", msg(qSetAttribute2, 2, 0, "5", "JobStatus", byte(setAttributeNoAck)), reply{none: true}},
		{"set on a proc not made", msg(qSetAttribute, 2, 5, "1", "X"), reply{rval: -1, errno: eNOENT}},
		{"a value that does not parse", msg(qSetAttribute, 2, 0, "((((", "X"), reply{rval: -1, errno: eINVAL}},
		{"a name with a space", msg(qSetAttribute, 2, 0, "1", "A B"), reply{rval: -1, errno: eINVAL}},
		{"an empty name", msg(qSetAttribute, 2, 0, "1", ""), reply{rval: -1, errno: eINVAL}},
		{"a name over the limit", msg(qSetAttribute, 2, 0, "1", long), reply{rval: -1, errno: eTOOBIG}},
		{"a value over the limit", msg(qSetAttribute, 2, 0, huge, "X"), reply{rval: -1, errno: eTOOBIG}},
		{"edit bob's job", msg(qSetAttribute, bob.Cluster, 0, "1", "X"), reply{rval: -1, errno: eACCES}},
		{"edit bob's cluster ad", msg(qSetAttribute, bob.Cluster, -1, "1", "X"), reply{rval: -1, errno: eINVAL}},
		{"edit a job not queued", msg(qSetAttribute, 999, 0, "1", "X"), reply{rval: -1, errno: eNOENT}},
		{"edit bob's jobs by constraint", msg(qSetAttributeByConstraint, `Owner == "bob"`, "1", "X"), reply{rval: -1, errno: eACCES}},
		{"edit every job", msg(qSetAttributeByConstraint2, "true", "1", "X", byte(0)), reply{rval: -1, errno: eACCES}},
		{"edit one's own jobs (none yet)", msg(qSetAttributeByConstraint, `Owner == "alice"`, "1", "X"), reply{}},
		{"a constraint that does not parse", msg(qSetAttributeByConstraint, "((((", "1", "X"), reply{rval: -1, errno: eINVAL}},
		{"a request not served (FirstAttribute)", msg(10014, 1, 0), reply{rval: -1, errno: eINVAL}},
		{"SetJobFactory of a cluster with procs", msg(qSetJobFactory, 2, 100, "", "queue 1000\n"), reply{rval: -1, errno: eINVAL}},
		{"GetAttributeFloat, not served", msg(qGetAttributeFloat, bob.Cluster, 0, "RequestCpus"), reply{rval: -1, errno: eINVAL}},
		{"the session goes on", msg(qNewProc, 2), reply{rval: 1}},
		{"DestroyCluster of another", msg(qDestroyCluster, 3), reply{rval: -1, errno: eINVAL}},
		{"DestroyCluster", msg(qDestroyCluster, 2), reply{}},
		{"commit of nothing", msg(qCommitTransaction, 0), reply{}},
		{"NewCluster after", msg(qNewCluster), reply{rval: 3}},
		{"NewProc after", msg(qNewProc, 3), reply{rval: 0}},
		{"set Cmd", msg(qSetAttribute, 3, -1, `"/bin/true"`, "Cmd"), reply{}},
		{"set Owner undefined", msg(qSetAttribute, 3, -1, "undefined", "Owner"), reply{}},
		{"abort", msg(qAbortTransaction), reply{}},
		{"commit after abort", msg(qCommitTransactionNoFlags), reply{}},
		{"close", msg(qCloseSocket), reply{none: true, sessionEnded: true}},
	}
	for _, st := range steps {
		got := se.do(st.raw)
		// The wanted ad lists the attributes that matter.
		for k, v := range st.want.ad {
			if got.ad[k] != v {
				t.Errorf("%s: the reply's %s is %q, want %q (%v)", st.name, k, got.ad[k], v, got.ad)
			}
		}
		got.ad, st.want.ad = nil, nil
		if !reflect.DeepEqual(got, st.want) {
			t.Errorf("%s: got %+v, want %+v", st.name, got, st.want)
		}
	}
	jobs, err := s.q.Query(context.Background(), jobqueue.AllJobs(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].ID != bob {
		t.Errorf("queue after the session: %v", jobs)
	}
	if _, ok := jobs[0].Ad["X"]; ok {
		t.Errorf("bob's job was edited: %v", jobs[0].Ad)
	}

	ro := newSession(t, s, "alice", true)
	if got := ro.do(msg(qNewCluster)); got.rval != -1 || got.errno != eACCES {
		t.Errorf("NewCluster in a read-only session: %+v", got)
	}
	if got := ro.do(msg(qSetAttributeByConstraint, "true", "1", "X")); got.rval != -1 || got.errno != eACCES {
		t.Errorf("edit in a read-only session: %+v", got)
	}
}

// TestQmgmtLimits checks the bounds of one transaction at their edges:
// 100,000 procs, 4,096 attributes of one ad, the bytes it holds; past
// each, the request is refused with E2BIG, except a proc: the procs past
// the limit are numbered and dropped, and the whole transaction fails at
// its commit with the reason.
func TestQmgmtLimits(t *testing.T) {
	t.Parallel()
	s := newTestSchedd(t)
	se := newSession(t, s, "alice", false)
	c := se.do(msg(qNewCluster)).rval
	// The procs before the last allowed one, made as NewProc makes them.
	se.m.procs = make([]wire.Ad, MaxTransactionProcs-1)
	for i := range se.m.procs {
		se.m.procs[i] = wire.Ad{}
	}
	if got := se.do(msg(qNewProc, int(c))); got.rval != MaxTransactionProcs-1 {
		t.Fatalf("proc %d: %+v", MaxTransactionProcs, got)
	}
	// One more is numbered, its attributes dropped, and the commit
	// refuses the whole transaction with the reason, which HTCondor's
	// Python client raises (NewProc's answer carries none).
	for i := range 3 {
		if got := se.do(msg(qNewProc, int(c))); got.rval != int64(MaxTransactionProcs+i) {
			t.Fatalf("proc %d: %+v", MaxTransactionProcs+1+i, got)
		}
		// Asked for an answer, an attribute of a dropped proc gets the
		// transaction's failure (HTCondor's client sends them unanswered).
		if got := se.do(msg(qSetAttribute, int(c), MaxTransactionProcs+i, "1", "Dropped")); got.rval != -1 || got.errno != eTOOBIG {
			t.Fatalf("an attribute of proc %d: %+v", MaxTransactionProcs+1+i, got)
		}
	}
	if len(se.m.procs) != MaxTransactionProcs {
		t.Fatalf("%d procs held, want %d: those past the limit are dropped", len(se.m.procs), MaxTransactionProcs)
	}
	got := se.do(msg(qCommitTransaction, 0))
	if got.rval != -1 || !strings.Contains(got.ad["ErrorReason"], "more than 100000 procs") {
		t.Fatalf("commit over the proc limit: %+v", got)
	}

	c = se.do(msg(qNewCluster)).rval
	se.do(msg(qNewProc, int(c)))
	for i := range MaxTransactionAttrs {
		if got := se.do(msg(qSetAttribute2, int(c), 0, "1", "A"+string(rune('a'+i%26))+strings.Repeat("x", i/26), byte(0))); got.rval != 0 {
			t.Fatalf("attribute %d: %+v", i+1, got)
		}
	}
	if got := se.do(msg(qSetAttribute, int(c), 0, "2", "Aa")); got.rval != 0 {
		t.Errorf("setting an attribute again at the limit: %+v", got)
	}
	if got := se.do(msg(qSetAttribute, int(c), 0, "1", "OneTooMany")); got.rval != -1 || got.errno != eTOOBIG {
		t.Errorf("attribute %d: %+v", MaxTransactionAttrs+1, got)
	}
	if got := se.do(msg(qSetAttribute, int(c), -1, "1", "OnTheClusterAd")); got.rval != 0 {
		t.Errorf("the cluster ad has its own limit: %+v", got)
	}

	// The bytes one transaction holds.
	se.m.size = MaxTransactionBytes - 4
	if got := se.do(msg(qSetAttribute, int(c), -1, "1", "Four")); got.rval != -1 || got.errno != eTOOBIG {
		t.Errorf("over the transaction's bytes: %+v", got)
	}
	if got := se.do(msg(qSetAttribute, int(c), -1, "1", "Thr")); got.rval != 0 {
		t.Errorf("at the transaction's bytes: %+v", got)
	}
	se.do(msg(qAbortTransaction))
	if se.m.size != 0 {
		t.Errorf("an aborted transaction still counts %d bytes", se.m.size)
	}
}

// FuzzQmgmtSession runs a whole queue-management session of user alice
// on any bytes, against a real schedd holding bob's job: no panic, the
// session ends, and whatever it queued is alice's while bob's job is left
// as it was.
func FuzzQmgmtSession(f *testing.F) {
	s := newTestSchedd(f)
	bob := queueJob(f, s, "bob")
	f.Add(packets(msg(qNewCluster), msg(qNewProc, 2), msg(qSetAttribute, 2, -1, `"/bin/true"`, "Cmd"),
		msg(qSetAttribute, 2, 0, `"bob"`, "Owner"), msg(qCommitTransaction, 0)))
	f.Add(packets(msg(qNewCluster), msg(qNewProc, 2), msg(qSetAttribute2, 2, -1, `"/bin/true"`, "Cmd", byte(2)),
		msg(qSetAttribute2, 2, 0, "1", "RequestCpus", byte(2)), msg(qCommitTransactionNoFlags)))
	f.Add(packets(msg(qSetAttribute, 1, 0, "1", "X"), msg(qSetAttributeByConstraint, "true", "2", "Y"), msg(qCommitTransaction, 0)))
	f.Add(packets(msg(10014, 1, 0), msg(qSetEffectiveOwner, "bob"), msg(qCloseSocket)))
	f.Add(packets(msg(qGetNextJobByConstraint, 1, "true"), msg(qGetNextJob, 0), msg(qGetAllJobsByConstraint, "true", "Owner"),
		msg(qGetAttributeInt, 1, 0, "JobStatus"), msg(qGetJobAd, 1, 0)))
	ctx := auth.WithClaims(context.Background(), &auth.Claims{Subject: "alice", Scopes: []auth.Scope{auth.Read, auth.Write}})
	f.Fuzz(func(t *testing.T, raw []byte) {
		_ = s.serveQmgmt(ctx, reading(raw), false, 0)
		jobs, err := s.q.Query(context.Background(), jobqueue.AllJobs(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			switch {
			case j.ID == bob:
				if j.Owner != "bob" || len(j.Ad) == 0 {
					t.Fatalf("bob's job changed: %+v", j)
				}
				for _, a := range []string{"X", "Y"} {
					if _, ok := j.Ad[a]; ok {
						t.Fatalf("bob's job was edited: %v", j.Ad)
					}
				}
			case j.Owner != "alice":
				t.Fatalf("alice's session queued %s owned by %q", j.ID, j.Owner)
			}
		}
	})
}

// TestQmgmtReads reads bob's jobs in alice's read-only session: a job's
// ad, its attributes as an integer, a string and an expression, a scan by
// constraint, and every job at once with a projection.
func TestQmgmtReads(t *testing.T) {
	t.Parallel()
	s := newTestSchedd(t)
	first := queueJob(t, s, "bob")
	second := queueJob(t, s, "bob")
	se := newSession(t, s, "alice", true)
	c := se.client
	send := func(raw []byte) {
		t.Helper()
		if _, err := c.Conn().Write(packets(raw)); err != nil {
			t.Fatal(err)
		}
		num, err := se.m.st.GetInt32()
		if err != nil {
			t.Fatal(err)
		}
		if err := se.m.request(se.ctx, int(num)); err != nil {
			t.Fatal(err)
		}
	}
	result := func() (int64, int64) {
		t.Helper()
		rval, err := c.GetInt()
		if err != nil {
			t.Fatal(err)
		}
		var errno int64
		if rval < 0 {
			if errno, err = c.GetInt(); err != nil {
				t.Fatal(err)
			}
		}
		return rval, errno
	}
	end := func() {
		t.Helper()
		if err := c.EndRead(); err != nil {
			t.Fatal(err)
		}
	}
	// adReply reads a reply that carries one job's ad and returns its
	// ClusterId, or the errno.
	adReply := func(what string, raw []byte) (int64, int64) {
		t.Helper()
		send(raw)
		rval, errno := result()
		if rval < 0 {
			end()
			return -1, errno
		}
		ad, err := c.GetAd()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		end()
		if o, _ := ad.EvalAttr("Owner").StringValue(); o != "bob" {
			t.Errorf("%s: Owner %q", what, o)
		}
		cl, _ := ad.EvalAttr("ClusterId").IntValue()
		return cl, 0
	}
	if cl, _ := adReply("GetJobAd", msg(qGetJobAd, first.Cluster, 0)); cl != int64(first.Cluster) {
		t.Errorf("GetJobAd: cluster %d", cl)
	}
	if _, errno := adReply("GetJobAd of a job not queued", msg(qGetJobAd, 99, 0)); errno != eNOENT {
		t.Errorf("GetJobAd of a job not queued: errno %d", errno)
	}
	if _, errno := adReply("GetJobAd of a cluster ad", msg(qGetJobAd, first.Cluster, -1)); errno != eNOENT {
		t.Errorf("GetJobAd of a cluster ad: errno %d", errno)
	}
	if cl, _ := adReply("GetJobByConstraint", msg(qGetJobByConstraint, fmt.Sprintf("ClusterId == %d", second.Cluster))); cl != int64(second.Cluster) {
		t.Errorf("GetJobByConstraint: cluster %d", cl)
	}
	if _, errno := adReply("GetJobByConstraint of none", msg(qGetJobByConstraint, "false")); errno != eNOENT {
		t.Errorf("GetJobByConstraint of none: errno %d", errno)
	}
	if _, errno := adReply("GetJobByConstraint that does not parse", msg(qGetJobByConstraint, "((((")); errno != eINVAL {
		t.Errorf("GetJobByConstraint that does not parse: errno %d", errno)
	}

	// A scan: both jobs, then ENOENT; a job removed mid-scan is passed over.
	var scanned []int64
	for init := 1; ; init = 0 {
		cl, errno := adReply("GetNextJobByConstraint", msg(qGetNextJobByConstraint, init, `Owner == "bob"`))
		if cl < 0 {
			if errno != eNOENT {
				t.Errorf("end of the scan: errno %d", errno)
			}
			break
		}
		scanned = append(scanned, cl)
		if len(scanned) > 2 {
			t.Fatal("the scan does not end")
		}
	}
	if !reflect.DeepEqual(scanned, []int64{int64(first.Cluster), int64(second.Cluster)}) {
		t.Errorf("scanned %v", scanned)
	}
	if cl, _ := adReply("GetNextJob", msg(qGetNextJob, 1)); cl != int64(first.Cluster) {
		t.Errorf("GetNextJob: cluster %d", cl)
	}
	if _, err := s.q.Remove(context.Background(), jobqueue.ClusterJobs(second.Cluster), "gone"); err != nil {
		t.Fatal(err)
	}
	if _, errno := adReply("GetNextJob past a removed job", msg(qGetNextJob, 0)); errno != eNOENT {
		t.Errorf("GetNextJob past a removed job: errno %d", errno)
	}

	// Attributes.
	send(msg(qGetAttributeInt, first.Cluster, 0, "jobstatus"))
	if rval, _ := result(); rval != 0 {
		t.Fatalf("GetAttributeInt: %d", rval)
	}
	if v, _ := c.GetInt(); v != 5 {
		t.Errorf("GetAttributeInt JobStatus = %d", v)
	}
	end()
	send(msg(qGetAttributeString, first.Cluster, 0, "Owner"))
	if rval, _ := result(); rval != 0 {
		t.Fatalf("GetAttributeString: %d", rval)
	}
	if v, _ := c.GetString(); v != "bob" {
		t.Errorf("GetAttributeString Owner = %q", v)
	}
	end()
	send(msg(qGetAttributeExpr, first.Cluster, 0, "Cmd"))
	if rval, _ := result(); rval != 0 {
		t.Fatalf("GetAttributeExpr: %d", rval)
	}
	if v, _ := c.GetString(); v != `"/bin/true"` {
		t.Errorf("GetAttributeExpr Cmd = %q", v)
	}
	end()
	for _, tc := range []struct {
		raw   []byte
		errno int64
	}{
		{msg(qGetAttributeInt, first.Cluster, 0, "Owner"), eINVAL},
		{msg(qGetAttributeString, first.Cluster, 0, "JobStatus"), eINVAL},
		{msg(qGetAttributeExpr, first.Cluster, 0, "NoSuchAttribute"), eNOENT},
		{msg(qGetAttributeExpr, 99, 0, "Cmd"), eNOENT},
	} {
		send(tc.raw)
		if rval, errno := result(); rval != -1 || errno != tc.errno {
			t.Errorf("%v: %d errno %d, want errno %d", tc.raw[:8], rval, errno, tc.errno)
		}
		end()
	}

	// Every job at once, projected.
	queueJob(t, s, "carol")
	send(msg(qGetAllJobsByConstraint, "true", "Owner\nJobStatus"))
	var owners []string
	for {
		rval, errno := result()
		if rval < 0 {
			if errno != eNOENT {
				t.Errorf("end of GetAllJobsByConstraint: errno %d", errno)
			}
			break
		}
		ad, err := c.GetAd()
		if err != nil {
			t.Fatal(err)
		}
		o, _ := ad.EvalAttr("Owner").StringValue()
		owners = append(owners, o)
		if ad.Len() != 2 {
			t.Errorf("projected ad %v", ad)
		}
	}
	end()
	if !reflect.DeepEqual(owners, []string{"bob", "carol"}) {
		t.Errorf("GetAllJobsByConstraint owners %v", owners)
	}
}

// TestQmgmtEditProtected checks that the attributes the schedd keeps
// itself are refused to an edit by the job's owner, one job or by
// constraint, whatever their case, and that others are not.
func TestQmgmtEditProtected(t *testing.T) {
	t.Parallel()
	s := newTestSchedd(t)
	mine := queueJob(t, s, "alice")
	se := newSession(t, s, "alice", false)
	for _, c := range []struct {
		attr, value string
		refused     bool
	}{
		{"ClusterId", "7", true},
		{"procid", "7", true},
		{"Owner", `"bob"`, true},
		{"User", `"bob@example"`, true},
		{"GlobalJobId", `"x"`, true},
		{"JobStatus", "2", true},
		{"MyType", `"Machine"`, true},
		{"TargetType", `"Job"`, true},
		{"PondLocalPid", "1", true},
		{"pondlocalstarttime", "1", true},
		{"PONDCLAIMID", `"c"`, true},
		{"PondStartd", `"127.0.0.1:1"`, true},
		{"RequestMemory", "64", false},
		{"Ponder", "1", true}, // every Pond... name is the schedd's
		{"Pon", "1", false},
	} {
		got := se.do(msg(qSetAttribute, mine.Cluster, mine.Proc, c.value, c.attr))
		if refused := got.rval == -1 && got.errno == eACCES; refused != c.refused {
			t.Errorf("edit of %s: got %+v, want refused %v", c.attr, got, c.refused)
		}
		got = se.do(msg(qSetAttributeByConstraint, `Owner == "alice"`, c.value, c.attr))
		if refused := got.rval == -1 && got.errno == eACCES; refused != c.refused {
			t.Errorf("edit of %s by constraint: got %+v, want refused %v", c.attr, got, c.refused)
		}
	}
	se.do(msg(qCommitTransaction, 0))
	j, err := s.q.Get(context.Background(), mine)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := j.Ad["PondLocalPid"]; ok || j.Ad["RequestMemory"] != "64" {
		t.Errorf("after the session the job's ad is %v: want RequestMemory 64 and no PondLocalPid", j.Ad)
	}
}
