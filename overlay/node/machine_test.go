package node

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/startd"
	"github.com/pond-htc/pond/overlay/agent"
)

// TestSeaAdAgreesWithSlots starts an agent with its node services in
// process and checks that the machine ad the sea matches against offers
// what the node's startd offers: the configuration's NUM_CPUS and MEMORY
// when the file sets them, the detected ones otherwise.
func TestSeaAdAgreesWithSlots(t *testing.T) {
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
	dir := t.TempDir()
	path := filepath.Join(dir, "condor_config")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	type ads struct {
		sea   *classad.Ad
		slots []*classad.Ad
		stop  func(context.Context) error // waits for the daemons to stop
	}
	got := make(chan ads, 1)
	hook := func(ctx context.Context, a *agent.Agent) error {
		n, err := Start(ctx, a)
		if err != nil {
			return err
		}
		go func() {
			defer a.Leave()
			for ctx.Err() == nil {
				if sd, ok := n.condor.master.Daemon("STARTD").(*startd.Startd); ok {
					if slots := sd.Slots(); len(slots) > 0 {
						got <- ads{n.MachineAd(), slots, n.condor.master.Stop}
						return
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		return nil
	}
	args := []string{"-name", "m", "-bind", "127.0.0.1:0", "-api", "127.0.0.1:0", "-data-dir", filepath.Join(dir, "data"),
		"-gossip-profile", "fast", "-config", path}
	var log syncBuffer
	if code := agent.MainWith(ctx, args, &log, &log, hook); code != 0 {
		t.Fatalf("agent exit %d:\n%s", code, log.String())
	}
	select {
	case r := <-got:
		if err := r.stop(ctx); err != nil {
			t.Error(err)
		}
		return r.sea, r.slots
	default:
		t.Fatalf("the startd built no slots (%v):\n%s", ctx.Err(), log.String())
		return nil, nil
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
