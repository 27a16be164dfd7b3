package factory

import (
	"github.com/pond-htc/pond/overlay/api"
	"strings"
	"testing"
	"time"
)

const goodEntry = `{"name": "hpc", "site": {"kind": "slurm", "config": {"Partition": "debug"}},
 "template": {"cpus": 4, "memory_mb": 8000, "gpus": 1, "lifetime": "4h", "idle_timeout": 600,
  "attributes": {"HasCvmfs": "true"}, "validate": [{"type": "disk", "min_mb": 1024}]},
 "limits": {"max_queued": 5, "max_running": 20, "max_submit_per_cycle": 2},
 "breaker": {"failures": 4, "window": "5m", "backoff": "30m"}}`

func TestParseEntry(t *testing.T) {
	e, err := ParseEntry([]byte(goodEntry))
	if err != nil {
		t.Fatal(err)
	}
	if time.Duration(e.Template.Lifetime) != 4*time.Hour || time.Duration(e.Template.IdleTimeout) != 10*time.Minute ||
		e.Limits.MaxRunning != 20 || entryBreaker(&e).Failures != 4 || time.Duration(entryBreaker(&e).Backoff) != 30*time.Minute {
		t.Fatalf("parsed %+v", e)
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"bad name", `"name": "hpc"`, `"name": "HPC!"`, "name:"},
		{"no kind", `"kind": "slurm"`, `"kind": ""`, "site.kind"},
		{"no cpus", `"cpus": 4`, `"cpus": 0`, "template.cpus"},
		{"no memory", `"memory_mb": 8000`, `"memory_mb": -1`, "template.memory_mb"},
		{"short life", `"lifetime": "4h"`, `"lifetime": "10s"`, "template.lifetime"},
		{"bad duration", `"lifetime": "4h"`, `"lifetime": "soon"`, "soon"},
		{"bad attribute", `"HasCvmfs": "true"`, `"HasCvmfs": "(("`, "template.attributes.HasCvmfs"},
		{"bad attribute name", `"HasCvmfs": "true"`, `"Has Cvmfs": "true"`, "not a ClassAd attribute name"},
		{"bad check", `"type": "disk"`, `"type": "teapot"`, "template.validate"},
		{"queued over running", `"max_queued": 5`, `"max_queued": 50`, "limits.max_queued"},
		{"negative limit", `"max_submit_per_cycle": 2`, `"max_submit_per_cycle": -2`, "limits"},
		{"unknown field", `"cpus": 4`, `"cpus": 4, "cores": 4`, "unknown field"},
		{"unknown ramp", `"max_submit_per_cycle": 2`, `"max_submit_per_cycle": 2, "ramp": "steep"}`, "limits.ramp"},
		{"slots over cpus", `"cpus": 4`, `"cpus": 4, "slots": 8`, "template.slots"},
		{"control character in address", `"name": "hpc"`, `"name": "hpc", "address": "glidein.a\u0007"`, "address:"},
		{"lineage too long", `"name": "hpc"`, `"name": "hpc", "lineage": "` + strings.Repeat("l", 1025) + `"`, "lineage:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(goodEntry, tc.from, tc.to, 1)
			if src == goodEntry {
				t.Fatal("the case changes nothing")
			}
			_, err := ParseEntry([]byte(src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// TestMachineAds checks the ads a glidein of a template would advertise:
// one partitionable slot with the template's resources, or static slots
// sharing them.
func TestMachineAds(t *testing.T) {
	tpl := api.FactoryTemplate{CPUs: 4, MemoryMB: 8000, GPUs: 2, Attributes: map[string]string{"HasCvmfs": "true"}}
	ads, err := tpl.MachineAds("g")
	if err != nil || len(ads) != 1 {
		t.Fatalf("%d ads, %v", len(ads), err)
	}
	if c, _ := ads[0].EvalAttr("Cpus").IntValue(); c != 4 {
		t.Errorf("Cpus %d", c)
	}
	if p, _ := ads[0].EvalAttr("PartitionableSlot").BoolValue(); !p {
		t.Error("not partitionable")
	}
	if v, _ := ads[0].EvalAttr("HasCvmfs").BoolValue(); !v {
		t.Error("attribute missing")
	}
	tpl.Slots = 2
	ads, _ = tpl.MachineAds("g")
	if len(ads) != 2 {
		t.Fatalf("%d ads", len(ads))
	}
	if m, _ := ads[1].EvalAttr("Memory").IntValue(); m != 4000 {
		t.Errorf("Memory %d", m)
	}
}

func FuzzParseEntry(f *testing.F) {
	f.Add([]byte(goodEntry))
	f.Add([]byte(`{"name": "a", "template": {"lifetime": 1e300}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := ParseEntry(data)
		if err != nil {
			return
		}
		if err := e.Validate(); err != nil {
			t.Fatalf("ParseEntry accepted what Validate refuses: %v", err)
		}
		if _, err := e.Template.MachineAds("g"); err != nil {
			t.Fatalf("a valid entry's ads: %v", err)
		}
	})
}
