package tree

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/ring"
)

// tcpSea is n engines over real loopback TCP, each behind a fault wrapper.
type tcpSea struct {
	n       int
	faults  *Faults
	tcps    []*TCPTransport
	engines []*Engine
	view    *ring.View
	ads     map[string]map[string]float64
}

func newTCPSea(t testing.TB, n int, seed uint64) *tcpSea {
	t.Helper()
	return newTCPSeaWith(t, n, seed, func(int) TCPConfig { return TCPConfig{} })
}

// newTCPSeaWith is newTCPSea whose node i's transport is configured with
// cfg(i).
func newTCPSeaWith(t testing.TB, n int, seed uint64, cfg func(i int) TCPConfig) *tcpSea {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 2))
	s := &tcpSea{n: n, faults: NewFaults(seed, nil), ads: map[string]map[string]float64{}}
	routers := make([]*MemberRouter, n)
	ms := make([]ring.Member, n)
	for i := range n {
		name := nodeName(i)
		ad := randomAd(r)
		s.ads[name] = ad
		routers[i] = NewMemberRouter(ring.NewMember(name, ""), ring.TableConfig{})
		tr := NewTCPTransport(cfg(i))
		e, err := NewEngine(Config{Router: routers[i], Transport: s.faults.Wrap(name, tr), Evaluator: &countingEvaluator{adEvaluator: adEvaluator{ad}}})
		if err != nil {
			t.Fatal(err)
		}
		addr, err := tr.Listen("127.0.0.1:0", e)
		if err != nil {
			t.Fatal(err)
		}
		ms[i] = ring.NewMember(name, addr)
		s.tcps = append(s.tcps, tr)
		s.engines = append(s.engines, e)
	}
	s.view = ring.NewView(ms)
	for _, rt := range routers {
		rt.SetView(s.view)
	}
	t.Cleanup(s.close)
	return s
}

func (s *tcpSea) close() {
	var wg sync.WaitGroup
	for _, tr := range s.tcps {
		wg.Go(func() { tr.Close() })
	}
	wg.Wait()
}

func seaSize(t *testing.T, n int) int {
	if testing.Short() {
		return min(n, 48)
	}
	return n
}

func TestTCPMatchesBruteForce(t *testing.T) {
	s := newTCPSea(t, seaSize(t, 200), 21)
	tests := []struct {
		name string
		q    api.Query
	}{
		{"best-rank k=10", api.Query{K: 10, Rank: "Memory", Requirements: "Cpus >= 4"}},
		{"best-rank all", api.Query{Rank: "KeyboardIdle"}},
		{"best-rank redundant", api.Query{K: 10, Rank: "Cpus", Redundant: true}},
		{"first-fit k=10", api.Query{K: 10, Mode: api.FirstFit, Requirements: "Memory >= 40000"}},
		{"first-fit redundant", api.Query{K: 3, Mode: api.FirstFit, Requirements: "Cpus >= 16", Redundant: true}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := tt.q
			q.Deadline = time.Now().Add(5 * time.Second)
			a, err := s.engines[(i*37)%s.n].Query(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			checkAnswer(t, s.ads, q, a)
		})
	}
}

// checkHonest verifies that every matching member the answer claims to
// cover is in it, and that nothing found is reported missing.
func checkHonest(t *testing.T, s *tcpSea, q api.Query, a *api.Answer) {
	t.Helper()
	found := map[string]bool{}
	for _, m := range a.Matches {
		found[m.Name] = true
	}
	missing := ring.Union(ring.ID{}, a.Stats.Missing)
	for _, m := range s.view.Members() {
		inMissing := false
		for _, iv := range missing {
			inMissing = inMissing || iv.Contains(m.ID)
		}
		ok, _ := evalReq(s.ads[m.Name], q.Requirements)
		if ok && !inMissing && !found[m.Name] {
			t.Errorf("%s matches and lies in covered regions but is not in the answer", m.Name)
		}
		if inMissing && found[m.Name] {
			t.Errorf("%s is in the answer but reported missing", m.Name)
		}
	}
	covered := 0
	for _, m := range s.view.Members() {
		inMissing := false
		for _, iv := range missing {
			inMissing = inMissing || iv.Contains(m.ID)
		}
		if !inMissing {
			covered++
		}
	}
	if covered != a.Stats.Covered {
		t.Errorf("stats say %d members covered, regions hold %d", a.Stats.Covered, covered)
	}
}

// pickVictims returns k distinct node indexes other than root.
func pickVictims(r *rand.Rand, n, k, root int) []int {
	seen := map[int]bool{root: true}
	var out []int
	for len(out) < k {
		i := r.IntN(n)
		if !seen[i] {
			seen[i] = true
			out = append(out, i)
		}
	}
	return out
}

func TestTCPFaults(t *testing.T) {
	n := seaSize(t, 200)
	tests := []struct {
		name      string
		redundant bool
		// inject runs mid-query and returns the nodes that died.
		inject func(s *tcpSea, r *rand.Rand) map[string]bool
		// minFound is the least fraction of live matching nodes found.
		minFound float64
		// budget is the query's deadline (2 s when zero) on a machine
		// where a fault-free query takes 100 ms; it grows in
		// proportion on a machine so loaded that one takes longer.
		budget time.Duration
	}{
		{"close 5% of nodes", true, func(s *tcpSea, r *rand.Rand) map[string]bool {
			dead := map[string]bool{}
			for _, i := range pickVictims(r, s.n, s.n/20, 0) {
				s.tcps[i].Close()
				dead[nodeName(i)] = true
			}
			return dead
		}, 0.99, 0},
		{"silence 5% of nodes", true, func(s *tcpSea, r *rand.Rand) map[string]bool {
			dead := map[string]bool{}
			for _, i := range pickVictims(r, s.n, s.n/20, 0) {
				s.faults.Kill(nodeName(i))
				dead[nodeName(i)] = true
			}
			return dead
		}, 0.99, 0},
		{"silence 5% of nodes, single tree", false, func(s *tcpSea, r *rand.Rand) map[string]bool {
			dead := map[string]bool{}
			for _, i := range pickVictims(r, s.n, s.n/20, 0) {
				s.faults.Kill(nodeName(i))
				dead[nodeName(i)] = true
			}
			return dead
		}, 0.9, 0},
		{"drop 5% of requests", true, func(s *tcpSea, r *rand.Rand) map[string]bool {
			s.faults.SetDrop(0.05)
			return nil
		}, 0.9, 0},
		{"partition in two", false, func(s *tcpSea, r *rand.Rand) map[string]bool {
			var a, b []string
			for i := range s.n {
				if i%2 == 0 {
					a = append(a, nodeName(i))
				} else {
					b = append(b, nodeName(i))
				}
			}
			s.faults.Partition(a, b)
			dead := map[string]bool{}
			for _, name := range b {
				dead[name] = true
			}
			return dead
			// Half the ring silent and still in the membership view: the
			// answer is never complete and comes at the deadline. Each
			// silent level of the tree spends l/(l+1) of the time left
			// (no hop bound), so the members below two or three silent
			// levels are asked with milliseconds left, which a loaded
			// machine's scheduler takes: with 2 s, a load of 15 lost up
			// to 56% of the live nodes.
		}, 0.75, 6 * time.Second},
	}
	for ti, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTCPSea(t, n, uint64(100+ti))
			s.faults.SetDelay(2*time.Millisecond, 8*time.Millisecond)
			r := rand.New(rand.NewPCG(uint64(ti), 5))
			q := api.Query{Requirements: "Memory >= 16384", Rank: "Memory", Redundant: tt.redundant}
			q.Deadline = time.Now().Add(30 * time.Second)
			warm, err := s.engines[0].Query(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			budget := tt.budget
			if budget == 0 {
				budget = 2 * time.Second
			}
			q.Deadline = start.Add(max(budget, time.Duration(float64(budget)*warm.Stats.Latency.Seconds()/0.1)))
			var a *api.Answer
			done := make(chan struct{})
			go func() {
				defer close(done)
				a, err = s.engines[0].Query(context.Background(), q)
			}()
			time.Sleep(10 * time.Millisecond)
			dead := tt.inject(s, r)
			<-done
			if err != nil {
				t.Fatal(err)
			}
			if late := time.Since(q.Deadline); late > 100*time.Millisecond {
				t.Errorf("answer came %v after the deadline", late)
			}
			checkHonest(t, s, q, a)
			found := map[string]bool{}
			for _, m := range a.Matches {
				found[m.Name] = true
			}
			want, got := 0, 0
			for name, ad := range s.ads {
				if ok, _ := evalReq(ad, q.Requirements); ok && !dead[name] {
					want++
					if found[name] {
						got++
					}
				}
			}
			frac := float64(got) / float64(want)
			t.Logf("found %d of %d live matching nodes (%.3f); completeness %.3f; %d missing members; %d messages; latency %v",
				got, want, frac, a.Stats.Completeness, len(a.Stats.MissingMembers), a.Stats.Messages, a.Stats.Latency)
			if frac < tt.minFound {
				t.Errorf("found %.3f of live matching nodes, want >= %.2f", frac, tt.minFound)
			}
		})
	}
}

func TestFrames(t *testing.T) {
	env := &envelope{ID: 7, Req: &Request{Query: api.Query{ID: "q", K: 3, Mode: api.FirstFit}, Region: ring.Interval{Begin: ring.IDOf("a"), End: ring.IDOf("b")}}}
	b, err := encodeFrame(env, DefaultMaxFrame)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readEnvelope(bytes.NewReader(b), DefaultMaxFrame)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != 7 || got.Req.Query.Mode != api.FirstFit || got.Req.Region != env.Req.Region {
		t.Fatalf("round trip: got %+v", got.Req)
	}
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"oversized", binary.BigEndian.AppendUint32(nil, 1<<30), "exceeds"},
		{"cut short", append(binary.BigEndian.AppendUint32(nil, 10), "{}"...), "cut short"},
		{"bad json", frame(`{"id": 1, "req": {"query": }}`), "byte 28"},
		{"bad mode", frame(`{"id": 1, "req": {"query": {"mode": "worst"}}}`), "worst"},
		{"bad region", frame(`{"id": 1, "req": {"region": {"b": "xyz"}}}`), "xyz"},
		{"bad type", frame(`{"id": "one"}`), "field id"},
		{"both", frame(`{"id": 1, "req": {}, "resp": {}}`), "both"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := readEnvelope(bytes.NewReader(tt.in), 1<<20)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tt.want)
			}
		})
	}
	if _, err := encodeFrame(env, 10); err == nil {
		t.Fatal("encodeFrame ignored the size limit")
	}
}

func frame(s string) []byte { return append(binary.BigEndian.AppendUint32(nil, uint32(len(s))), s...) }

func FuzzDecodeEnvelope(f *testing.F) {
	f.Add([]byte(`{"id":1,"req":{"query":{"id":"q","k":3,"mode":"first-fit"},"region":{"b":"` + ring.IDOf("a").String() + `","e":"` + ring.IDOf("b").String() + `"}}}`))
	f.Add([]byte(`{"id":2,"resp":{"qid":"q","matches":[{"name":"n","rank":1.5,"attrs":{"Memory":1024}}],"visited":3}}`))
	for _, env := range wireSamples() {
		b, err := appendEnvelope(nil, env)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		env, err := decodeEnvelope(b)
		if err != nil {
			return
		}
		out, err := encodeFrame(env, 1<<30)
		if err != nil {
			t.Fatalf("decoded envelope does not encode: %v", err)
		}
		if b[0] != wireBinary {
			return
		}
		again, err := decodeEnvelope(out[4:])
		if err != nil {
			t.Fatalf("re-encoded envelope does not decode: %v", err)
		}
		if d := cmp.Diff(env, again, cmpopts.EquateNaNs(), cmpopts.EquateEmpty(), cmpopts.IgnoreUnexported(envelope{})); d != "" {
			t.Fatalf("binary round trip changed the envelope (-first +second):\n%s", d)
		}
	})
}

// wireSamples are envelopes that use every field of the binary format.
func wireSamples() []*envelope {
	iv := ring.Interval{Begin: ring.IDOf("a"), End: ring.IDOf("b")}
	dl := time.Unix(1_800_000_000, 123456789)
	return []*envelope{
		{ID: 1, Req: &Request{Kind: KindStop, Query: api.Query{ID: "q1", Requirements: `Cpus >= 4 && OpSys == "LINUX"`, Rank: "Memory", K: 10,
			Mode: api.FirstFit, Attrs: []string{"Memory", "Cpus"}, Deadline: dl, Redundant: true},
			Dir: CounterClockwise, Region: iv, Deadline: dl.Add(-time.Second), Depth: 3, From: "node-7", Round: 2, MaxDepth: 4, Ack: true}},
		{ID: 1 << 40, Req: &Request{Query: api.Query{K: -1}}},
		{ID: 2, Resp: &Response{QueryID: "q1", Matches: []api.Match{
			{Name: "n1", Addr: "127.0.0.1:9", Rank: 2.5, Attrs: map[string]any{"Memory": int64(4096), "Load": 0.25, "Arch": "X86_64", "Idle": true, "Busy": false, "None": nil}},
			{Name: "n2", Rank: -1},
		}, Coverage: []ring.Interval{iv, iv.Mirror()}, Visited: 5, Messages: 8, Depth: 2}},
		{ID: 3, Resp: &Response{}},
		{ID: 4, Err: "no such thing"},
	}
}

func TestWireRoundTrip(t *testing.T) {
	for _, env := range wireSamples() {
		t.Run(fmt.Sprint(env.ID), func(t *testing.T) {
			b, err := encodeFrame(env, DefaultMaxFrame)
			if err != nil {
				t.Fatal(err)
			}
			if b[4] != wireBinary {
				t.Fatalf("frame body starts with %#x, want the binary format", b[4])
			}
			got, err := readEnvelope(bytes.NewReader(b), DefaultMaxFrame)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(env, got, cmpopts.EquateEmpty(), cmpopts.IgnoreUnexported(envelope{})); d != "" {
				t.Fatalf("round trip (-sent +received):\n%s", d)
			}
			// Every proper prefix of the body is refused, with a position.
			body := b[4:]
			for n := 1; n < len(body); n++ {
				if _, err := decodeEnvelope(body[:n]); err == nil || !strings.Contains(err.Error(), "byte ") {
					t.Fatalf("prefix of %d of %d bytes: error %v, want one with a position", n, len(body), err)
				}
			}
		})
	}
}

func TestWireErrors(t *testing.T) {
	req, err := appendEnvelope(nil, &envelope{ID: 1, Req: &Request{Query: api.Query{ID: "q"}}})
	if err != nil {
		t.Fatal(err)
	}
	with := func(b []byte, i int, c byte) []byte {
		b = bytes.Clone(b)
		b[i] = c
		return b
	}
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"unknown body", []byte{wireBinary, 1, 9}, "byte 2: body kind 9: unknown"},
		{"unknown request kind", with(req, 3, 7), "byte 3: request kind 7: unknown"},
		{"trailing bytes", append(bytes.Clone(req), 0), "1 bytes after the end"},
		{"huge list", []byte{wireBinary, 1, bodyResponse, 0, 0xff, 0xff, 0x03}, "items cannot fit"},
		{"bad utf-8", []byte{wireBinary, 1, bodyError, 2, 0xff, 0xfe}, "byte 3: error: not UTF-8"},
		{"bad value", []byte{wireBinary, 1, bodyResponse, 0, 1, 1, 'n', 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 'k', 9, 0, 0, 0, 0}, "unknown value tag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeEnvelope(tt.in)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tt.want)
			}
		})
	}
	if _, err := appendEnvelope(nil, &envelope{Resp: &Response{Matches: []api.Match{{Name: "n", Attrs: map[string]any{"X": []int{1}}}}}}); err == nil ||
		!strings.Contains(err.Error(), "attribute X") {
		t.Fatalf("unsupported attribute value: error %v", err)
	}
}

// BenchmarkWire compares the binary format with JSON on a typical request
// and answer.
func BenchmarkWire(b *testing.B) {
	envs := wireSamples()[:3]
	for _, format := range []string{"binary", "json"} {
		b.Run(format, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, env := range envs {
					var body []byte
					var err error
					if format == "binary" {
						body, err = appendEnvelope(nil, env)
					} else {
						body, err = json.Marshal(env)
					}
					if err != nil {
						b.Fatal(err)
					}
					if _, err := decodeEnvelope(body); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

func TestTCPUnreachable(t *testing.T) {
	tr := NewTCPTransport(TCPConfig{})
	defer tr.Close()
	// A listener that is closed at once leaves a port nobody answers on.
	other := NewTCPTransport(TCPConfig{})
	addr, err := other.Listen("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	other.Close()
	errc := make(chan error, 1)
	tr.Send(ring.NewMember("x", addr), &Request{Deadline: time.Now().Add(time.Second)}, func(_ *Response, err error) { errc <- err })
	if err := <-errc; err == nil {
		t.Fatal("send to a closed port succeeded")
	}
	// A peer that accepts but never answers times out.
	silent := NewTCPTransport(TCPConfig{})
	defer silent.Close()
	addr, err = silent.Listen("127.0.0.1:0", HandlerFunc(func(*Request, func(*Response)) {}))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	tr.Send(ring.NewMember("y", addr), &Request{Deadline: start.Add(50 * time.Millisecond)}, func(_ *Response, err error) { errc <- err })
	if err := <-errc; err != ErrTimeout {
		t.Fatalf("silent peer: error %v, want ErrTimeout", err)
	}
}

// TestJSONPeers checks that nodes of protocol version 1, which read and
// write only JSON frames, keep working with this one: a JSON request is
// answered in JSON, and a request to JSONAddr goes out as JSON.
func TestJSONPeers(t *testing.T) {
	deadline := time.Now().Add(5 * time.Second)
	readFrame := func(c net.Conn) ([]byte, error) {
		c.SetReadDeadline(deadline)
		var hdr [4]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return nil, err
		}
		body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
		_, err := io.ReadFull(c, body)
		return body, err
	}
	writeJSON := func(c net.Conn, env *envelope) {
		t.Helper()
		body, err := json.Marshal(env)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)); err != nil {
			t.Fatal(err)
		}
	}

	// An old client asks a new node.
	srv := NewTCPTransport(TCPConfig{})
	defer srv.Close()
	addr, err := srv.Listen("127.0.0.1:0", HandlerFunc(func(req *Request, reply func(*Response)) {
		reply(&Response{QueryID: req.Query.ID, Visited: 1})
	}))
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	writeJSON(c, &envelope{ID: 9, Req: &Request{Query: api.Query{ID: "old-client"}, Deadline: deadline}})
	body, err := readFrame(c)
	if err != nil {
		t.Fatal(err)
	}
	var got envelope
	if err := json.Unmarshal(body, &got); err != nil || got.ID != 9 || got.Resp == nil || got.Resp.QueryID != "old-client" {
		t.Fatalf("answer to a JSON request: %q (%v), want a JSON answer to request 9", body, err)
	}

	// A new node asks an old server.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		body, _ := readFrame(c)
		served <- body
		var env envelope
		if json.Unmarshal(body, &env) == nil && env.Req != nil {
			b, _ := json.Marshal(&envelope{ID: env.ID, Resp: &Response{QueryID: env.Req.Query.ID}})
			c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...))
		}
		io.Copy(io.Discard, c) // until the client hangs up
	}()
	cl := NewTCPTransport(TCPConfig{})
	defer cl.Close()
	answers := make(chan *Response, 1)
	cl.Send(ring.NewMember("old", JSONAddr(ln.Addr().String())), &Request{Query: api.Query{ID: "new-client"}, Deadline: deadline},
		func(resp *Response, err error) {
			if err != nil {
				t.Error(err)
			}
			answers <- resp
		})
	if body := <-served; len(body) == 0 || body[0] != '{' {
		t.Fatalf("request to a JSON peer: %q, want JSON", body)
	}
	if resp := <-answers; resp == nil || resp.QueryID != "new-client" {
		t.Fatalf("answer from the JSON peer: %+v", resp)
	}
}
