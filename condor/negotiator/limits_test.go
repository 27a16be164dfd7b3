package negotiator

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/wire"
)

func TestParseLimits(t *testing.T) {
	cases := []struct {
		in   string
		want []LimitUse
		err  string
	}{
		{in: "", want: nil},
		{in: "XSW", want: []LimitUse{{"xsw", 1}}},
		{in: "a, b:2", want: []LimitUse{{"a", 1}, {"b", 2}}},
		{in: "large.license:0.5 db", want: []LimitUse{{"large.license", 0.5}, {"db", 1}}},
		{in: "a:x", err: "must be a number"},
		{in: "a:-1", err: "must be a number"},
		{in: ":3", err: "has no name"},
		{in: "a(b)", err: "not allowed"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseLimits(c.in)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("ParseLimits(%q) = %v, %v; want an error with %q", c.in, got, err, c.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("ParseLimits(%q) = %v, %v; want %v", c.in, got, err, c.want)
			}
		})
	}
}

func FuzzParseLimits(f *testing.F) {
	for _, s := range []string{"a, b:2", "x.y:0.5", ":", "a:b:c", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		uses, err := ParseLimits(s)
		if err != nil {
			return
		}
		for _, u := range uses {
			if u.Name == "" || u.Weight < 0 || math.IsNaN(u.Weight) || u.Name != strings.ToLower(u.Name) {
				t.Fatalf("ParseLimits(%q) gave %+v", s, u)
			}
		}
	})
}

// TestLimitMax checks HTCondor's order: NAME_LIMIT, then the family's
// CONCURRENCY_LIMIT_DEFAULT_FAMILY, then CONCURRENCY_LIMIT_DEFAULT.
func TestLimitMax(t *testing.T) {
	cfg := config.New(config.Options{})
	for k, v := range map[string]string{"XSW_LIMIT": "4", "CONCURRENCY_LIMIT_DEFAULT": "2",
		"CONCURRENCY_LIMIT_DEFAULT_SMALL": "3", "CONCURRENCY_LIMIT_DEFAULT_LARGE": "1", "LARGE.SPECIAL_LIMIT": "7",
		"BAD_LIMIT": "lots"} {
		if err := cfg.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name string
		max  float64
		err  bool
	}{
		{name: "xsw", max: 4},
		{name: "undefined", max: 2},
		{name: "small.license", max: 3},
		{name: "large.license", max: 1},
		{name: "large.special", max: 7},
		{name: "other.license", max: 2},
		{name: "bad", err: true},
	}
	for _, c := range cases {
		m, ok, err := LimitMax(cfg, c.name)
		if c.err {
			if err == nil {
				t.Errorf("LimitMax(%s) = %v, %v: want an error", c.name, m, ok)
			}
			continue
		}
		if err != nil || !ok || m != c.max {
			t.Errorf("LimitMax(%s) = %v, %v, %v; want %v", c.name, m, ok, err, c.max)
		}
	}
	if _, ok, err := LimitMax(config.New(config.Options{}), "xsw"); ok || err != nil {
		t.Errorf("LimitMax without knobs = bounded %v, %v; want unbounded", ok, err)
	}
}

// TestMatchmakeWithinLimits matches jobs of two submitters that use
// concurrency limits against plenty of slots: no more are matched than
// each limit has room for, counting what is already held.
func TestMatchmakeWithinLimits(t *testing.T) {
	cfg := config.New(config.Options{})
	for k, v := range map[string]string{"XSW_LIMIT": "3", "DB_LIMIT": "2"} {
		if err := cfg.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	job := func(limits string) string {
		s := "RequestCpus = 1\nRequestMemory = 100\nRequestDisk = 10\nRequirements = true\n"
		if limits != "" {
			s += fmt.Sprintf("ConcurrencyLimits = %q\n", limits)
		}
		return s
	}
	many := func(n int, limits string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = job(limits)
		}
		return out
	}
	var slots []string
	for i := 0; i < 20; i++ {
		slots = append(slots, slotAd(fmt.Sprintf("slot%d", i), defSlot))
	}
	cases := []struct {
		name string
		held []LimitUse
		subs []poolSub
		want map[string]int // limits -> matched jobs
	}{
		{name: "one limit over two users", subs: []poolSub{
			{name: "alice", prio: 1, jobs: many(5, "xsw")}, {name: "bob", prio: 1, jobs: many(5, "XSW")}},
			want: map[string]int{"xsw": 3}},
		{name: "held counts", held: []LimitUse{{"xsw", 2}}, subs: []poolSub{
			{name: "alice", prio: 1, jobs: many(5, "xsw")}}, want: map[string]int{"xsw": 1}},
		{name: "weights", subs: []poolSub{{name: "alice", prio: 1, jobs: many(5, "db:2")}},
			want: map[string]int{"db:2": 1}},
		{name: "both limits", subs: []poolSub{{name: "alice", prio: 1, jobs: append(many(5, "xsw, db"), many(5, "xsw")...)}},
			want: map[string]int{"xsw, db": 2, "xsw": 1}},
		{name: "unbounded and none", subs: []poolSub{{name: "alice", prio: 1, jobs: append(many(4, "other"), many(4, "")...)}},
			want: map[string]int{"other": 4, "": 4}},
		{name: "unparsable", subs: []poolSub{{name: "alice", prio: 1, jobs: many(2, "a:b")}}, want: map[string]int{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sl, subs := pool{slots: slots, subs: c.subs}.build(t)
			lim := newLimiter(cfg, time.Now(), func(msg string, args ...any) { t.Log(append([]any{msg}, args...)...) })
			lim.add(c.held)
			ms, _ := matchmake(sl, subs, lim, nil, JobRanks{})
			got := map[string]int{}
			for _, m := range ms {
				v, _ := m.Job.Ad.EvalAttr("ConcurrencyLimits").StringValue()
				got[v]++
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("matched %v; want %v", got, c.want)
			}
			if len(lim.shares) != len(subs) {
				t.Fatalf("%d fair shares recorded for %d submitters", len(lim.shares), len(subs))
			}
			if len(lim.made) != len(ms)-got[""] {
				t.Fatalf("%d matches with limits recorded, want %d", len(lim.made), len(ms)-got[""])
			}
		})
	}
}

// TestLimitAttrs checks the negotiator's ad shows what the pool holds of
// each limit under HTCondor's attribute name, and its bound.
func TestLimitAttrs(t *testing.T) {
	cfg := config.New(config.Options{})
	if err := cfg.Set("LARGE.LIC_LIMIT", "5"); err != nil {
		t.Fatal(err)
	}
	n, err := New(Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	lim := newLimiter(cfg, time.Now(), func(msg string, args ...any) { t.Log(append([]any{msg}, args...)...) })
	lim.add([]LimitUse{{"large.lic", 2}, {"free", 1}})
	lim.blocked["large.lic"] = 4
	lim.share(Submitter{Name: "alice@pool", Priority: 0.5, Running: 3}, 3)
	n.recordMatches(lim)
	ad := classad.NewAd()
	n.setLimitAttrs(ad)
	// As the collector and the tools see it.
	ad, err = wire.ToClassAd(wire.FromClassAd(ad))
	if err != nil {
		t.Fatal(err)
	}
	for attr, want := range map[string]float64{"ConcurrencyLimit_large_lic": 2, "ConcurrencyLimit_free": 1,
		"PondConcurrencyLimitMax_large_lic": 5, "PondConcurrencyLimitBlocked_large_lic": 4} {
		if got, ok := ad.EvalAttr(attr).NumberValue(); !ok || got != want {
			t.Errorf("%s = %v (%v); want %v", attr, got, ok, want)
		}
	}
	if _, ok := ad.Lookup("PondConcurrencyLimitMax_free"); ok {
		t.Error("an unbounded limit shows a bound")
	}
	if _, ok := ad.Lookup("PondConcurrencyLimitBlocked_free"); ok {
		t.Error("a limit that held back no job shows blocked jobs")
	}
	shares, ok := ad.EvalAttr(SharesAttr).ListValue()
	if !ok || len(shares) != 1 {
		t.Fatalf("%s = %v", SharesAttr, ad.EvalAttr(SharesAttr))
	}
	rec, _ := shares[0].AdValue()
	name, _ := rec.EvalAttr("Name").StringValue()
	prio, _ := rec.EvalAttr("Priority").NumberValue()
	run, _ := rec.EvalAttr("Running").IntValue()
	share, _ := rec.EvalAttr("Share").NumberValue()
	if name != "alice@pool" || prio != 0.5 || run != 3 || share != 3 {
		t.Errorf("share record %v", rec)
	}
}

// TestLimitAttrsRemembered: a limit no job holds any more stays in the
// negotiator's ad at 0 in use, with its bound read again from the
// configuration.
func TestLimitAttrsRemembered(t *testing.T) {
	cfg := config.New(config.Options{})
	if err := cfg.Set("XSW_LIMIT", "3"); err != nil {
		t.Fatal(err)
	}
	n, err := New(Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	logf := func(msg string, args ...any) { t.Log(append([]any{msg}, args...)...) }
	lim := newLimiter(cfg, time.Now(), logf)
	lim.add([]LimitUse{{"xsw", 2}})
	n.recordMatches(lim)
	if err := cfg.Set("XSW_LIMIT", "4"); err != nil {
		t.Fatal(err)
	}
	n.recordMatches(newLimiter(cfg, time.Now(), logf)) // a cycle with nothing in use
	ad := classad.NewAd()
	n.setLimitAttrs(ad)
	for attr, want := range map[string]float64{"ConcurrencyLimit_xsw": 0, "PondConcurrencyLimitMax_xsw": 4} {
		if got, ok := ad.EvalAttr(attr).NumberValue(); !ok || got != want {
			t.Errorf("%s = %v (%v); want %v", attr, got, ok, want)
		}
	}
}
