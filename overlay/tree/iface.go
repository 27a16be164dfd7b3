package tree

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/pond-htc/pond/overlay/ring"
)

// Transport carries requests to peers.
type Transport interface {
	// Send delivers req to the peer and calls reply at most once, with
	// the peer's answer or an error, normally no later than req.Deadline.
	// Send must not wait for a peer (to connect or to answer), but it may
	// write to an open connection and may call reply before it returns,
	// so callers must not hold locks that reply takes. Callers keep their
	// own timers and must not rely on reply being called.
	Send(to ring.Member, req *Request, reply func(*Response, error))
}

// Handler serves requests arriving from peers; Engine implements it.
type Handler interface {
	// Serve handles req and calls reply at most once with the answer.
	// It must not block for long.
	Serve(req *Request, reply func(*Response))
}

// Timer is a pending call from a Clock.
type Timer interface {
	// Stop cancels the call and reports whether it was still pending.
	Stop() bool
}

// Clock tells time and schedules calls; RealClock uses the wall clock,
// the simulator a simulated one.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) Timer
}

// RealClock is the wall clock.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// AfterFunc calls time.AfterFunc.
func (RealClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Router is this node's view of the sea.
type Router interface {
	// Self is this node.
	Self() ring.Member
	// View is the current membership, which includes Self.
	View() *ring.View
	// Table is this node's routing table in View.
	Table() []ring.Member
}

// MemberRouter is a Router over a membership list that the owner replaces
// as members come and go (the agent feeds it from serf). It is safe for
// concurrent use.
type MemberRouter struct {
	self  ring.Member
	cfg   ring.TableConfig
	mu    sync.Mutex
	state atomic.Pointer[routerState]
}

type routerState struct {
	self  ring.Member
	view  *ring.View
	table []ring.Member
}

// NewMemberRouter returns a router for self whose membership holds only
// self until SetMembers or SetView is called.
func NewMemberRouter(self ring.Member, cfg ring.TableConfig) *MemberRouter {
	if self.ID.IsZero() {
		self.ID = ring.IDOf(self.Name)
	}
	r := &MemberRouter{self: self, cfg: cfg}
	r.SetView(ring.NewView([]ring.Member{self}))
	return r
}

// SetMembers replaces the membership; self is added if missing.
func (r *MemberRouter) SetMembers(members []ring.Member) {
	ms := make([]ring.Member, 0, len(members)+1)
	ms = append(ms, r.Self())
	ms = append(ms, members...)
	r.SetView(ring.NewView(ms))
}

// SetView replaces the membership with v, which many routers may share.
// If v lacks self, self is added.
func (r *MemberRouter) SetView(v *ring.View) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setViewLocked(v)
}

// SetSelfAddr sets the address this node advertises, as seen in Self and
// in the view.
func (r *MemberRouter) SetSelfAddr(addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.self.Addr = addr
	ms := append([]ring.Member(nil), r.state.Load().view.Members()...)
	for i := range ms {
		if ms[i].Name == r.self.Name {
			ms[i].Addr = addr
		}
	}
	r.setViewLocked(ring.NewView(ms))
}

func (r *MemberRouter) setViewLocked(v *ring.View) {
	i, ok := v.Index(r.self.Name)
	if !ok {
		ms := append([]ring.Member{r.self}, v.Members()...)
		v = ring.NewView(ms)
		i, _ = v.Index(r.self.Name)
	}
	r.state.Store(&routerState{self: r.self, view: v, table: v.Table(i, r.cfg)})
}

// Self returns this node.
func (r *MemberRouter) Self() ring.Member { return r.state.Load().self }

// View returns the current membership.
func (r *MemberRouter) View() *ring.View { return r.state.Load().view }

// Table returns the current routing table.
func (r *MemberRouter) Table() []ring.Member { return r.state.Load().table }

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(req *Request, reply func(*Response))

// Serve calls f.
func (f HandlerFunc) Serve(req *Request, reply func(*Response)) { f(req, reply) }
