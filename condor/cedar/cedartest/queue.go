package cedartest

import (
	"context"
	"fmt"
	"strings"

	"github.com/pond-htc/pond/condor/cedar"
	"github.com/pond-htc/pond/condor/classad"
)

// Schedd commands and queue-management requests, as HTCondor numbers
// them (condor_commands.h, qmgmt_constants.h).
const (
	CmdActOnJobs    = 478
	CmdQueryJobAds  = 516
	CmdQmgmtWrite   = 1112
	QNewCluster     = 10002
	QNewProc        = 10003
	QSetAttribute   = 10006
	QSetAttribute2  = 10027
	QCloseSocket    = 10028
	QSetOwner       = 10030 // SetEffectiveOwner
	QCommit         = 10031 // CommitTransaction
	SetAttrNoAck    = byte(2)
	ActionRemove    = 3
	ResultSuccess   = 1 // result_total_1
	ResultForbidden = 5 // result_total_5: permission denied
)

// Queue is the client side of a queue-management session
// (QMGMT_WRITE_CMD), one request at a time.
type Queue struct {
	Stream *cedar.Stream
}

// DialQueue opens a queue-management session with the schedd at addr.
func DialQueue(ctx context.Context, addr string) (*Queue, error) {
	st, _, err := Dial(ctx, addr, CmdQmgmtWrite)
	if err != nil {
		return nil, err
	}
	return &Queue{Stream: st}, nil
}

// Close closes the connection without ending the session first, as a
// client that dies does.
func (q *Queue) Close() error { return q.Stream.Conn().Close() }

// Send sends one request: its number and its arguments (int, string, or
// byte for flags), and ends the message.
func (q *Queue) Send(num int, args ...any) error {
	if err := q.Stream.PutInt(int64(num)); err != nil {
		return err
	}
	for _, a := range args {
		var err error
		switch v := a.(type) {
		case int:
			err = q.Stream.PutInt(int64(v))
		case string:
			err = q.Stream.PutString(v)
		case byte:
			err = q.Stream.PutChar(v)
		default:
			err = fmt.Errorf("cedartest: request argument of type %T", a)
		}
		if err != nil {
			return err
		}
	}
	return q.Stream.EndMessage()
}

// Result reads a reply's rval, and its errno when rval is negative.
func (q *Queue) Result() (rval, errno int64, err error) {
	if rval, err = q.Stream.GetInt(); err != nil {
		return 0, 0, err
	}
	if rval < 0 {
		if errno, err = q.Stream.GetInt(); err != nil {
			return 0, 0, err
		}
	}
	return rval, errno, nil
}

// Call sends a request that is answered with rval (and errno) and reads
// the answer; a failed NewCluster's ad is read and dropped.
func (q *Queue) Call(num int, args ...any) (rval, errno int64, err error) {
	if err := q.Send(num, args...); err != nil {
		return 0, 0, err
	}
	if rval, errno, err = q.Result(); err != nil {
		return 0, 0, err
	}
	if num == QNewCluster && rval < 0 {
		if _, err := q.Stream.GetAd(); err != nil {
			return 0, 0, err
		}
	}
	return rval, errno, q.Stream.EndRead()
}

// Commit commits the transaction and returns its result and, when it
// failed, the schedd's reason.
func (q *Queue) Commit() (rval, errno int64, reason string, err error) {
	if err := q.Send(QCommit, 0); err != nil {
		return 0, 0, "", err
	}
	if rval, errno, err = q.Result(); err != nil {
		return 0, 0, "", err
	}
	ad, err := q.Stream.GetAd()
	if err != nil {
		return 0, 0, "", err
	}
	reason, _ = ad.EvalAttr("ErrorReason").StringValue()
	return rval, errno, reason, q.Stream.EndRead()
}

// Attr is one attribute as the protocol carries it: a name and an
// expression in old ClassAd syntax.
type Attr struct{ Name, Value string }

// Submit describes a submit the way htcondor2.Schedd.submit sends it.
type Submit struct {
	Procs   int
	Cluster []Attr             // the cluster ad (proc -1), sent once
	Proc    func(i int) []Attr // proc i's own attributes
	// Drop closes the connection before the commit.
	Drop bool
}

// BaseCluster is a minimal cluster ad: /bin/true, held, the Owner left
// for the schedd to fill in from the authenticated user.
var BaseCluster = []Attr{{"Cmd", `"/bin/true"`}, {"JobUniverse", "5"}, {"RequestCpus", "1"}, {"JobStatus", "5"},
	{"Owner", "undefined"}, {"HoldReason", `"submitted held"`}}

// Run submits sub to the schedd at addr in one transaction: NewCluster,
// then for each proc NewProc (answered) and its attributes sent without
// ack (SetAttribute2), the cluster ad with proc 0, and the commit unless
// sub.Drop. It returns the cluster and the commit's rval and reason.
func (sub Submit) Run(ctx context.Context, addr string) (cluster int, rval int64, reason string, err error) {
	q, err := DialQueue(ctx, addr)
	if err != nil {
		return 0, 0, "", err
	}
	defer q.Close()
	cl, errno, err := q.Call(QNewCluster)
	if err != nil || cl < 0 {
		return 0, 0, "", fmt.Errorf("NewCluster: %d, errno %d, %v", cl, errno, err)
	}
	cluster = int(cl)
	for i := 0; i < sub.Procs; i++ {
		p, errno, err := q.Call(QNewProc, cluster)
		if err != nil || p != int64(i) {
			return 0, 0, "", fmt.Errorf("NewProc %d: %d, errno %d, %v", i, p, errno, err)
		}
		if i == 0 {
			for _, a := range sub.Cluster {
				if err := q.Send(QSetAttribute2, cluster, -1, a.Value, a.Name, SetAttrNoAck); err != nil {
					return 0, 0, "", err
				}
			}
		}
		var own []Attr
		if sub.Proc != nil {
			own = sub.Proc(i)
		}
		for _, a := range own {
			if err := q.Send(QSetAttribute2, cluster, i, a.Value, a.Name, SetAttrNoAck); err != nil {
				return 0, 0, "", err
			}
		}
	}
	if sub.Drop {
		return cluster, 0, "", nil
	}
	rval, _, reason, err = q.Commit()
	return cluster, rval, reason, err
}

// Act sends ACT_ON_JOBS for the jobs ids names ("1.0,2") and confirms it
// when the schedd would act on some; it returns the schedd's result ad
// (result_total_N, TotalJobAds).
func Act(ctx context.Context, addr string, action int, ids, reason string) (*classad.Ad, error) {
	st, _, err := Dial(ctx, addr, CmdActOnJobs)
	if err != nil {
		return nil, err
	}
	defer st.Conn().Close()
	req := classad.NewAd()
	req.SetInt("JobAction", int64(action))
	req.SetString("ActionIds", ids)
	req.SetString("Reason", reason)
	if err := st.PutAd(req, nil); err != nil {
		return nil, err
	}
	if err := st.EndMessage(); err != nil {
		return nil, err
	}
	res, err := st.GetAd()
	if err != nil {
		return nil, err
	}
	if err := st.EndRead(); err != nil {
		return nil, err
	}
	if r, _ := res.EvalAttr("ActionResult").IntValue(); r == 1 {
		if err := st.PutInt(1); err != nil {
			return nil, err
		}
		if err := st.EndMessage(); err != nil {
			return nil, err
		}
		if _, err := st.GetInt(); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// QueryJobs sends QUERY_JOB_ADS with constraint and projection and
// returns the ads.
func QueryJobs(ctx context.Context, addr, constraint string, projection ...string) ([]*classad.Ad, error) {
	st, _, err := Dial(ctx, addr, CmdQueryJobAds)
	if err != nil {
		return nil, err
	}
	defer st.Conn().Close()
	req := classad.NewAd()
	if err := req.SetExpr("Requirements", constraint); err != nil {
		return nil, err
	}
	req.SetString("Projection", strings.Join(projection, "\n"))
	if err := st.PutAd(req, nil); err != nil {
		return nil, err
	}
	if err := st.EndMessage(); err != nil {
		return nil, err
	}
	var out []*classad.Ad
	for {
		ad, err := st.GetAd()
		if err != nil {
			return nil, err
		}
		if err := st.EndRead(); err != nil {
			return nil, err
		}
		if v, ok := ad.EvalAttr("Owner").IntValue(); ok && v == 0 {
			if e, ok := ad.EvalAttr("ErrorString").StringValue(); ok {
				return out, fmt.Errorf("query refused: %s", e)
			}
			return out, nil
		}
		out = append(out, ad)
	}
}
