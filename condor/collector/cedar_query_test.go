package collector

import (
	"bytes"
	"context"
	"net"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/cedar"
	"github.com/pond-htc/pond/condor/classad"
)

// query sends the query ad q on cli, serves it with typ, and returns the
// Names and MyTypes of the ads answered.
func query(t *testing.T, c *Collector, typ string, q *classad.Ad) []string {
	t.Helper()
	cli, srv := cedarPair(t)
	go func() { _ = cli.PutAd(q, nil); _ = cli.EndMessage() }()
	errc := make(chan error, 1)
	go func() {
		errc <- c.serveCedarQuery(context.Background(), srv, typ, newSelfAd("cm", func() string { return "[::1]:9618" }))
	}()
	var out []string
	for {
		more, err := cli.GetInt()
		if err != nil {
			t.Fatal(err)
		}
		if more == 0 {
			break
		}
		ad, err := cli.GetAd()
		if err != nil {
			t.Fatal(err)
		}
		n, _ := ad.EvalAttr("Name").StringValue()
		my, _ := ad.EvalAttr("MyType").StringValue()
		out = append(out, my+":"+n+":"+strings.Join(ad.SortedNames(), "+"))
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// TestCedarQueryMultiple checks the query of several types at once
// (QUERY_MULTIPLE_ADS): TargetType lists them, each may have its own
// TYPERequirements and TYPEProjection, LimitResults bounds the whole.
func TestCedarQueryMultiple(t *testing.T) {
	c := seedCollector(t)
	tests := []struct {
		name string
		typ  string
		ad   string
		want string
	}{
		{"two types, one constraint each", "", `[ TargetType = "Slot,Scheduler"; SlotRequirements = Cpus > 4; SlotProjection = "Name"; SchedulerProjection = "Name MyAddress" ]`,
			"Machine:slot2@n1:MyType+Name Scheduler:n1:MyAddress+MyType+Name"},
		{"shared requirements", "", `[ TargetType = "Machine"; Requirements = State == "Unclaimed"; Projection = "Name" ]`,
			"Machine:slot1@n1:MyType+Name"},
		{"limit", "", `[ TargetType = "Machine, Scheduler"; LimitResults = 2; Projection = "Name" ]`,
			"Machine:slot1@n1:MyType+Name Machine:slot2@n1:MyType+Name"},
		{"collector", "Collector", `[ Projection = "Name MyAddress" ]`,
			"Collector:cm:MyAddress+MyType+Name"},
		{"constraint not a boolean", "Machine", `[ Requirements = "(" ]`, ""},
		{"a type named twice counts once", "", `[ TargetType = "Machine,machine,MACHINE"; Projection = "Name" ]`,
			"Machine:slot1@n1:MyType+Name Machine:slot2@n1:MyType+Name"},
		{"too many types", "", `[ TargetType = "` + manyTypes(40) + `,Machine" ]`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, err := classad.ParseAd(tt.ad)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(query(t, c, tt.typ, q), " ")
			if got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func manyTypes(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("Type" + strconv.Itoa(i))
	}
	return b.String()
}

// FuzzCedarQuery feeds arbitrary query messages to the collector: no
// panic, and an answer or an error.
func FuzzCedarQuery(f *testing.F) {
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x02TargetType = \"Slot,Scheduler\"\x00SlotRequirements = Cpus > 4\x00Query\x00\x00"))
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x01Projection = \"Name\"\x00Query\x00\x00"))
	c := New(Options{})
	f.Fuzz(func(t *testing.T, payload []byte) {
		var pkt bytes.Buffer
		pkt.Write([]byte{1, byte(len(payload) >> 24), byte(len(payload) >> 16), byte(len(payload) >> 8), byte(len(payload))})
		pkt.Write(payload)
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		go func() { _, _ = bytes.NewBuffer(nil).ReadFrom(a) }()
		s := cedar.NewStream(b, &pkt, cedar.Limits{MaxMessage: 1 << 16})
		_ = c.serveCedarQuery(context.Background(), s, "", nil)
	})
}
