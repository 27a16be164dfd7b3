package api

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestFactoryPrefix: every pool name, HCL's underscores included, gives a prefix
// of glidein IDs' characters, and no pool's prefix begins another's.
func TestFactoryPrefix(t *testing.T) {
	pools := []string{"campus", "Campus2", "campus-west", "campus_west", "campuswest", "more_workers",
		"a", "a-b", "a_b", "ab", strings.Repeat("x", 40), strings.Repeat("x", 41)}
	valid := regexp.MustCompile(`^pond-[a-z0-9]{1,26}-$`)
	for _, p := range pools {
		if got := FactoryPrefix(p); !valid.MatchString(got) {
			t.Errorf("FactoryPrefix(%q) = %q: not letters and digits between pond- and -", p, got)
		}
	}
	if got := FactoryPrefix("campus"); got != "pond-campus-" {
		t.Errorf(`FactoryPrefix("campus") = %q, want "pond-campus-"`, got)
	}
	for _, a := range pools {
		for _, b := range pools {
			if a != b && strings.HasPrefix(FactoryPrefix(b), FactoryPrefix(a)) {
				t.Errorf("the prefix of pool %q (%s) begins that of pool %q (%s)", a, FactoryPrefix(a), b, FactoryPrefix(b))
			}
		}
	}
}

const goodFactoryEntry = `{"name": "hpc", "site": {"kind": "slurm", "config": {"Partition": "debug"}},
 "template": {"cpus": 4, "memory_mb": 8000, "gpus": 1, "lifetime": "4h", "idle_timeout": 600,
  "attributes": {"HasCvmfs": "true"}, "validate": [{"type": "disk", "min_mb": 1024}]},
 "limits": {"max_queued": 5, "max_running": 20, "max_submit_per_cycle": 2},
 "breaker": {"failures": 4, "window": "5m", "backoff": "30m"}}`

func TestParseFactoryEntry(t *testing.T) {
	e, err := ParseFactoryEntry([]byte(goodFactoryEntry))
	if err != nil {
		t.Fatal(err)
	}
	if time.Duration(e.Template.Lifetime) != 4*time.Hour || time.Duration(e.Template.IdleTimeout) != 10*time.Minute ||
		e.Limits.MaxRunning != 20 || e.Breaker.Failures != 4 || time.Duration(e.Breaker.Backoff) != 30*time.Minute {
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
		{"negative max jobs", `"cpus": 4`, `"cpus": 4, "max_jobs": -1`, "template.max_jobs"},
		{"control character in address", `"name": "hpc"`, `"name": "hpc", "address": "glidein.a\u0007"`, "address:"},
		{"lineage too long", `"name": "hpc"`, `"name": "hpc", "lineage": "` + strings.Repeat("l", 1025) + `"`, "lineage:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(goodFactoryEntry, tc.from, tc.to, 1)
			if src == goodFactoryEntry {
				t.Fatal("the case changes nothing")
			}
			_, err := ParseFactoryEntry([]byte(src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
}

func FuzzParseFactoryEntry(f *testing.F) {
	f.Add([]byte(goodFactoryEntry))
	f.Add([]byte(`{"name": "a", "template": {"lifetime": 1e300}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := ParseFactoryEntry(data)
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
