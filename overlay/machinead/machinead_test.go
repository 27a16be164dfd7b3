package machinead

import (
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/pond-htc/pond/overlay/api"
)

type source struct {
	self api.Self
	cpus int64
}

func (s source) Self() api.Self           { return s.self }
func (s source) CpusInUse() (int64, bool) { return s.cpus, s.cpus > 0 }

// TestAd checks what the live ad says of the node beyond its static
// attributes: where its API is, its quarantine and end, its cores in use,
// and its pond's stamps, which a later stamp replaces.
func TestAd(t *testing.T) {
	end := time.Unix(2000000000, 0)
	m := New("n1", nil, map[string]any{"Slot": int64(3)}, "", t.TempDir(), slog.New(slog.DiscardHandler))
	src := source{self: api.Self{API: "10.0.0.1:9000", Reach: api.ReachReverse, Relay: "cm", Pool: "campus", CondorHost: "10.0.0.2:9000",
		Quarantine: &api.Quarantine{Reason: "black hole"}, EndTime: end}, cpus: 2}
	m.Stamp(map[string]string{"PondName": `"p1"`, "Note": "two words"})
	ad := m.Get(src)
	for name, want := range map[string]string{"Name": `"n1"`, "Slot": "3", "PondAPI": `"10.0.0.1:9000"`, "PondReach": `"reverse"`,
		"PondRelay": `"cm"`, "PondPool": `"campus"`, "CpusInUse": "2", "PondQuarantined": "true", "PondQuarantineReason": `"black hole"`,
		"PondEndTime": "2000000000", "PondName": `"p1"`, "Note": `"two words"`, "MyType": `"Machine"`} {
		e, ok := ad.Lookup(name)
		if !ok || e.String() != want {
			t.Errorf("%s = %v (%v), want %s", name, e, ok, want)
		}
	}
	all := m.Stamps(map[string]string{"PondDrainReason": `"spot"`})
	if want := map[string]string{"PondName": `"p1"`, "Note": "two words", "PondDrainReason": `"spot"`}; !maps.Equal(all, want) {
		t.Errorf("Stamps = %v, want %v", all, want)
	}
	if e, ok := m.Get(src).Lookup("PondDrainReason"); !ok || e.String() != `"spot"` {
		t.Errorf("a new stamp is not in the ad at once: %v", e)
	}
}

func TestStartdAttrs(t *testing.T) {
	got := StartdAttrs(map[string]any{"Name": "n1", "Cpus": int64(4), "Slot": int64(3), "Fast": true, "Load": 1.0, "Site": "x"},
		"10.0.0.1:9000", api.ReachDirect, "")
	want := map[string]string{"Slot": "3", "Fast": "true", "Load": "1.0", "Site": `"x"`, "PondAPI": `"10.0.0.1:9000"`, "PondReach": `"direct"`}
	if !maps.Equal(got, want) {
		t.Errorf("StartdAttrs = %v, want %v", got, want)
	}
}
