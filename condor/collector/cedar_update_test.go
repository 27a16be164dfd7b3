package collector

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/cedar"
	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/wire"
)

// storedNames returns the sorted Names of the live ads of typ a constraint
// selects.
func storedNames(t *testing.T, c *Collector, typ, constraint string) []string {
	t.Helper()
	resp, err := c.Query(context.Background(), &wire.QueryAdsRequest{Type: typ, Constraint: constraint})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range resp.Ads {
		ad, err := wire.ToClassAd(a)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := ad.EvalAttr("Name").StringValue()
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// lastJSON decodes the last line a client printed.
func lastJSON(t *testing.T, out string, v any) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), v); err != nil {
		t.Fatalf("client output: %v\n%s", err, out)
	}
}

// TestCedarAdvertiseFromHTCondorClient advertises with HTCondor's own
// client the way its daemons and htcondor2.Collector.advertise do: several
// ads on one connection (each after the first as its command and the ad,
// then DC_NOP), a generic ad of a type the collector has never seen, then
// withdraws some; and queries them back with several ad types, the
// startd's own ad (QUERY_MULTIPLE_ADS) and the collector's.
func TestCedarAdvertiseFromHTCondorClient(t *testing.T) {
	c := seedCollector(t)
	addr, _ := cedarCollector(t, c, []auth.Scope{auth.Daemon})
	out, err := htcondorClient(t, addr, "", `
from htcondor2 import classad
coll = htcondor2.Collector(ADDR)
slots = [classad.ClassAd({'Name': 'slot%d@ep9' % i, 'Machine': 'ep9', 'SlotID': i, 'Cpus': i, 'State': 'Unclaimed',
  'Activity': 'Idle', 'Memory': 1024, 'SlotType': 'Static', 'Requirements': classad.ExprTree('true'),
  'AuthenticatedIdentity': 'forged@nowhere'}) for i in (1, 2, 3)]
import time
coll.advertise(slots, 'UPDATE_STARTD_AD')
coll.advertise([classad.ClassAd({'MyType': 'Widget', 'Name': 'w1', 'Colour': 'blue'})])
# Each advertise is a connection of its own, which the client does not
# wait to see stored, and connections are served side by side, as
# HTCondor's collector promises no order between them either: the
# invalidation goes once slot3 is there to withdraw.
deadline = time.time() + 30
while len(coll.query(htcondor2.AdType.Startd, constraint='Name == "slot3@ep9"', projection=['Name'])) == 0 and time.time() < deadline:
    time.sleep(0.1)
coll.advertise([classad.ClassAd({'Name': 'slot3@ep9'})], 'INVALIDATE_STARTD_ADS')
coll.advertise([classad.ClassAd({'MyType': 'Scheduler', 'Name': 'ap9', 'Machine': 'ap9', 'MyAddress': '<127.0.0.1:1>'})], 'UPDATE_SCHEDD_AD')
coll.advertise([classad.ClassAd({'MyType': 'StartD', 'Name': 'ep8', 'Machine': 'ep8', 'MyAddress': '<127.0.0.1:2>'})], 'UPDATE_STARTD_AD')
# The queries are asked again until every advertise has landed.
deadline = time.time() + 30
while True:
    startd = coll.query(htcondor2.AdType.Startd, constraint='Machine == "ep9"', projection=['Name', 'AuthenticatedIdentity'])
    widgets = coll.query(htcondor2.AdType.Any, constraint='MyType == "Widget"')
    daemons = coll.query(htcondor2.AdType.StartDaemon)
    scheds = coll.query(htcondor2.AdType.Schedd, projection=['Name'])
    if (len(startd) == 2 and widgets and len(daemons) >= 2 and 'ap9' in [a['Name'] for a in scheds]) or time.time() > deadline:
        break
    time.sleep(0.2)
colls = coll.query(htcondor2.AdType.Collector)
loc = coll.locate(htcondor2.DaemonType.Collector)
print(json.dumps({
  'startd': sorted([a['Name'], a['AuthenticatedIdentity']] for a in startd),
  'widgets': [dict(a) for a in widgets],
  'daemons': [[a['Name'], a['MyType'], 'State' in a] for a in daemons],
  'scheds': sorted(a['Name'] for a in scheds),
  'colls': [[a['Name'], a['MyAddress'], a['CondorVersion'], a['Machine'], a['RecentDaemonCoreDutyCycle']] for a in colls],
  'loc': loc['MyAddress'],
}))
`)
	if err != nil {
		t.Fatalf("client: %v\n%s", err, out)
	}
	var got struct {
		Startd  [][]string       `json:"startd"`
		Widgets []map[string]any `json:"widgets"`
		Daemons [][]any          `json:"daemons"`
		Scheds  []string         `json:"scheds"`
		Colls   [][]any          `json:"colls"`
		Loc     string           `json:"loc"`
	}
	lastJSON(t, out, &got)
	user := currentUser(t)
	if len(got.Startd) != 2 || got.Startd[0][0] != "slot1@ep9" || got.Startd[1][0] != "slot2@ep9" {
		t.Errorf("slots after advertising 3 and withdrawing slot3 = %v", got.Startd)
	}
	for _, s := range got.Startd {
		if s[1] != user {
			t.Errorf("%s's AuthenticatedIdentity = %q, want the proven %q", s[0], s[1], user)
		}
	}
	if len(got.Widgets) != 1 || got.Widgets[0]["Name"] != "w1" || got.Widgets[0]["Colour"] != "blue" {
		t.Errorf("generic ad = %v", got.Widgets)
	}
	// n1's first slot has no SlotID: pond's startd sets one, these test
	// ads do not.
	if len(got.Daemons) != 2 || got.Daemons[0][0] != "slot1@ep9" || got.Daemons[0][1] != "StartD" || got.Daemons[0][2] != false ||
		got.Daemons[1][0] != "ep8" || got.Daemons[1][1] != "StartD" {
		t.Errorf("startd daemon ads = %v, want one made from slot1@ep9 without State, and ep8's own", got.Daemons)
	}
	if got := storedNames(t, c, wire.TypeMachine, ""); strings.Join(got, ",") != "slot1@ep9,slot1@n1,slot2@ep9,slot2@n1" {
		t.Errorf("slots = %v: the startd's own ad is not a slot", got)
	}
	if strings.Join(got.Scheds, ",") != "ap9,n1" {
		t.Errorf("schedds = %v", got.Scheds)
	}
	if len(got.Colls) != 1 || got.Colls[0][0] != "cm" || got.Colls[0][1] != "<127.0.0.1:9618>" ||
		!strings.HasPrefix(got.Colls[0][2].(string), "$CondorVersion: 25.") || got.Colls[0][3] != "cm" {
		t.Errorf("collector ads = %v", got.Colls)
	}
	if got.Loc != "<127.0.0.1:9618>" {
		t.Errorf("locate(Collector) = %q", got.Loc)
	}
	// Ads advertised over CEDAR go with their node.
	if n := c.NodeLost("ep9"); n != 2 {
		t.Errorf("NodeLost(ep9) dropped %d sources, want the 2 slots", n)
	}
}

func currentUser(t *testing.T) string {
	t.Helper()
	out, err := htcondorClient(t, "unused", "", "import getpass; print(getpass.getuser())")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}

// TestCedarAdvertiseRefused advertises what pond's update route would
// refuse: without the scope for the ad's type, an ad of another type than
// the command's, a node's identity advertising another node's ads, a
// generic ad without a type, the collector's own type. Nothing of it is
// stored; the collector goes on serving.
func TestCedarAdvertiseRefused(t *testing.T) {
	tests := []struct {
		name    string
		subject string
		scopes  []auth.Scope
		program string
		denied  bool // the client is told: its command is not authorized
	}{
		{"read only", "", []auth.Scope{auth.Read},
			`coll.advertise([classad.ClassAd({'Name': 'slot1@x', 'MyType': 'Machine'})], 'UPDATE_STARTD_AD')`, true},
		{"read only generic", "", []auth.Scope{auth.Read},
			`coll.advertise([classad.ClassAd({'Name': 'x', 'MyType': 'Widget'})])`, true},
		{"schedd scope sends startd", "", []auth.Scope{auth.AdvertiseSchedd},
			`coll.advertise([classad.ClassAd({'Name': 'slot1@x'})], 'UPDATE_STARTD_AD')`, true},
		{"schedd scope sends generic machine", "", []auth.Scope{auth.AdvertiseSchedd},
			`coll.advertise([classad.ClassAd({'Name': 'slot1@x', 'MyType': 'Machine'})])`, false},
		{"startd scope sends generic widget", "", []auth.Scope{auth.AdvertiseStartd},
			`coll.advertise([classad.ClassAd({'Name': 'x', 'MyType': 'Widget'})])`, false},
		{"type differs from command", "", []auth.Scope{auth.Daemon},
			`coll.advertise([classad.ClassAd({'Name': 'x', 'MyType': 'Machine'})], 'UPDATE_SCHEDD_AD')`, false},
		{"generic without type", "", []auth.Scope{auth.Daemon},
			`coll.advertise([classad.ClassAd({'Name': 'x'})])`, false},
		{"collector type", "", []auth.Scope{auth.Daemon},
			`coll.advertise([classad.ClassAd({'Name': 'x', 'MyType': 'Collector'})])`, false},
		{"no name", "", []auth.Scope{auth.Daemon},
			`coll.advertise([classad.ClassAd({'Cpus': 1})], 'UPDATE_STARTD_AD')`, false},
		{"node advertises another node", "node/n2", []auth.Scope{auth.AdvertiseStartd},
			`coll.advertise([classad.ClassAd({'Name': 'slot1@x', 'Machine': 'x'})], 'UPDATE_STARTD_AD')`, false},
		{"node withdraws another node", "node/n2", []auth.Scope{auth.AdvertiseStartd},
			`coll.advertise([classad.ClassAd({'Requirements': classad.ExprTree('true')})], 'INVALIDATE_STARTD_ADS')`, false},
		{"read only withdraws", "", []auth.Scope{auth.Read},
			`coll.advertise([classad.ClassAd({'Requirements': classad.ExprTree('true')})], 'INVALIDATE_STARTD_ADS')`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := seedCollector(t)
			before := storedNames(t, c, wire.TypeAny, "")
			addr, _ := cedarCollectorAs(t, c, func(user string) *auth.Claims {
				sub := tt.subject
				if sub == "" {
					sub = user
				}
				// READ as well, to query afterwards.
				return &auth.Claims{Subject: sub, Scopes: append([]auth.Scope{auth.Read}, tt.scopes...)}
			})
			out, err := htcondorClient(t, addr, "", "from htcondor2 import classad\ncoll = htcondor2.Collector(ADDR)\n"+
				tt.program+"\nprint('sent')")
			if tt.denied && err == nil {
				t.Errorf("the client was not told its advertisement was refused: %s", out)
			}
			after := storedNames(t, c, wire.TypeAny, "")
			if strings.Join(after, ",") != strings.Join(before, ",") {
				t.Errorf("ads changed from %v to %v", before, after)
			}
			// The collector still answers.
			if out, err := htcondorClient(t, addr, "", `print(len(htcondor2.Collector(ADDR).query(htcondor2.AdType.Startd)))`); err != nil {
				t.Errorf("after the refusal: %v\n%s", err, out)
			}
		})
	}
}

// TestCedarNodeAdvertisesItsOwn checks the other side of the binding: a
// node's identity advertises and withdraws its own node's slots.
func TestCedarNodeAdvertisesItsOwn(t *testing.T) {
	c := seedCollector(t)
	addr, _ := cedarCollectorAs(t, c, func(string) *auth.Claims {
		return &auth.Claims{Subject: "node/ep7", Scopes: []auth.Scope{auth.AdvertiseStartd}}
	})
	run := func(program string) {
		t.Helper()
		out, err := htcondorClient(t, addr, "", "from htcondor2 import classad\ncoll = htcondor2.Collector(ADDR)\n"+program+"\nprint('done')")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	// The client does not wait for its ads to be stored, and its next
	// connection may be served before the last ads of this one: wait.
	run(`coll.advertise([classad.ClassAd({'Name': 'slot%d@ep7' % i, 'Machine': 'ep7'}) for i in (1, 2)], 'UPDATE_STARTD_AD')`)
	waitStoredNames(t, c, wire.TypeMachine, "slot1@ep7,slot1@n1,slot2@ep7,slot2@n1")
	run(`coll.advertise([classad.ClassAd({'Requirements': classad.ExprTree('true')})], 'INVALIDATE_STARTD_ADS')`)
	// The withdrawal of every slot took only ep7's: n1's stay.
	waitStoredNames(t, c, wire.TypeMachine, "slot1@n1,slot2@n1")
}

// waitStoredNames waits up to 10 s for the Names of the live ads of typ to
// be want (sorted, comma-separated): an advertisement over CEDAR is not
// answered, so its sender cannot know when it is stored.
func waitStoredNames(t *testing.T, c *Collector, typ, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := strings.Join(storedNames(t, c, typ, ""), ",")
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("slots = %s, want %s", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cedarPair returns the two ends of a connection as CEDAR streams, without
// a handshake.
func cedarPair(t testing.TB) (client, server *cedar.Stream) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	done := make(chan net.Conn)
	go func() {
		conn, _ := l.Accept()
		done <- conn
	}()
	cc, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sc := <-done
	t.Cleanup(func() { cc.Close(); sc.Close() })
	return cedar.NewStream(cc, nil, cedar.Limits{}), cedar.NewStream(sc, nil, cedar.Limits{})
}

// TestCedarMalformedUpdates sends ads HTCondor's client would never send:
// an attribute that does not parse, a private ad cut short, a command that
// may not follow an update. Each ends the connection with an error and
// nothing of the bad ad stored.
func TestCedarMalformedUpdates(t *testing.T) {
	daemon := &auth.Claims{Subject: "d", Scopes: []auth.Scope{auth.Daemon}}
	raw := func(s *cedar.Stream, lines ...string) {
		_ = s.PutInt(int64(len(lines)))
		for _, l := range lines {
			_ = s.PutString(l)
		}
		_ = s.PutString("Machine")
		_ = s.PutString("")
	}
	tests := []struct {
		name  string
		num   int
		write func(s *cedar.Stream)
		want  string // names stored
	}{
		{"attribute does not parse", 0, func(s *cedar.Stream) {
			raw(s, `Name = "slot1@x"`, `Cpus = (1 +`)
			_ = s.EndMessage()
		}, ""},
		{"private ad cut short", 0, func(s *cedar.Stream) {
			raw(s, `Name = "slot1@x"`)
			_ = s.PutInt(3)
			_ = s.PutString(`ClaimId = "c"`)
			_ = s.EndMessage()
		}, ""},
		{"query command after an update", 0, func(s *cedar.Stream) {
			raw(s, `Name = "slot1@x"`)
			_ = s.EndMessage()
			_ = s.PutInt(5)
			raw(s, `Name = "slot2@x"`)
			_ = s.EndMessage()
		}, "slot1@x"},
		{"second ad malformed", 0, func(s *cedar.Stream) {
			raw(s, `Name = "slot1@x"`)
			_ = s.EndMessage()
			_ = s.PutInt(0)
			raw(s, `Name = `)
			_ = s.EndMessage()
		}, "slot1@x"},
		{"forged attribute count", 58, func(s *cedar.Stream) {
			_ = s.PutInt(1 << 40)
			_ = s.EndMessage()
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(Options{})
			cli, srv := cedarPair(t)
			go func() { tt.write(cli); cli.Conn().(*net.TCPConn).CloseWrite() }()
			if err := c.serveCedarUpdates(context.Background(), srv, tt.num, daemon); err == nil {
				t.Errorf("no error")
			}
			if got := strings.Join(storedNames(t, c, wire.TypeAny, ""), ","); got != tt.want {
				t.Errorf("stored %q, want %q", got, tt.want)
			}
		})
	}
}

// FuzzCedarUpdates feeds arbitrary messages to the update commands: no
// panic, and whatever is stored has a Name.
func FuzzCedarUpdates(f *testing.F) {
	f.Add(0, []byte("\x00\x00\x00\x00\x00\x00\x00\x01Name = \"slot1@x\"\x00Machine\x00\x00"))
	f.Add(58, []byte("\x00\x00\x00\x00\x00\x00\x00\x02Name = \"w\"\x00MyType = \"W\"\x00\x00\x00"))
	f.Add(13, []byte("\x00\x00\x00\x00\x00\x00\x00\x01Requirements = true\x00\x00\x00"))
	daemon := &auth.Claims{Subject: "d", Scopes: []auth.Scope{auth.Daemon}}
	f.Fuzz(func(t *testing.T, num int, payload []byte) {
		if _, ok := cedarUpdates[num]; !ok {
			return
		}
		var pkt bytes.Buffer
		pkt.WriteByte(1)
		pkt.Write([]byte{byte(len(payload) >> 24), byte(len(payload) >> 16), byte(len(payload) >> 8), byte(len(payload))})
		pkt.Write(payload)
		c := New(Options{})
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		s := cedar.NewStream(b, &pkt, cedar.Limits{MaxMessage: 1 << 16})
		_ = c.serveCedarUpdates(context.Background(), s, num, daemon)
		for _, e := range c.entries(wire.TypeAny, func(*classad.Ad) bool { return true }) {
			if n, _ := e.ad.EvalAttr("Name").StringValue(); n == "" {
				t.Fatalf("stored an ad without a Name: %s", e.ad)
			}
		}
	})
}
