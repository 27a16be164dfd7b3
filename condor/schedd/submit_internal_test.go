package schedd

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/pond-htc/pond/condor/classad"
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

// TestSharedParser: ads parsed from many goroutines at once through one
// sharedParser are those wire.ToClassAd makes; an unparsable attribute is
// an error naming it, and parses nothing into the parser; the texts kept
// are bounded.
func TestSharedParser(t *testing.T) {
	ads := make([]wire.Ad, 200)
	for i := range ads {
		ads[i] = wire.Ad{"Owner": `"alice"`, "Requirements": "TARGET.Memory >= RequestMemory",
			"RequestMemory": strconv.Itoa(128 * (1 + i%3)), "ProcId": strconv.Itoa(i), "Args": strconv.Quote(strconv.Itoa(i % 7))}
	}
	var sp sharedParser
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < len(ads); i += 8 {
				ad, err := sp.ad(ads[i])
				if err != nil {
					errs <- err
					return
				}
				want, _ := wire.ToClassAd(ads[i])
				if ad.String() != want.String() {
					errs <- fmt.Errorf("ad %d:\n%s\nwant\n%s", i, ad, want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	before := len(sp.p)
	if _, err := sp.ad(wire.Ad{"Owner": `"alice"`, "Fresh": "1234567", "Zbroken": "1 +"}); err == nil || !strings.Contains(err.Error(), "Zbroken") {
		t.Errorf("unparsable ad: %v", err)
	}
	if len(sp.p) != before {
		t.Errorf("an unparsable ad added %d texts to the parser", len(sp.p)-before)
	}
	for i := range maxParsed + 10 {
		if _, err := sp.ad(wire.Ad{"ProcId": strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if len(sp.p) > maxParsed+1 {
		t.Errorf("%d texts kept, more than %d", len(sp.p), maxParsed+1)
	}
}

// TestParsersKeepRecordsApart: a record literal's names it lacks resolve
// in the ad it is an attribute of, each ad its own, whichever ad was
// parsed first.
func TestParsersKeepRecordsApart(t *testing.T) {
	ads := []wire.Ad{{"X": "1", "R": "[ y = X ]"}, {"X": "2", "R": "[ y = X ]"}}
	ry, err := classad.ParseExpr("R.y")
	if err != nil {
		t.Fatal(err)
	}
	var sp sharedParser
	p := adParser{}
	for name, parse := range map[string]func(wire.Ad) (*classad.Ad, error){"adParser": p.ad, "sharedParser": sp.ad} {
		for i, a := range ads {
			ad, err := parse(a)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := classad.EvalWith(ry, ad, nil).IntValue(); got != int64(i+1) {
				t.Errorf("%s: ad %d: R.y = %d, want %d", name, i, got, i+1)
			}
		}
	}
}
