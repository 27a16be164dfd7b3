package agent

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
)

// TestSeaAdAgreesWithSlots starts an agent with its node services in
// process and checks that the machine ad the sea matches against offers
// what the node's startd offers: the configuration's NUM_CPUS and MEMORY
// when the file sets them, the detected ones otherwise.
func TestSeaAdAgreesWithSlots(t *testing.T) {
	t.Parallel()
	detected, err := config.New(config.Options{}).Resources()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, config string
		cpus, memory int64
	}{
		{"configured", "NUM_CPUS = 3\nMEMORY = 1536\n", 3, 1536},
		{"detected", "# nothing about the machine\n", int64(detected.CPUs), int64(detected.MemoryMiB)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sea, slots := machineAds(t, tc.config)
			for _, attr := range []string{"Cpus", "Memory"} {
				want := map[string]int64{"Cpus": tc.cpus, "Memory": tc.memory}[attr]
				if got, ok := sea.EvalAttr(attr).IntValue(); !ok || got != want {
					t.Errorf("sea ad %s = %v, want %d", attr, sea.EvalAttr(attr), want)
				}
				var total int64
				for _, s := range slots {
					if dyn, _ := s.EvalAttr("DynamicSlot").BoolValue(); dyn {
						continue
					}
					n, _ := s.EvalAttr("TotalSlot" + attr).IntValue()
					total += n
				}
				if total != want {
					t.Errorf("the startd's slots offer %s = %d, want %d", attr, total, want)
				}
			}
			for _, attr := range []string{"Arch", "OpSys"} {
				a, _ := sea.EvalAttr(attr).StringValue()
				b, _ := slots[0].EvalAttr(attr).StringValue()
				if a == "" || a != b {
					t.Errorf("%s: sea ad %q, slot ad %q", attr, a, b)
				}
			}
		})
	}
}

// machineAds runs an agent configured with cfg until its startd has built
// its slots, and returns its sea ad and slot ads.
func machineAds(t *testing.T, cfg string) (*classad.Ad, []*classad.Ad) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "condor_config")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := ParseArgs([]string{"-name", "m", "-config", path}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	a := startAgents(t, c)[0]
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if slots := a.daemons.Master.Startd().Slots(); len(slots) > 0 {
			return a.MachineAd(), slots
		}
	}
	t.Fatal("the startd built no slots in a minute")
	return nil, nil
}
