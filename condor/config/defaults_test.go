package config

import (
	"strings"
	"testing"

	"github.com/pond-htc/pond/condor/hostinfo"
)

func TestResources(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      Resources
		err       string
	}{
		{"detected", "", Resources{CPUs: 4, MemoryMiB: 8192}, ""},
		{"configured", "NUM_CPUS = 3\nMEMORY = 1536", Resources{CPUs: 3, MemoryMiB: 1536}, ""},
		{"from the detected values", "NUM_CPUS = $(DETECTED_CPUS) / 2\nMEMORY = $(DETECTED_MEMORY) - 192", Resources{CPUs: 2, MemoryMiB: 8000}, ""},
		{"emptied", "NUM_CPUS =\nMEMORY =", Resources{CPUs: 4, MemoryMiB: 8192}, ""},
		{"at least one cpu", "NUM_CPUS = 0", Resources{CPUs: 1, MemoryMiB: 8192}, ""},
		{"bad cpus", "NUM_CPUS = many", Resources{}, "NUM_CPUS"},
		{"bad memory", "MEMORY = 1.5", Resources{}, "MEMORY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseT(t, tc.src).Resources()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Resources() = %+v, %v; want an error naming %s", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Resources() = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestDetectHost(t *testing.T) {
	h := DetectHost()
	if h.CPUs != hostinfo.CPUs() || h.Arch != hostinfo.Arch() || h.OpSys != hostinfo.OpSys() {
		t.Errorf("DetectHost() = %+v; hostinfo says cpus %d, arch %s, opsys %s", h, hostinfo.CPUs(), hostinfo.Arch(), hostinfo.OpSys())
	}
	if mib, err := hostinfo.TotalMemoryMiB(); err == nil && int64(h.MemoryMB) != mib {
		t.Errorf("DetectHost().MemoryMB = %d; hostinfo says %d", h.MemoryMB, mib)
	}
	c := New(Options{})
	for knob, want := range map[string]string{"ARCH": hostinfo.Arch(), "OPSYS": hostinfo.OpSys()} {
		if got, _ := c.Get(knob); got != want {
			t.Errorf("%s = %q, want %q", knob, got, want)
		}
	}
}
