package tree

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/ring"
)

// stepSea runs engines on simulated time in one goroutine: messages take a
// fixed latency, timers fire only when simulated time reaches them, so
// failure handling is tested deterministically and without wall-clock
// timing.
type stepSea struct {
	now     time.Time
	seq     int
	events  []*stepEvent
	latency time.Duration

	view     *ring.View
	engines  map[string]*Engine
	ads      map[string]map[string]float64
	silent   map[string]bool
	requests []*Request // every request delivered to a live node, in order
	arrived  map[string]int
}

type stepEvent struct {
	at      time.Time
	seq     int
	f       func()
	stopped bool
	fired   bool
}

func (e *stepEvent) Stop() bool {
	was := !e.stopped && !e.fired
	e.stopped = true
	return was
}

func (s *stepSea) Now() time.Time { return s.now }

func (s *stepSea) AfterFunc(d time.Duration, f func()) Timer { return s.at(s.now.Add(max(d, 0)), f) }

func (s *stepSea) at(t time.Time, f func()) *stepEvent {
	s.seq++
	e := &stepEvent{at: t, seq: s.seq, f: f}
	s.events = append(s.events, e)
	return e
}

// step runs the earliest pending event that is due no later than limit
// and reports whether there was one.
func (s *stepSea) step(limit time.Time) bool {
	best := -1
	for i, e := range s.events {
		if best < 0 || e.at.Before(s.events[best].at) || (e.at.Equal(s.events[best].at) && e.seq < s.events[best].seq) {
			best = i
		}
	}
	if best < 0 || s.events[best].at.After(limit) {
		return false
	}
	e := s.events[best]
	s.events = slices.Delete(s.events, best, best+1)
	if e.stopped {
		return true
	}
	e.fired = true
	s.now = e.at
	e.f()
	return true
}

// runUntil steps until done reports true, no event is left, or simulated
// time would pass limit.
func (s *stepSea) runUntil(limit time.Time, done func() bool) {
	for !done() && s.step(limit) {
	}
}

type stepTransport struct {
	s    *stepSea
	from string
}

func (t stepTransport) Send(to ring.Member, req *Request, reply func(*Response, error)) {
	s := t.s
	s.at(s.now.Add(s.latency), func() {
		s.arrived[to.Name]++
		if s.silent[to.Name] {
			return
		}
		s.requests = append(s.requests, req)
		s.engines[to.Name].Serve(req, func(resp *Response) {
			s.at(s.now.Add(s.latency), func() { reply(resp, nil) })
		})
	})
}

func newStepSea(t *testing.T, n int, cfg Config) *stepSea {
	t.Helper()
	r := rand.New(rand.NewPCG(11, 1))
	s := &stepSea{
		now:     time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		view:    ring.NewView(members(n, func(int) string { return "" })),
		engines: map[string]*Engine{}, ads: map[string]map[string]float64{},
		silent: map[string]bool{}, arrived: map[string]int{},
	}
	for i := range n {
		name := nodeName(i)
		s.ads[name] = randomAd(r)
		rt := NewMemberRouter(ring.NewMember(name, ""), ring.TableConfig{})
		rt.SetView(s.view)
		c := cfg
		c.Router, c.Transport, c.Evaluator, c.Clock = rt, stepTransport{s, name}, adEvaluator{s.ads[name]}, s
		e, err := NewEngine(c)
		if err != nil {
			t.Fatal(err)
		}
		s.engines[name] = e
	}
	return s
}

// start runs an all-matches best-rank query from root and returns a
// pointer that holds its answer once it is given.
func (s *stepSea) start(t *testing.T, root string, budget time.Duration) **api.Answer {
	t.Helper()
	var ans *api.Answer
	q := api.Query{ID: "q", Rank: "Memory", Deadline: s.now.Add(budget)}
	if err := s.engines[root].Start(q, func(a *api.Answer) { ans = a }); err != nil {
		t.Fatal(err)
	}
	return &ans
}

// checkLive verifies that a holds exactly the members not silenced and
// names every silenced member as missing.
func (s *stepSea) checkLive(t *testing.T, a *api.Answer) {
	t.Helper()
	got := map[string]bool{}
	for _, m := range a.Matches {
		got[m.Name] = true
	}
	for name := range s.engines {
		if !s.silent[name] && !got[name] {
			t.Errorf("live node %s missing from the answer", name)
		}
		if s.silent[name] && got[name] {
			t.Errorf("silent node %s in the answer", name)
		}
	}
	for name := range s.silent {
		if !slices.Contains(a.Stats.MissingMembers, name) {
			t.Errorf("silent node %s not reported missing (missing: %v)", name, a.Stats.MissingMembers)
		}
	}
	if want := float64(len(s.engines)-len(s.silent)) / float64(len(s.engines)); a.Stats.Completeness != want {
		t.Errorf("completeness %v, want %v", a.Stats.Completeness, want)
	}
}

// TestPeerFailed checks that a failure notice replaces the timeout: with
// a hop bound of an hour, the query answers within simulated seconds once
// every engine is told of the silent members, and the regions they were
// asked for are recovered through the members inside them, passing over
// members reported failed.
func TestPeerFailed(t *testing.T) {
	const n = 64
	tests := []struct {
		name string
		// silent picks the silenced members, given the view.
		silent func(v *ring.View) []string
	}{
		{"one inner node", func(v *ring.View) []string { return []string{v.At(20).Name} }},
		{"two ring neighbours", func(v *ring.View) []string { return []string{v.At(20).Name, v.At(21).Name} }},
		{"three in a row", func(v *ring.View) []string { return []string{v.At(40).Name, v.At(41).Name, v.At(42).Name} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStepSea(t, n, Config{HopTimeout: time.Hour})
			s.latency = 10 * time.Millisecond
			dead := tt.silent(s.view)
			for _, name := range dead {
				s.silent[name] = true
			}
			root := s.view.At(0).Name
			t0 := s.now
			ans := s.start(t, root, 24*time.Hour)
			// Run until only timers are left: the query waits for the
			// silent members.
			s.runUntil(t0.Add(time.Minute), func() bool { return *ans != nil })
			if *ans != nil {
				t.Fatal("answered before the failure was reported; the scenario tests nothing")
			}
			asked := 0
			for _, name := range dead {
				asked += s.arrived[name]
			}
			if asked == 0 {
				t.Fatal("no silent member was asked; the scenario tests nothing")
			}
			// The failure detector tells every node, last member first.
			for i := len(dead) - 1; i >= 0; i-- {
				for _, e := range s.engines {
					e.PeerFailed(dead[i])
				}
			}
			s.runUntil(t0.Add(time.Minute), func() bool { return *ans != nil })
			if *ans == nil {
				t.Fatal("no answer within a simulated minute of the failure notices (timeouts are an hour)")
			}
			s.checkLive(t, *ans)
		})
	}
}

// TestPeerFailedIgnoresOthers checks that a notice about a member nobody
// waits on changes nothing.
func TestPeerFailedIgnoresOthers(t *testing.T) {
	s := newStepSea(t, 32, Config{HopTimeout: time.Hour})
	s.latency = 10 * time.Millisecond
	for _, e := range s.engines {
		e.PeerFailed("not-a-member")
	}
	ans := s.start(t, s.view.At(3).Name, time.Hour)
	for _, e := range s.engines {
		e.PeerFailed("not-a-member")
	}
	s.runUntil(s.now.Add(time.Hour), func() bool { return *ans != nil })
	if *ans == nil {
		t.Fatal("no answer")
	}
	s.checkLive(t, *ans)
	if v := (*ans).Stats.Visited; v != 32 {
		t.Errorf("visited %d nodes, want 32", v)
	}
}

// TestRepairRounds silences an inner node two levels below the root. Its
// parent notices only at the timeout, with too little of its own budget
// left to hand the region on, so one pass loses the region; repair rounds
// re-ask it from the root, which has time to spare.
func TestRepairRounds(t *testing.T) {
	const n = 128
	hop := 100 * time.Millisecond
	// Find the depth-2 request with the largest region in a fault-free run.
	probe := newStepSea(t, n, Config{HopTimeout: hop})
	probe.latency = 90 * time.Millisecond
	root := probe.view.At(0).Name
	a := probe.start(t, root, time.Minute)
	probe.runUntil(probe.now.Add(time.Hour), func() bool { return *a != nil })
	if *a == nil || (*a).Stats.Completeness != 1 {
		t.Fatal("fault-free probe query incomplete")
	}
	var victim string
	best := 0
	for _, r := range probe.requests {
		if c := probe.view.Count(r.Dir.toRing(r.Region)); r.Depth == 2 && c > best {
			// The request went to the first member of its region.
			victim, best = probe.view.At(firstAtOrAfter(probe.view, r.Region.Begin, r.Dir)).Name, c
		}
	}
	if best < 8 {
		t.Fatalf("largest depth-2 region holds %d members; want a real subtree", best)
	}
	for _, tt := range []struct {
		repairs  int
		complete bool
	}{
		{0, false},
		{1, true},
		{3, true},
	} {
		t.Run(fmt.Sprintf("repairs=%d", tt.repairs), func(t *testing.T) {
			s := newStepSea(t, n, Config{HopTimeout: hop, RepairRounds: tt.repairs})
			s.latency = probe.latency
			s.silent[victim] = true
			ans := s.start(t, root, time.Minute)
			s.runUntil(s.now.Add(time.Hour), func() bool { return *ans != nil })
			if *ans == nil {
				t.Fatal("no answer")
			}
			found := len((*ans).Matches)
			t.Logf("victim %s (region of %d): found %d of %d live, completeness %.3f, rounds %d",
				victim, best, found, n-1, (*ans).Stats.Completeness, (*ans).Stats.Rounds)
			if tt.complete {
				s.checkLive(t, *ans)
				return
			}
			if found >= n-1 {
				t.Errorf("one pass found all %d live nodes; the scenario does not lose a region", found)
			}
			if lost := n - found; len((*ans).Stats.MissingMembers) < lost {
				t.Errorf("%d nodes lost but only %d reported missing", lost, len((*ans).Stats.MissingMembers))
			}
		})
	}
}

// TestAckTimeout checks acknowledgements: without faults every tree edge
// carries a request, an acknowledgement and an answer, and the answer is
// complete; with silent inner members and hop bounds of an hour, children
// that do not acknowledge within AckTimeout are given up on and their
// regions handed on, so the query answers within simulated seconds.
func TestAckTimeout(t *testing.T) {
	const n = 64
	tests := []struct {
		name   string
		silent []int
	}{
		{"no faults", nil},
		{"one inner node", []int{20}},
		{"three in a row", []int{40, 41, 42}},
		{"scattered", []int{5, 17, 33, 50}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStepSea(t, n, Config{HopTimeout: time.Hour, AckTimeout: 50 * time.Millisecond})
			s.latency = 10 * time.Millisecond
			for _, i := range tt.silent {
				s.silent[s.view.At(i).Name] = true
			}
			t0 := s.now
			ans := s.start(t, s.view.At(0).Name, 24*time.Hour)
			s.runUntil(t0.Add(time.Minute), func() bool { return *ans != nil })
			if *ans == nil {
				t.Fatal("no answer within a simulated minute (hop bound an hour, acknowledgement timeout 50ms)")
			}
			s.checkLive(t, *ans)
			if len(tt.silent) == 0 {
				if m := (*ans).Stats.Messages; m != 3*(n-1) {
					t.Errorf("%d messages, want 3 per tree edge (%d)", m, 3*(n-1))
				}
			}
		})
	}
}

// TestServeRegionOfNoKnownMember checks that a region holding none of the
// members a node knows of (those in it left its view since the region was
// handed out, as a repair round may find) is answered as covered and
// empty, not by a node that fails.
func TestServeRegionOfNoKnownMember(t *testing.T) {
	s := newStepSea(t, 8, Config{HopTimeout: time.Hour})
	e := s.engines[s.view.At(0).Name]
	for i := 1; i < s.view.Len(); i++ {
		a, b := s.view.At(i), s.view.At((i+1)%s.view.Len())
		// From just after a to b, b excluded: no member.
		region := ring.Interval{Begin: a.ID.Add(ring.Pow2(0)), End: b.ID}
		var got *Response
		e.serve(&Request{Query: api.Query{ID: fmt.Sprintf("q%d", i), Rank: "Memory", Deadline: s.now.Add(time.Minute)},
			Dir: Clockwise, Region: region, Deadline: s.now.Add(time.Minute), From: a.Name}, func(r *Response) { got = r })
		s.runUntil(s.now.Add(time.Minute), func() bool { return got != nil })
		if got == nil {
			t.Fatalf("region between %s and %s: no answer", a.Name, b.Name)
		}
		if len(got.Matches) != 0 {
			t.Errorf("region between %s and %s: matches %v, want none", a.Name, b.Name, names(got.Matches))
		}
		if want := []ring.Interval{region}; !slices.Equal(got.Coverage, want) {
			t.Errorf("region between %s and %s: coverage %v, want %v", a.Name, b.Name, got.Coverage, want)
		}
	}
}
