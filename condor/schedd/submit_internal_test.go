package schedd

import (
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/wire"
)

// TestAdParser: the ads of a cluster parsed with shared expressions are
// those wire.ToClassAd makes, each on its own, and stay so when a later
// ad of the cluster is parsed; an unparsable attribute is an error naming
// it.
func TestAdParser(t *testing.T) {
	ads := []wire.Ad{
		{"Owner": `"alice"`, "Requirements": "TARGET.Memory >= RequestMemory", "RequestMemory": "128", "Args": `"0"`, "ProcId": "0"},
		{"Owner": `"alice"`, "Requirements": "TARGET.Memory >= RequestMemory", "RequestMemory": "256", "Args": `"1"`, "ProcId": "1"},
		{"owner": `"alice"`, "Requirements": "true", "RequestMemory": "128", "Args": `"0"`, "ProcId": "2", "Extra": "{ 1, 2 }"},
	}
	p := adParser{}
	var got []string
	for _, a := range ads {
		ad, err := p.ad(a)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ad.String())
	}
	for i, a := range ads {
		want, err := wire.ToClassAd(a)
		if err != nil {
			t.Fatal(err)
		}
		if got[i] != want.String() {
			t.Errorf("ad %d:\n%s\nwant\n%s", i, got[i], want.String())
		}
	}
	if len(p) != 11 {
		t.Errorf("%d texts parsed, want the 11 distinct ones", len(p))
	}
	if _, err := p.ad(wire.Ad{"Owner": `"alice"`, "Broken": "1 +"}); err == nil || !strings.Contains(err.Error(), "Broken") {
		t.Errorf("unparsable ad: %v", err)
	}
}
