package schedd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"

	"strconv"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/cedar"
	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/submit"
	"github.com/pond-htc/pond/condor/wire"
)

// Requests of HTCondor's queue-management protocol (qmgmt_constants.h).
const (
	qInitializeConnection         = 10001
	qNewCluster                   = 10002
	qNewProc                      = 10003
	qDestroyCluster               = 10004
	qSetAttribute                 = 10006
	qCommitTransactionNoFlags     = 10007
	qGetAttributeFloat            = 10008
	qGetAttributeInt              = 10009
	qGetAttributeString           = 10010
	qGetAttributeExpr             = 10011
	qGetNextJob                   = 10013
	qGetJobAd                     = 10018
	qGetJobByConstraint           = 10019
	qGetNextJobByConstraint       = 10020
	qSetAttributeByConstraint     = 10021
	qInitializeReadOnlyConnection = 10022
	qBeginTransaction             = 10023
	qAbortTransaction             = 10024
	qSetAttribute2                = 10027
	qCloseSocket                  = 10028
	qGetAllJobsByConstraint       = 10026
	qSetEffectiveOwner            = 10030
	qCommitTransaction            = 10031
	qSetAttributeByConstraint2    = 10032
	qSetAllowProtectedAttrChanges = 10035
	qGetCapabilities              = 10036
	qSetJobFactory                = 10037
	qSendMaterializeData          = 10039
)

// setAttributeNoAck is the SetAttribute flag that asks for no reply; an
// error then fails the transaction at its commit.
const setAttributeNoAck = 1 << 1

// errno values the protocol answers with.
const (
	eNOENT  = 2
	eACCES  = 13
	eINVAL  = 22
	eTOOBIG = 7 // E2BIG
)

// Bounds of one queue-management transaction.
const (
	MaxTransactionProcs = 100000  // procs in one submit
	MaxTransactionAttrs = 4096    // attributes of one job or cluster ad
	MaxTransactionEdits = 100000  // jobs edited in one transaction
	MaxAttrName         = 1024    // bytes of one attribute's name
	MaxAttrValue        = 1 << 20 // bytes of one attribute's value
	// MaxTransactionBytes bounds the names and values one transaction
	// holds until its commit.
	MaxTransactionBytes = 256 << 20
)

// qmgmt is one queue-management connection: a transaction that builds a
// new cluster (NewCluster, NewProc, SetAttribute) and edits existing
// jobs (SetAttribute, SetAttributeByConstraint), all committed together
// by CommitTransaction or dropped by AbortTransaction or a closed
// connection.
type qmgmt struct {
	s        *Schedd
	st       *cedar.Stream
	readOnly bool
	who      caller

	cluster   int     // the cluster being built; 0 when none
	clusterAd wire.Ad // its attributes (proc -1)
	procs     []wire.Ad
	dropped   int // procs numbered after the transaction failed, not kept (newProc)
	edits     map[jobqueue.JobID]wire.Ad
	size      int         // bytes of names and values held
	failed    error       // the first error of a SetAttribute sent without ack
	owner     string      // the owner SetEffectiveOwner named; "" for the caller
	queued    *queueCount // the queue, counted at the transaction's first NewProc
	factory   *htFactory  // the job factory of the cluster (SetJobFactory, SendMaterializeData); nil when none

	scan []jobqueue.JobID // the jobs GetNextJob* has still to answer

	idle   time.Duration // how long a request may take to arrive (0: no bound set here)
	end    time.Time     // the session's end, when hasEnd
	hasEnd bool
}

// errQuit ends the connection without an error (CloseSocket).
var errQuit = errors.New("client closed the queue-management session")

// qError is a refused request: its errno and why.
type qError struct {
	errno int
	msg   string
}

func (e *qError) Error() string { return e.msg }

func refuse(errno int, format string, args ...any) error {
	return &qError{errno: errno, msg: fmt.Sprintf(format, args...)}
}

func errnoOf(err error) int64 {
	var q *qError
	if errors.As(err, &q) {
		return int64(q.errno)
	}
	return eINVAL
}

// serveQmgmt runs the request loop of QMGMT_READ_CMD or QMGMT_WRITE_CMD
// until the client closes the session. Nothing a transaction built
// reaches the queue unless the client commits it.
//
// With idle set, the client has that long to send each request, and the
// schedd as long as ctx allows to answer it: a big submit's commit may
// take longer than a request may wait.
func (s *Schedd) serveQmgmt(ctx context.Context, st *cedar.Stream, readOnly bool, idle time.Duration) error {
	m := &qmgmt{s: s, st: st, readOnly: readOnly, who: callerOf(ctx), idle: idle}
	m.end, m.hasEnd = ctx.Deadline()
	for {
		m.deadline(idle)
		num, err := st.GetInt32()
		if err != nil {
			if errors.Is(err, io.EOF) {
				if m.cluster != 0 || len(m.edits) > 0 {
					s.log.Info("queue-management connection closed before its commit; the transaction is dropped", "cluster", m.cluster)
				}
				return nil
			}
			return fmt.Errorf("reading a queue-management request: %w", err)
		}
		if err := m.request(ctx, int(num)); err != nil {
			err = fmt.Errorf("request %d: %w", num, err)
			if errors.Is(err, errQuit) {
				return nil
			}
			return err
		}
	}
}

// deadline bounds the stream's next reads and writes by d from now, and
// by the session's end; d = 0 leaves only the session's end. Without
// idle nothing is set.
func (m *qmgmt) deadline(d time.Duration) {
	if m.idle <= 0 {
		return
	}
	var t time.Time
	if d > 0 {
		t = time.Now().Add(d)
	}
	if m.hasEnd && (t.IsZero() || t.After(m.end)) {
		t = m.end
	}
	_ = m.st.SetDeadline(t)
}

// reply sends rval, and errno when rval is negative.
func (m *qmgmt) reply(rval int64, err error) error {
	if err := m.st.PutInt(rval); err != nil {
		return err
	}
	if rval < 0 {
		if err := m.st.PutInt(errnoOf(err)); err != nil {
			return err
		}
	}
	return m.st.EndMessage()
}

// qRequest is one decoded queue-management request: its number and
// the arguments its kind carries.
type qRequest struct {
	num        int
	cluster    int    // NewProc, DestroyCluster, SetAttribute
	proc       int    // SetAttribute
	name       string // SetAttribute, SetAttributeByConstraint
	value      string // SetAttribute, SetAttributeByConstraint
	constraint string // SetAttributeByConstraint
	owner      string // SetEffectiveOwner
	flags      int64  // SetAttribute2, SetAttributeByConstraint2, CommitTransaction
	arg        int64  // SetAllowProtectedAttrChanges, GetCapabilities, SetJobFactory's limit
	data       []byte // SendMaterializeData's item rows
	known      bool   // a request this schedd serves
}

// readRequest reads the arguments of request num from st, through the end
// of its message. A request of a kind not served is read to its end and
// returned with known false, so that the session can refuse it and go on.
func readRequest(st *cedar.Stream, num int) (*qRequest, error) {
	r := &qRequest{num: num, known: true}
	var err error
	getInt := func(what string, v *int) {
		if err != nil {
			return
		}
		var i int32
		if i, err = st.GetInt32(); err != nil {
			err = fmt.Errorf("%s: %w", what, err)
		}
		*v = int(i)
	}
	// getInt32 is getInt for a field that is an int64.
	getInt32 := func(what string, v *int64) {
		var i int
		getInt(what, &i)
		*v = int64(i)
	}
	getInt64 := func(what string, v *int64) {
		if err != nil {
			return
		}
		if *v, err = st.GetInt(); err != nil {
			err = fmt.Errorf("%s: %w", what, err)
		}
	}
	getString := func(what string, v *string) {
		if err != nil {
			return
		}
		if *v, err = st.GetString(); err != nil {
			err = fmt.Errorf("%s: %w", what, err)
		}
	}
	getFlags := func() {
		if err != nil {
			return
		}
		// The flags travel as one byte.
		var c byte
		if c, err = st.GetChar(); err != nil {
			err = fmt.Errorf("flags: %w", err)
		}
		r.flags = int64(c)
	}
	switch num {
	case qInitializeConnection, qInitializeReadOnlyConnection, qCloseSocket,
		qBeginTransaction, qAbortTransaction, qNewCluster:
	case qSetEffectiveOwner:
		getString("owner", &r.owner)
	case qSetAllowProtectedAttrChanges, qGetCapabilities:
		getInt64("argument", &r.arg)
	case qNewProc, qDestroyCluster:
		getInt("cluster", &r.cluster)
	case qSetAttribute, qSetAttribute2:
		getInt("cluster", &r.cluster)
		getInt("proc", &r.proc)
		getString("value", &r.value)
		getString("attribute name", &r.name)
		if num == qSetAttribute2 {
			getFlags()
		}
	case qSetAttributeByConstraint, qSetAttributeByConstraint2:
		getString("constraint", &r.constraint)
		getString("value", &r.value)
		getString("attribute name", &r.name)
		if num == qSetAttributeByConstraint2 {
			getFlags()
		}
	case qCommitTransaction:
		getInt64("flags", &r.flags)
	case qCommitTransactionNoFlags:
	case qGetAttributeFloat, qGetAttributeInt, qGetAttributeString, qGetAttributeExpr:
		getInt("cluster", &r.cluster)
		getInt("proc", &r.proc)
		getString("attribute name", &r.name)
	case qGetJobAd:
		getInt("cluster", &r.cluster)
		getInt("proc", &r.proc)
	case qGetJobByConstraint:
		getString("constraint", &r.constraint)
	case qGetNextJob:
		getInt64("initScan", &r.arg)
	case qGetNextJobByConstraint:
		getInt64("initScan", &r.arg)
		getString("constraint", &r.constraint)
	case qGetAllJobsByConstraint:
		getString("constraint", &r.constraint)
		getString("projection", &r.value)
	case qSetJobFactory:
		getInt("cluster", &r.cluster)
		getInt32("max_materialize", &r.arg)
		getString("digest file name", &r.name)
		getString("submit digest", &r.value)
	case qSendMaterializeData:
		getInt("cluster", &r.cluster)
		getInt32("flags", &r.flags)
		if err == nil {
			if r.data, err = st.GetRest(MaxFactoryItems); err != nil {
				err = fmt.Errorf("item data: %w", err)
			}
		}
	default:
		r.known = false
		// Read and drop the rest: the session refuses it and goes on.
		if err := st.EndRead(); err != nil && !errors.Is(err, cedar.ErrTrailing) {
			return nil, err
		}
		return r, nil
	}
	if err != nil {
		return nil, fmt.Errorf("request %d: %w", num, err)
	}
	if err := st.EndRead(); err != nil {
		return nil, fmt.Errorf("request %d: %w", num, err)
	}
	return r, nil
}

func (m *qmgmt) request(ctx context.Context, num int) error {
	r, err := readRequest(m.st, num)
	if err != nil {
		return err
	}
	// The answer may take longer than a request may wait (a commit).
	m.deadline(0)
	st := m.st
	switch num {
	case qInitializeConnection, qInitializeReadOnlyConnection:
		return nil

	case qCloseSocket:
		return errQuit

	case qSetEffectiveOwner:
		if r.owner != "" && r.owner != m.who.name && !m.who.admin {
			return m.reply(-1, refuse(eACCES, "%s may not act as %s", m.who.name, r.owner))
		}
		m.owner = r.owner
		return m.reply(0, nil)

	case qSetAllowProtectedAttrChanges:
		if !m.who.admin {
			return m.reply(-1, refuse(eACCES, "only an administrator changes protected attributes"))
		}
		return m.reply(0, nil)

	case qGetCapabilities:
		caps := classad.NewAd()
		caps.SetBool("LateMaterialize", true)
		if err := st.PutAd(caps, nil); err != nil {
			return err
		}
		return st.EndMessage()

	case qBeginTransaction, qAbortTransaction:
		m.abort()
		return m.reply(0, nil)

	case qNewCluster:
		return m.newCluster(ctx)

	case qNewProc:
		return m.newProc(ctx, r)

	case qDestroyCluster:
		if m.cluster == 0 || r.cluster != m.cluster {
			return m.reply(-1, refuse(eINVAL, "cluster %d is not being submitted here", r.cluster))
		}
		m.cluster, m.clusterAd, m.procs, m.dropped, m.size, m.queued, m.factory = 0, nil, nil, 0, 0, nil, nil
		return m.reply(0, nil)

	case qSetAttribute, qSetAttribute2:
		if r.flags&setAttributeNoAck != 0 && m.failed != nil {
			// The commit refuses the transaction whatever it is
			// told now: nothing is kept, as HTCondor's schedd.
			return nil
		}
		err := m.setAttribute(ctx, r.cluster, r.proc, r.name, r.value)
		if r.flags&setAttributeNoAck != 0 {
			if err != nil {
				m.fail(err)
			}
			return nil
		}
		if err != nil {
			return m.reply(-1, err)
		}
		return m.reply(0, nil)

	case qSetAttributeByConstraint, qSetAttributeByConstraint2:
		n, err := m.setByConstraint(ctx, r.constraint, r.name, r.value)
		if err != nil {
			return m.reply(-1, err)
		}
		return m.reply(int64(n), nil)

	case qCommitTransaction, qCommitTransactionNoFlags:
		return m.answerCommit(ctx)
	}
	if done, err := m.read(ctx, r); done {
		return err
	}
	switch num {
	case qSetJobFactory:
		return m.setJobFactory(r)
	case qSendMaterializeData:
		return m.sendMaterializeData(r)
	}
	// A request this schedd does not serve (GetAttributeFloat, spooling,
	// and others) is refused with EINVAL; the
	// session goes on, as the client may try another way.
	return m.reply(-1, refuse(eINVAL, "queue-management request %d is not served by this schedd", num))
}

// newCluster answers NewCluster: the number of the cluster this
// transaction submits.
func (m *qmgmt) newCluster(ctx context.Context) error {
	if m.readOnly {
		return m.newClusterFailed(refuse(eACCES, "a read-only session submits nothing"))
	}
	if m.cluster != 0 {
		return m.newClusterFailed(refuse(eINVAL, "cluster %d is already being submitted in this transaction", m.cluster))
	}
	resp, err := m.s.NewCluster(ctx, nil)
	if err != nil {
		return m.newClusterFailed(refuse(eINVAL, "%v", err))
	}
	m.cluster, m.clusterAd, m.procs, m.dropped, m.size, m.queued, m.factory = resp.Cluster, wire.Ad{}, nil, 0, 0, nil, nil
	return m.reply(int64(resp.Cluster), nil)
}

// newProc answers NewProc: the number of the next proc of the cluster.
// One more proc that would take the queue over MAX_JOBS_SUBMITTED,
// MAX_JOBS_PER_OWNER or MAX_JOBS_PER_SUBMISSION, or over the
// MaxTransactionProcs of one transaction, fails the transaction
// with the reason pondctl condor submit gives ("Number of submitted jobs
// would exceed ..."), which its commit answers: NewProc's answer carries
// a number and an errno and no reason, so that HTCondor's Python client
// (htcondor2's Schedd.submit) could only say "Schedd says -3" of
// HTCondor's NEWJOB_ERR code. The procs that follow are numbered and
// their attributes dropped unread until the commit refuses them all. The
// queue is counted once per transaction, at its first NewProc, and the
// transaction's procs added to it; the commit checks again, in order
// with other submits.
func (m *qmgmt) newProc(ctx context.Context, r *qRequest) error {
	switch {
	case m.cluster == 0 || r.cluster != m.cluster:
		return m.reply(-1, refuse(eINVAL, "cluster %d is not being submitted here", r.cluster))
	case m.factory != nil:
		return m.reply(-1, refuse(eINVAL, "cluster %d is a job factory (SetJobFactory): its procs are materialized by the schedd", r.cluster))
	}
	if len(m.procs)+m.dropped >= MaxTransactionProcs {
		// Refused at the commit, with its reason, as a queue limit is.
		m.fail(refuse(eTOOBIG, "more than %d procs in one submit", MaxTransactionProcs))
	}
	if m.failed == nil {
		if knob, err := m.procLimit(ctx); err != nil {
			return m.reply(-1, err)
		} else if knob != "" {
			m.s.log.Warn("queue-management submit refused", "user", m.who.name, "cluster", m.cluster, "err", queueLimitError(knob))
			m.fail(refuse(eINVAL, "%v", queueLimitError(knob)))
		}
	}
	if m.failed != nil {
		m.dropped++
		return m.reply(int64(len(m.procs)+m.dropped-1), nil)
	}
	m.procs = append(m.procs, wire.Ad{})
	return m.reply(int64(len(m.procs)-1), nil)
}

// procLimit names the queue limit one more proc of the transaction would
// break; "" when none.
func (m *qmgmt) procLimit(ctx context.Context) (string, error) {
	l := m.s.lim.Load()
	n := len(m.procs) + 1
	if n > l.maxPerSubmission {
		return "MAX_JOBS_PER_SUBMISSION", nil
	}
	if l.maxSubmitted == math.MaxInt32 && l.maxPerOwner == math.MaxInt32 {
		return "", nil
	}
	if m.queued == nil {
		counts, err := m.s.q.CountsByOwner(ctx)
		if err != nil {
			return "", fmt.Errorf("counting the queue's jobs: %w", err)
		}
		q := queueTally(counts)
		m.queued = &q
	}
	owner := m.owner
	if owner == "" {
		owner = m.who.name
	}
	owners := map[string]int{}
	if owner != "" {
		owners[owner] = n
	}
	return queueLimitKnob(l, *m.queued, owners, n, n), nil
}

// answerCommit commits the transaction and answers the client: 0, or -1,
// an errno and an ad with the reason. A commit of jobs that ask for what
// pond does not act on answers 0 with a WarningReason, as HTCondor's
// schedd answers a commit with warnings: its client shows it (the
// htcondor wheel's submit as a UserWarning, "Submit succeeded with
// warning").
func (m *qmgmt) answerCommit(ctx context.Context) error {
	st := m.st
	warning, err := m.commit(ctx)
	res := classad.NewAd()
	rval := int64(0)
	if err == nil && warning != "" {
		res.SetString("WarningReason", warning)
	}
	if err != nil {
		rval = -1
		res.SetInt("ErrorCode", 2)
		res.SetString("ErrorReason", err.Error())
		m.s.log.Warn("queue-management commit refused", "user", m.who.name, "err", err)
	}
	if err := st.PutInt(rval); err != nil {
		return err
	}
	if rval < 0 {
		if err := st.PutInt(errnoOf(err)); err != nil {
			return err
		}
	}
	if err := st.PutAd(res, nil); err != nil {
		return err
	}
	return st.EndMessage()
}

// newClusterFailed answers a NewCluster that failed: -1, errno and an ad
// with the reason.
func (m *qmgmt) newClusterFailed(err error) error {
	if err := m.st.PutInt(-1); err != nil {
		return err
	}
	if err := m.st.PutInt(errnoOf(err)); err != nil {
		return err
	}
	ad := classad.NewAd()
	ad.SetInt("ErrorCode", errnoOf(err))
	ad.SetString("ErrorReason", err.Error())
	if err := m.st.PutAd(ad, nil); err != nil {
		return err
	}
	return m.st.EndMessage()
}

func (m *qmgmt) fail(err error) {
	if m.failed == nil {
		m.failed = err
	}
}

// abort drops the transaction.
func (m *qmgmt) abort() {
	m.cluster, m.clusterAd, m.procs, m.dropped, m.edits, m.failed, m.size, m.queued, m.factory = 0, nil, nil, 0, nil, nil, 0, nil, nil
}

// hold counts n more bytes held by the transaction, refusing them past
// MaxTransactionBytes.
func (m *qmgmt) hold(n int) error {
	if m.size+n > MaxTransactionBytes {
		return refuse(eTOOBIG, "the transaction holds more than %d bytes of attributes", MaxTransactionBytes)
	}
	m.size += n
	return nil
}

// parseValue checks that an attribute's name and value (old ClassAd
// syntax, as the protocol carries it) make an attribute, and returns the
// value in the job queue's syntax.
func parseValue(name, value string) (string, error) {
	if len(name) > MaxAttrName {
		return "", refuse(eTOOBIG, "attribute name of %d bytes (limit %d)", len(name), MaxAttrName)
	}
	if name == "" || strings.ContainsAny(name, " \t\r\n=[]()\"") {
		return "", refuse(eINVAL, "attribute name %q is not valid", name)
	}
	if len(value) > MaxAttrValue {
		return "", refuse(eTOOBIG, "attribute %s: value of %d bytes (limit %d)", name, len(value), MaxAttrValue)
	}
	_, e, err := classad.ParseOldAttr(name + " = " + value)
	if err != nil {
		return "", refuse(eINVAL, "attribute %s: value %q does not parse: %v", name, value, err)
	}
	return e.String(), nil
}

// setAttribute records one attribute of the cluster being built (proc -1
// for the cluster ad) or an edit of a queued job.
func (m *qmgmt) setAttribute(ctx context.Context, cluster, proc int, name, value string) error {
	if m.readOnly {
		return refuse(eACCES, "a read-only session changes nothing")
	}
	v, err := parseValue(name, value)
	if err != nil {
		return err
	}
	if m.cluster != 0 && cluster == m.cluster {
		ad := m.clusterAd
		if proc >= 0 {
			if proc >= len(m.procs) && proc < len(m.procs)+m.dropped {
				// A proc numbered once the transaction failed.
				return m.failed
			}
			if proc >= len(m.procs) {
				return refuse(eNOENT, "job %d.%d was not made with NewProc", cluster, proc)
			}
			ad = m.procs[proc]
		}
		if _, ok := ad[name]; !ok && len(ad) >= MaxTransactionAttrs {
			return refuse(eTOOBIG, "job %d.%d has more than %d attributes", cluster, proc, MaxTransactionAttrs)
		}
		if err := m.hold(len(name) + len(v)); err != nil {
			return err
		}
		ad[name] = v
		return nil
	}
	if proc < 0 {
		return refuse(eINVAL, "cluster ad of %d: edit its jobs instead", cluster)
	}
	id := jobqueue.JobID{Cluster: cluster, Proc: proc}
	j, err := m.s.q.Get(ctx, id)
	if errors.Is(err, jobqueue.ErrNotFound) {
		return refuse(eNOENT, "job %s is not in the queue", id)
	} else if err != nil {
		return err
	}
	return m.edit(j, name, v)
}

// edit records an edit of a queued job the caller owns (any job, for an
// administrator).
func (m *qmgmt) edit(j jobqueue.Job, name, value string) error {
	if !m.who.admin && j.Owner != m.who.name {
		return refuse(eACCES, "job %s belongs to %q, not to %q", j.ID, j.Owner, m.who.name)
	}
	if protectedAttr(name) {
		return refuse(eACCES, "attribute %s of job %s cannot be edited", name, j.ID)
	}
	if m.edits == nil {
		m.edits = map[jobqueue.JobID]wire.Ad{}
	}
	if _, ok := m.edits[j.ID]; !ok && len(m.edits) >= MaxTransactionEdits {
		return refuse(eTOOBIG, "more than %d jobs edited in one transaction", MaxTransactionEdits)
	}
	if err := m.hold(len(name) + len(value)); err != nil {
		return err
	}
	if m.edits[j.ID] == nil {
		m.edits[j.ID] = wire.Ad{}
	}
	m.edits[j.ID][name] = value
	return nil
}

// protectedAttr reports whether a job's attribute name is the schedd's
// to keep, not anyone's to edit, an administrator's neither: those
// condor_qedit refuses (the job's identity, its owner, its status: hold,
// release and rm change that) and pond's own bookkeeping (Pond...), which
// the schedd acts on with its own rights: which process a local job's
// supervisor is, which claim and startd a job runs on. A pool's
// administrator is not the host's root.
func protectedAttr(name string) bool {
	switch strings.ToLower(name) {
	case "clusterid", "procid", "jobstatus", "owner", "user", "globaljobid", "mytype", "targettype":
		return true
	}
	return len(name) >= 4 && strings.EqualFold(name[:4], "pond")
}

// setByConstraint records an edit of every queued job constraint selects
// and returns how many. A job of another owner among them refuses the
// whole request, unless the caller is an administrator.
func (m *qmgmt) setByConstraint(ctx context.Context, constraint, name, value string) (int, error) {
	if m.readOnly {
		return 0, refuse(eACCES, "a read-only session changes nothing")
	}
	v, err := parseValue(name, value)
	if err != nil {
		return 0, err
	}
	sels, err := selectors(nil, constraint)
	if err != nil {
		return 0, refuse(eINVAL, "constraint %q: %v", constraint, err)
	}
	// A page of the queue at a time: the constraint sees each job's
	// whole ad, which is not kept.
	var jobs []jobqueue.Job
	err = m.s.q.Scan(ctx, sels[0], []string{}, func(j jobqueue.Job) error {
		j.Ad = nil
		jobs = append(jobs, j)
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, j := range jobs {
		if !m.who.admin && j.Owner != m.who.name {
			return 0, refuse(eACCES, "job %s belongs to %q, not to %q", j.ID, j.Owner, m.who.name)
		}
	}
	for _, j := range jobs {
		if err := m.edit(j, name, v); err != nil {
			return 0, err
		}
	}
	return len(jobs), nil
}

// commit submits the cluster the transaction built, each proc's ad over
// the cluster's, as one job-queue transaction (the schedd's Submit, which
// sets and checks the Owner), then applies the edits. A transaction with
// a failed SetAttribute commits nothing. It returns the warning for the
// client of a cluster that asks for what pond does not act on (see
// warnIgnored); "" when none.
func (m *qmgmt) commit(ctx context.Context) (string, error) {
	defer m.abort()
	if m.failed != nil {
		return "", m.failed
	}
	var ignored []submit.IgnoredAttr
	submitted := false
	if m.cluster != 0 && m.factory != nil {
		ignored = m.ignoredAttrs()
		if err := m.commitFactory(ctx); err != nil {
			return "", err
		}
		submitted = true
	} else if m.cluster != 0 && len(m.procs) > 0 {
		// Each job is made whole as the schedd stores it: the
		// transaction keeps the cluster's attributes once and each
		// proc's own.
		job := func(i int) wire.Ad {
			p := m.procs[i]
			j := make(wire.Ad, len(m.clusterAd)+len(p)+2)
			maps.Copy(j, m.clusterAd)
			maps.Copy(j, p)
			// HTCondor's submit leaves the Owner (and User) undefined
			// for the schedd to fill in from the authenticated user.
			for _, a := range []string{"Owner", "User"} {
				if strings.EqualFold(strings.TrimSpace(j[a]), "undefined") {
					delete(j, a)
				}
			}
			j["ClusterId"] = strconv.Itoa(m.cluster)
			j["ProcId"] = strconv.Itoa(i)
			return j
		}
		ignored = m.ignoredAttrs()
		if _, err := m.s.submitAds(ctx, m.cluster, len(m.procs), job); err != nil {
			return "", err
		}
		submitted = true
	}
	if len(m.edits) > 0 {
		all := make(map[jobqueue.JobID]jobqueue.Ad, len(m.edits))
		for id, attrs := range m.edits {
			all[id] = jobqueue.Ad(attrs)
		}
		if err := m.s.q.SetAttrsAll(ctx, all); err != nil {
			return "", fmt.Errorf("editing %d jobs: %w", len(all), err)
		}
	}
	if len(m.edits) > 0 {
		m.s.refileIdle(ctx, m.edits)
		m.s.markDirty()
	}
	if submitted && len(ignored) > 0 {
		who := m.owner
		if who == "" {
			who = m.who.name
		}
		return m.s.warnIgnored(ctx, who, m.cluster, ignored), nil
	}
	return "", nil
}

// setJobFactory answers SetJobFactory: the cluster being submitted is a
// job factory with this submit digest and max_materialize, as HTCondor's
// schedd takes it. The digest is checked here, and a digest that does
// not make jobs fails the commit with the reason (the client's commit
// shows it; SetJobFactory's answer carries only an errno).
func (m *qmgmt) setJobFactory(r *qRequest) error {
	switch {
	case m.readOnly:
		return m.reply(-1, refuse(eACCES, "a read-only session submits nothing"))
	case m.cluster == 0 || r.cluster != m.cluster:
		return m.reply(-1, refuse(eINVAL, "cluster %d is not being submitted here", r.cluster))
	case len(m.procs) > 0:
		return m.reply(-1, refuse(eINVAL, "cluster %d already has procs made with NewProc", r.cluster))
	case m.factory != nil && m.factory.text != "":
		return m.reply(-1, refuse(eINVAL, "cluster %d already has a job factory", r.cluster))
	case r.arg <= 0:
		m.fail(refuse(eINVAL, "cluster %d: a job factory's max_materialize must be above 0 (got %d)", r.cluster, r.arg))
		return m.reply(0, nil)
	}
	if err := m.hold(len(r.value)); err != nil {
		m.fail(err)
		return m.reply(0, nil)
	}
	if m.factory == nil {
		m.factory = &htFactory{}
	}
	m.factory.limit, m.factory.text = int(r.arg), r.value
	if r.value == "" {
		m.fail(refuse(eINVAL, "cluster %d: SetJobFactory with no submit digest", r.cluster))
		return m.reply(0, nil)
	}
	if _, err := translateDigest(r.value, m.factory.itemsFile); err != nil {
		m.fail(refuse(eINVAL, "cluster %d: %v", r.cluster, err))
	}
	return m.reply(0, nil)
}

// sendMaterializeData answers SendMaterializeData: the item rows of the
// factory's queue statement, kept with the transaction. It answers the
// name the digest's queue statement reads them from and their number
// (the client checks it against its own count).
func (m *qmgmt) sendMaterializeData(r *qRequest) error {
	answer := func(name string, rows int, err error) error {
		if err := m.st.PutString(name); err != nil {
			return err
		}
		if err := m.st.PutInt(int64(rows)); err != nil {
			return err
		}
		if err != nil {
			m.s.log.Warn("queue-management item data refused", "user", m.who.name, "cluster", r.cluster, "err", err)
			if err := m.st.PutInt(-1); err != nil {
				return err
			}
			if err := m.st.PutInt(errnoOf(err)); err != nil {
				return err
			}
			return m.st.EndMessage()
		}
		if err := m.st.PutInt(0); err != nil {
			return err
		}
		return m.st.EndMessage()
	}
	switch {
	case m.readOnly:
		return answer("", 0, refuse(eACCES, "a read-only session submits nothing"))
	case m.cluster == 0 || r.cluster != m.cluster:
		return answer("", 0, refuse(eINVAL, "cluster %d is not being submitted here", r.cluster))
	case len(m.procs) > 0:
		return answer("", 0, refuse(eINVAL, "cluster %d already has procs made with NewProc", r.cluster))
	case m.factory != nil && (m.factory.itemsFile != "" || m.factory.text != ""):
		return answer("", 0, refuse(eINVAL, "cluster %d: item data after its job factory or its item data", r.cluster))
	case strings.IndexByte(string(r.data), 0) >= 0:
		return answer("", 0, refuse(eINVAL, "cluster %d: item data holds a NUL byte", r.cluster))
	}
	if err := m.hold(len(r.data)); err != nil {
		return answer("", 0, err)
	}
	rows := countRows(r.data)
	if m.factory == nil {
		m.factory = &htFactory{}
	}
	m.factory.itemsFile, m.factory.items = itemsFileName(m.cluster), r.data
	return answer(m.factory.itemsFile, rows, nil)
}
