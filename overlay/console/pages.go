package console

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
)

// Page bounds.
const (
	// PageSize is how many slots or jobs a page shows.
	PageSize = 100
	// pageTimeout bounds the reads of one page.
	pageTimeout = 15 * time.Second
)

// view is what every page's template gets.
type view struct {
	Page    string
	Subject string
	Open    bool
	Self    *api.Self
	Now     time.Time
	// Errors are what could not be read, each saying which read failed.
	Errors []string
	Data   any
}

// fail notes a failed read of what.
func (v *view) fail(what string, err error) {
	v.Errors = append(v.Errors, what+": "+err.Error())
}

// reader makes the viewer's clients.
type reader struct {
	c      *Console
	token  string
	scopes string
	agent  *api.Client
}

// wire returns a client of the daemons at addr presenting the viewer's
// token.
func (rd reader) wire(addr string) *wire.Client {
	return wire.NewClient(addr, rd.token).WithTLS(rd.c.cfg.TLS)
}

// page serves the page name to a viewer, or sends the browser to the
// login page.
func (c *Console) page(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := c.viewer(r)
		if s == nil {
			toLogin(w, r)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), pageTimeout)
		defer cancel()
		addr := c.cfg.APIAddr()
		rd := reader{c: c, token: s.token, scopes: s.scopes, agent: api.NewClient(addr).WithTLS(c.cfg.TLS).WithToken(s.token)}
		v := &view{Page: name, Subject: s.subject, Open: c.cfg.Verifier == nil, Now: c.cfg.Now()}
		// The agent's self is the same for the viewers of the same
		// scopes; each viewer's token was verified above (viewer).
		var self *api.Self
		got, err := rd.shared(ctx, "self", func(ctx context.Context) (any, error) { return rd.agent.Self(ctx) })
		if err == nil {
			self = got.(*api.Self)
		}
		if err != nil {
			if unauthorized(err) {
				toLogin(w, r)
				return
			}
			v.fail("the agent ("+api.PathSelf+")", err)
		}
		v.Self = self
		switch name {
		case "overview":
			v.Data = rd.overview(ctx, v)
		case "slots":
			v.Data = rd.slots(ctx, v, r)
		case "history":
			v.Data = rd.history(ctx, v, r)
		case "jobs":
			v.Data = rd.jobs(ctx, v, r)
		case "sea":
			v.Data = rd.sea(ctx, v, r)
		case "flocks":
			v.Data = rd.flocks(ctx, v)
		case "factory":
			v.Data = rd.factory(ctx, v)
		case "failover":
			v.Data = rd.failover(ctx, v)
		case "credentials":
			v.Data = rd.credentials(ctx, v, s)
		}
		var buf bytes.Buffer
		if err := c.pages[name].Execute(&buf, v); err != nil {
			c.cfg.Logger.Warn("console: rendering a page", "page", name, "err", err)
			http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = buf.WriteTo(w)
	})
}

// unauthorized reports whether err is a 401: the viewer's token is no
// longer accepted.
func unauthorized(err error) bool {
	var we *wire.Error
	return errors.As(err, &we) && we.Status == http.StatusUnauthorized
}

// notServed reports whether err is a 404 or 409: the agent runs no such
// thing (a factory, fail-over, a central manager for flocks).
func notServed(err error) bool {
	var we *wire.Error
	return errors.As(err, &we) && (we.Status == http.StatusNotFound || we.Status == http.StatusConflict)
}

// collector returns a client of the pool's collector: the one of the
// agent's central manager, or its own.
func (rd reader) collector(v *view) *wire.Collector {
	addr := rd.c.cfg.APIAddr()
	if v.Self != nil && v.Self.CondorHost != "" {
		addr = v.Self.CondorHost
	}
	return rd.wire(addr).Collector()
}

// Slot is a row of the slots page.
type Slot struct {
	Name, Machine, State, Activity, JobID, Owner string
	Cpus, Memory                                 string
}

// Count is a named count.
type Count struct {
	Name string
	N    int
}

// slotsData is the slots page.
type slotsData struct {
	Total   int
	ByState []Count
	Slots   []Slot
	Start   int
	Prev    int
	Next    int // 0: no next page
	More    int // the rows after this page
	Matched int // the rows of the filter
	State   string
	Query   string
}

// slotSet is the pool's slots as one read of the collector gives them,
// by name.
type slotSet struct {
	rows    []Slot
	byState []Count
}

// matches reports whether a row holds q (case-insensitive) in its name,
// machine or owner.
func (s *Slot) matches(q string) bool {
	return q == "" || strings.Contains(strings.ToLower(s.Name), q) || strings.Contains(strings.ToLower(s.Machine), q) ||
		strings.Contains(strings.ToLower(s.Owner), q)
}

var slotAttrs = []string{"Name", "Machine", "State", "Activity", "JobId", "RemoteOwner", "RemoteUser", "Cpus", "Memory"}

// slotSet reads the pool's slots, shared among the viewers.
func (rd reader) slotSet(ctx context.Context, v *view) (*slotSet, error) {
	coll := rd.collector(v)
	got, err := rd.shared(ctx, "slots\x00"+coll.Addr(), func(ctx context.Context) (any, error) {
		ads, err := coll.Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeMachine, Projection: slotAttrs})
		if err != nil {
			return nil, err
		}
		set := &slotSet{rows: make([]Slot, 0, len(ads))}
		byState := map[string]int{}
		for _, ad := range ads {
			s := Slot{Name: str(ad, "Name"), Machine: str(ad, "Machine"), State: str(ad, "State"), Activity: str(ad, "Activity"),
				JobID: str(ad, "JobId"), Owner: str(ad, "RemoteOwner"), Cpus: str(ad, "Cpus"), Memory: str(ad, "Memory")}
			if s.Owner == "" {
				s.Owner = str(ad, "RemoteUser")
			}
			byState[s.State]++
			set.rows = append(set.rows, s)
		}
		sort.SliceStable(set.rows, func(i, j int) bool { return set.rows[i].Name < set.rows[j].Name })
		set.byState = counts(byState)
		return set, nil
	})
	if err != nil {
		return nil, err
	}
	return got.(*slotSet), nil
}

func (rd reader) slots(ctx context.Context, v *view, r *http.Request) *slotsData {
	q := r.URL.Query()
	d := &slotsData{Start: atoi(q.Get("start")), State: q.Get("state"), Query: strings.TrimSpace(q.Get("q")), Prev: -1}
	set, err := rd.slotSet(ctx, v)
	if err != nil {
		v.fail("the collector's slots", err)
		return d
	}
	d.Total, d.ByState = len(set.rows), set.byState
	lq := strings.ToLower(d.Query)
	d.Start = max(d.Start, 0)
	// One pass: the page's rows, and how many match in all.
	for i := range set.rows {
		s := &set.rows[i]
		if (d.State != "" && d.State != s.State) || !s.matches(lq) {
			continue
		}
		if d.Matched >= d.Start && len(d.Slots) < PageSize {
			d.Slots = append(d.Slots, *s)
		}
		d.Matched++
	}
	if d.Start >= d.Matched && d.Matched > 0 {
		// Past the end: the last page.
		d.Start = (d.Matched - 1) / PageSize * PageSize
		d.Slots = nil
		n := 0
		for i := range set.rows {
			s := &set.rows[i]
			if (d.State != "" && d.State != s.State) || !s.matches(lq) {
				continue
			}
			if n >= d.Start {
				d.Slots = append(d.Slots, *s)
			}
			n++
		}
	}
	if end := d.Start + len(d.Slots); end < d.Matched {
		d.Next, d.More = end, d.Matched-end
	}
	if d.Start > 0 {
		d.Prev = max(d.Start-PageSize, 0)
	}
	return d
}

// Job is a row of the jobs page.
type Job struct {
	ID, Owner, Status, Cmd, Host, Hold string
	Submitted                          time.Time
}

// OwnerCount counts one owner's jobs by state.
type OwnerCount struct {
	Owner                      string
	Idle, Running, Held, Other int
}

// Schedd is a schedd of the pool.
type Schedd struct{ Name, Addr string }

// jobsData is the jobs page.
type jobsData struct {
	Schedds []Schedd
	Schedd  string
	Owner   string
	Status  string
	Owners  []OwnerCount
	Total   OwnerCount
	Jobs    []Job
	After   string
	Next    string // "": no next page
}

// jobStatus names HTCondor's JobStatus values.
var jobStatus = map[int]string{1: "idle", 2: "running", 3: "removed", 4: "completed", 5: "held", 6: "transferring", 7: "suspended"}

// errPageFull ends a streamed query once a page is full.
var errPageFull = errors.New("page full")

func (rd reader) jobs(ctx context.Context, v *view, r *http.Request) *jobsData {
	q := r.URL.Query()
	d := &jobsData{Schedd: q.Get("schedd"), Owner: q.Get("owner"), Status: q.Get("status"), After: q.Get("after")}
	coll := rd.collector(v)
	got, err := rd.shared(ctx, "schedds\x00"+coll.Addr(), func(ctx context.Context) (any, error) {
		ads, err := coll.Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeSchedd, Projection: []string{"Name", "PondAddress"}})
		if err != nil {
			return nil, err
		}
		var ss []Schedd
		for _, ad := range ads {
			ss = append(ss, Schedd{Name: str(ad, "Name"), Addr: str(ad, "PondAddress")})
		}
		return ss, nil
	})
	if err != nil {
		v.fail("the collector's schedds", err)
		return d
	}
	d.Schedds = got.([]Schedd)
	if len(d.Schedds) == 0 {
		return d
	}
	var sel *Schedd
	for i := range d.Schedds {
		if d.Schedds[i].Name == d.Schedd || (d.Schedd == "" && i == 0) {
			sel = &d.Schedds[i]
		}
	}
	if sel == nil {
		v.fail("schedd "+d.Schedd, errors.New("the collector knows no such schedd"))
		return d
	}
	d.Schedd = sel.Name
	sc := rd.wire(sel.Addr).Schedd()
	req := &wire.QueryJobsRequest{}
	if d.Owner != "" {
		req.Args = []string{d.Owner}
	}
	got, err = rd.shared(ctx, "summary\x00"+sel.Addr+"\x00"+sel.Name+"\x00"+d.Owner, func(ctx context.Context) (any, error) {
		return sc.QueueSummary(ctx, req)
	})
	if err != nil {
		v.fail("the queue summary of "+sel.Name, err)
	} else {
		sum := got.(*wire.QueueSummaryResponse)
		owners := map[string]*OwnerCount{}
		for _, g := range sum.Groups {
			o := owners[g.Owner]
			if o == nil {
				o = &OwnerCount{Owner: g.Owner}
				owners[g.Owner] = o
			}
			for _, c := range []*OwnerCount{o, &d.Total} {
				switch g.Status {
				case 1:
					c.Idle += g.Jobs
				case 2:
					c.Running += g.Jobs
				case 5:
					c.Held += g.Jobs
				default:
					c.Other += g.Jobs
				}
			}
		}
		for _, o := range owners {
			d.Owners = append(d.Owners, *o)
		}
		sort.Slice(d.Owners, func(i, j int) bool { return d.Owners[i].Owner < d.Owners[j].Owner })
	}
	page := *req
	page.Projection = []string{"ClusterId", "ProcId", "Owner", "JobStatus", "Cmd", "RemoteHost", "QDate", "HoldReason"}
	for st, name := range jobStatus {
		if name == d.Status {
			page.Status = []int{st}
		}
	}
	if d.After != "" {
		cl, proc, ok := parseJobID(d.After)
		if !ok {
			v.fail("the page", fmt.Errorf("after=%q is no job id (CLUSTER.PROC)", d.After))
			return d
		}
		page.Constraint = fmt.Sprintf("ClusterId > %d || (ClusterId == %d && ProcId > %d)", cl, cl, proc)
	}
	got, err = rd.shared(ctx, "jobs\x00"+sel.Addr+"\x00"+sel.Name+"\x00"+d.Owner+"\x00"+d.Status+"\x00"+d.After, func(ctx context.Context) (any, error) {
		pg := &jobPage{}
		err := sc.QueueEach(ctx, &page, func(j wire.Job) error {
			if len(pg.jobs) == PageSize {
				pg.next = pg.jobs[len(pg.jobs)-1].ID
				return errPageFull
			}
			st, _ := strconv.Atoi(j.Ad["JobStatus"])
			name := jobStatus[st]
			if name == "" {
				name = strconv.Itoa(st)
			}
			qd, _ := strconv.ParseInt(j.Ad["QDate"], 10, 64)
			pg.jobs = append(pg.jobs, Job{ID: j.ID, Owner: str(j.Ad, "Owner"), Status: name, Cmd: str(j.Ad, "Cmd"),
				Host: str(j.Ad, "RemoteHost"), Hold: str(j.Ad, "HoldReason"), Submitted: time.Unix(qd, 0)})
			return nil
		})
		if err != nil && !errors.Is(err, errPageFull) {
			return nil, err
		}
		return pg, nil
	})
	if err != nil {
		v.fail("the queue of "+sel.Name, err)
		return d
	}
	pg := got.(*jobPage)
	d.Jobs, d.Next = pg.jobs, pg.next
	return d
}

// jobPage is a page of a queue as one read gives it.
type jobPage struct {
	jobs []Job
	next string
}

// parseJobID parses CLUSTER.PROC.
func parseJobID(s string) (int, int, bool) {
	a, b, ok := strings.Cut(s, ".")
	cl, err1 := strconv.Atoi(a)
	proc, err2 := strconv.Atoi(b)
	return cl, proc, ok && err1 == nil && err2 == nil && cl >= 0 && proc >= 0
}

// Pond is a pond and how many members it has.
type Pond struct {
	ID      string
	Members int
}

// seaData is the sea page.
type seaData struct {
	Total   int
	ByReach []Count
	ByState []Count
	Ponds   []Pond
	Relayed []api.RelayWorker
	// Members are the page's members: those of the filter (a pond, a
	// part of their name), PageSize from Start.
	Members []MemberRow
	Matched int
	Start   int
	Prev    int
	Next    int // 0: no next page
	More    int
	Pond    string
	Query   string
}

// MemberRow is a row of the sea page.
type MemberRow struct {
	Name, Status, Role, Pool, Pond, Reach, Relay, Addr string
}

// memberSet is the sea's members as one read gives them, by name, and
// what the pages count of them.
type memberSet struct {
	members          []MemberRow
	byReach, byState []Count
	ponds            []Pond
	epochs           []EpochRow
}

// members reads the sea's members, shared among the viewers.
func (rd reader) members(ctx context.Context) (*memberSet, error) {
	got, err := rd.shared(ctx, "members", func(ctx context.Context) (any, error) {
		ms, err := rd.agent.Members(ctx, api.MembersFilter{})
		if err != nil {
			return nil, err
		}
		sort.Slice(ms, func(i, j int) bool { return ms[i].Name < ms[j].Name })
		set := &memberSet{members: make([]MemberRow, 0, len(ms))}
		reach, state, ponds := map[string]int{}, map[string]int{}, map[string]int{}
		for _, m := range ms {
			set.members = append(set.members, MemberRow{Name: m.Name, Status: m.Status, Role: m.Tags[api.TagRole], Pool: m.Tags[api.TagPool],
				Pond: m.Tags[api.TagPond], Reach: m.Reach, Relay: m.Relay, Addr: net.JoinHostPort(m.Addr, strconv.Itoa(int(m.Port)))})
			reach[m.Reach]++
			state[m.Status]++
			if p := m.Tags[api.TagPond]; p != "" {
				ponds[p]++
			}
			if e := m.Tags[api.TagEpoch]; e != "" {
				set.epochs = append(set.epochs, EpochRow{Name: m.Name, Pool: m.Tags[api.TagPool], Role: m.Tags[api.TagRole],
					CM: m.Tags[api.TagCM], Epoch: api.ParseEpoch(e)})
			}
		}
		set.byReach, set.byState = counts(reach), counts(state)
		for _, c := range counts(ponds) {
			set.ponds = append(set.ponds, Pond{ID: c.Name, Members: c.N})
		}
		return set, nil
	})
	if err != nil {
		return nil, err
	}
	return got.(*memberSet), nil
}

func (rd reader) sea(ctx context.Context, v *view, r *http.Request) *seaData {
	q := r.URL.Query()
	d := &seaData{Start: max(atoi(q.Get("start")), 0), Prev: -1, Pond: q.Get("pond"), Query: strings.TrimSpace(q.Get("q"))}
	set, err := rd.members(ctx)
	if err != nil {
		v.fail("the sea's members ("+api.PathMembers+")", err)
		return d
	}
	d.Total, d.ByReach, d.ByState, d.Ponds = len(set.members), set.byReach, set.byState, set.ponds
	lq := strings.ToLower(d.Query)
	for _, m := range set.members {
		if d.Pond == "" && lq == "" && d.Matched < d.Start {
			d.Matched++
			continue
		}
		if (d.Pond != "" && m.Pond != d.Pond) || (lq != "" && !strings.Contains(strings.ToLower(m.Name), lq)) {
			continue
		}
		if d.Matched >= d.Start && len(d.Members) < PageSize {
			d.Members = append(d.Members, m)
		}
		d.Matched++
	}
	if end := d.Start + len(d.Members); end < d.Matched {
		d.Next, d.More = end, d.Matched-end
	}
	if d.Start > 0 {
		d.Prev = max(d.Start-PageSize, 0)
	}
	if got, err := rd.shared(ctx, "relayed", func(ctx context.Context) (any, error) { return rd.agent.RelayWorkers(ctx) }); err == nil {
		d.Relayed = got.([]api.RelayWorker)
	} else if !notServed(err) {
		v.fail("the workers this agent relays for ("+api.PathRelay+")", err)
	}
	return d
}

// notRunning is a page's note that the agent runs no such thing.
type notRunning struct{ Reason string }

func (rd reader) flocks(ctx context.Context, v *view) any {
	st, err := rd.agent.Flock(ctx)
	if notServed(err) {
		return notRunning{err.Error()}
	}
	if err != nil {
		v.fail("flocks ("+api.PathFlock+")", err)
		return nil
	}
	return st
}

// factoryStatus reads the pilot factory's status, shared among the
// viewers.
func (rd reader) factoryStatus(ctx context.Context) (*api.FactoryStatus, error) {
	got, err := rd.shared(ctx, "factory", func(ctx context.Context) (any, error) { return rd.agent.Factory(ctx) })
	if err != nil {
		return nil, err
	}
	return got.(*api.FactoryStatus), nil
}

func (rd reader) factory(ctx context.Context, v *view) any {
	st, err := rd.factoryStatus(ctx)
	if notServed(err) {
		return notRunning{"no pilot factory runs on this agent"}
	}
	if err != nil {
		v.fail("the factory ("+api.PathFactory+")", err)
		return nil
	}
	return st
}

// failoverData is the fail-over page.
type failoverData struct {
	Status  *api.FailoverStatus
	None    string
	Members []EpochRow
}

// EpochRow is a member's fail-over epoch as its tags advertise it.
type EpochRow struct {
	Name, Pool, Role, CM string
	Epoch                int64
}

func (rd reader) failover(ctx context.Context, v *view) *failoverData {
	d := &failoverData{}
	got, err := rd.shared(ctx, "failover", func(ctx context.Context) (any, error) { return rd.agent.Failover(ctx) })
	var st *api.FailoverStatus
	if err == nil {
		st = got.(*api.FailoverStatus)
	}
	switch {
	case notServed(err):
		d.None = "this pool keeps no replicas of its central manager (POND_CM_REPLICAS)"
	case err != nil:
		v.fail("fail-over ("+api.PathFailover+")", err)
	default:
		d.Status = st
	}
	set, err := rd.members(ctx)
	if err != nil {
		v.fail("the sea's members ("+api.PathMembers+")", err)
		return d
	}
	d.Members = set.epochs
	return d
}

// Credential is a credential's expiry.
type Credential struct {
	What    string
	Detail  string
	Expires time.Time
	Error   string
}

func (rd reader) credentials(ctx context.Context, v *view, s *session) []Credential {
	var cs []Credential
	if v.Self != nil {
		switch t := v.Self.Token; {
		case t == nil:
			cs = append(cs, Credential{What: "node token", Error: "the agent holds no token"})
		default:
			cs = append(cs, Credential{What: "node token", Detail: t.Subject + " " + t.ID, Expires: t.Expires, Error: t.Error})
		}
	}
	if got, err := rd.shared(ctx, "certificates", func(ctx context.Context) (any, error) { return rd.certificates(ctx), nil }); err == nil {
		cs = append(cs, got.([]Credential)...)
	}
	st, err := rd.factoryStatus(ctx)
	if err == nil && st.Credentials != nil {
		c := Credential{What: "factory CA", Detail: "delegated key " + st.Credentials.KeyID, Expires: st.Credentials.CAExpires}
		if st.Credentials.CAExpires.IsZero() {
			c.Error = "the factory holds no delegated CA"
		}
		cs = append(cs, c)
		for _, e := range st.Entries {
			if !e.CredentialsExpire.IsZero() {
				cs = append(cs, Credential{What: "glidein credentials", Detail: "entry " + e.Name + " (renewed before expiry)", Expires: e.CredentialsExpire})
			}
		}
	} else if err != nil && !notServed(err) {
		v.fail("the factory ("+api.PathFactory+")", err)
	}
	if !s.expires.IsZero() {
		cs = append(cs, Credential{What: "this console session", Detail: s.subject, Expires: s.expires})
	}
	return cs
}

// certificates reads the TLS certificate the agent serves its API with,
// and the CA that issued it, from a handshake with it.
func (rd reader) certificates(ctx context.Context) []Credential {
	if rd.c.cfg.TLS == nil {
		return []Credential{{What: "TLS certificate", Error: "the agent speaks plain HTTP: it has no certificate"}}
	}
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: rd.c.cfg.TLS}
	conn, err := d.DialContext(ctx, "tcp", rd.c.cfg.APIAddr())
	if err != nil {
		return []Credential{{What: "TLS certificate", Error: err.Error()}}
	}
	defer conn.Close()
	var cs []Credential
	for i, cert := range conn.(*tls.Conn).ConnectionState().PeerCertificates {
		what := "TLS certificate"
		if i > 0 {
			what = "TLS CA"
		}
		cs = append(cs, Credential{What: what, Detail: cert.Subject.CommonName, Expires: cert.NotAfter})
	}
	return cs
}

// overviewData is the overview page: counts from each of the others.
type overviewData struct {
	Slots    *slotsData
	Jobs     OwnerCount
	Members  int
	ByReach  []Count
	Failover *failoverData
	Expiring []Credential
}

func (rd reader) overview(ctx context.Context, v *view) *overviewData {
	d := &overviewData{}
	req, _ := http.NewRequest(http.MethodGet, "/", nil)
	d.Slots = &slotsData{}
	if set, err := rd.slotSet(ctx, v); err != nil {
		v.fail("the collector's slots", err)
	} else {
		d.Slots.Total, d.Slots.ByState = len(set.rows), set.byState
	}
	if j := rd.jobs(ctx, v, req); j != nil {
		d.Jobs = j.Total
	}
	if set, err := rd.members(ctx); err != nil {
		v.fail("the sea's members ("+api.PathMembers+")", err)
	} else {
		d.Members, d.ByReach = len(set.members), set.byReach
	}
	d.Failover = rd.failover(ctx, v)
	for _, c := range rd.credentials(ctx, v, &session{}) {
		if c.Error != "" || (!c.Expires.IsZero() && c.Expires.Sub(v.Now) < 7*24*time.Hour) {
			d.Expiring = append(d.Expiring, c)
		}
	}
	return d
}

// str is the string value of an ad's attribute: a ClassAd string
// unquoted, anything else as written.
func str(ad wire.Ad, name string) string {
	s := ad[name]
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		if u, err := strconv.Unquote(s); err == nil {
			return u
		}
		return s[1 : len(s)-1]
	}
	return s
}

// counts sorts a map of counts by name.
func counts(m map[string]int) []Count {
	cs := make([]Count, 0, len(m))
	for k, n := range m {
		cs = append(cs, Count{k, n})
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].Name < cs[j].Name })
	return cs
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// funcs are the templates' helpers.
func funcs(now func() time.Time) template.FuncMap {
	return template.FuncMap{
		"left": func(t time.Time) string {
			if t.IsZero() {
				return "never"
			}
			d := t.Sub(now()).Round(time.Minute)
			if d < 0 {
				return "expired " + (-d).String() + " ago"
			}
			return "in " + d.String()
		},
		"urgency": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			switch d := t.Sub(now()); {
			case d < 0:
				return "bad"
			case d < 24*time.Hour:
				return "bad"
			case d < 7*24*time.Hour:
				return "warn"
			}
			return "ok"
		},
		"ts": func(t time.Time) string {
			if t.IsZero() {
				return "—"
			}
			return t.UTC().Format("2006-01-02 15:04:05Z")
		},
		"join":  strings.Join,
		"hours": func(secs float64) string { return strconv.FormatFloat(secs/3600, 'f', 2, 64) },
		"nav":   func() []string { return pageNames[1:] },
		"statuses": func() []string {
			return []string{"", "idle", "running", "held", "suspended", "transferring", "completed", "removed"}
		},
	}
}
