package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/pond-htc/pond/condor/classad"
)

// FactoryEntrySpec is one place a pilot factory (overlay/factory) starts
// glideins: a site and the template of the glideins it starts there, with
// its limits. It is what PUT PathFactoryEntries+NAME takes.
type FactoryEntrySpec struct {
	// Name names the entry in the pool: 1 to 20 lower-case letters,
	// digits and '-'. It is part of every glidein ID of the entry.
	Name string `json:"name"`
	// Site says how the site is reached: the agent builds an overlay/glidein.Site
	// from it (overlay/factory).
	Site FactorySite `json:"site"`
	// Template is what each glidein of the entry is.
	Template FactoryTemplate `json:"template"`
	// Limits bound how many glideins the entry has.
	Limits FactoryLimits `json:"limits"`
	// Breaker says when the entry stops submitting after failures.
	Breaker FactoryBreaker `json:"breaker,omitempty"`
	// Lineage and Address name the state and the resource address that
	// installed the entry (pondctl apply of a glidein resource with a
	// factory block; empty for an entry set by hand). Each glidein's
	// request carries them (overlay/glidein.Request), so that a site that labels
	// what it starts labels the entry's glideins as it labels those
	// pondctl starts itself: the EC2 site's tags pond:lineage and
	// pond:address.
	Lineage string `json:"lineage,omitempty"`
	Address string `json:"address,omitempty"`
}

// maxOwnerLen bounds FactoryEntrySpec.Lineage and FactoryEntrySpec.Address.
const maxOwnerLen = 1024

// FactorySite names the kind of a site and holds its configuration as the
// site package reads it (ssh.Config, slurm.Config in JSON).
type FactorySite struct {
	Kind   string          `json:"kind"`
	Config json.RawMessage `json:"config,omitempty"`
}

// FactoryTemplate is the glidein an entry starts: what it asks of the site and
// what its machine ad says, so that the factory knows which jobs it runs.
type FactoryTemplate struct {
	// Slots, CPUs, MemoryMB, DiskMB and GPUs are what one glidein offers:
	// one partitionable slot of CPUs, MemoryMB, DiskMB and GPUs, or Slots
	// static slots sharing them when Slots > 1.
	Slots    int   `json:"slots,omitempty"`
	CPUs     int   `json:"cpus"`
	MemoryMB int   `json:"memory_mb"`
	DiskMB   int64 `json:"disk_mb,omitempty"`
	GPUs     int   `json:"gpus,omitempty"`
	// Arch and OpSys are HTCondor's names of the site's machines
	// (default X86_64, LINUX).
	Arch  string `json:"arch,omitempty"`
	OpSys string `json:"opsys,omitempty"`
	// Attributes are added to the glidein's machine ad: ClassAd
	// expressions by name.
	Attributes map[string]string `json:"attributes,omitempty"`
	// Lifetime is the most one glidein lives (its batch time limit);
	// IdleTimeout is how long it stays without a claimed slot.
	Lifetime    Duration `json:"lifetime"`
	IdleTimeout Duration `json:"idle_timeout,omitempty"`
	// MaxJobs is the most jobs one glidein runs before it leaves (0: no
	// limit), as -max-jobs.
	MaxJobs int `json:"max_jobs,omitempty"`
	// Validate are the checks it must pass before it joins.
	Validate []ValidationCheck `json:"validate,omitempty"`
	// AgentArgs are added to the glidein's `pondctl agent` arguments,
	// such as ["-bind", "0.0.0.0:0", "-advertise", ...] on a site whose
	// nodes need them.
	AgentArgs []string `json:"agent_args,omitempty"`
}

// FactoryLimits bound an entry's glideins. Zero MaxQueued or MaxRunning means
// none at all; zero MaxSubmitPerCycle means MaxQueued. Ramp says how fast
// the submissions of a cycle grow towards MaxSubmitPerCycle while jobs
// wait.
type FactoryLimits struct {
	// MaxQueued bounds the glideins waiting at the site.
	MaxQueued int `json:"max_queued"`
	// MaxRunning bounds the glideins queued or running together.
	MaxRunning int `json:"max_running"`
	// MaxSubmitPerCycle bounds the submissions of one cycle, the top of
	// the ramp (which starts at one and doubles each cycle with demand).
	MaxSubmitPerCycle int `json:"max_submit_per_cycle,omitempty"`
	// Ramp is RampExponential (also when empty: 1, 2, 4, ... per cycle),
	// RampLinear (1, 2, 3, ...) or RampNone (MaxSubmitPerCycle at once).
	// It starts again from one once nothing is wanted.
	Ramp string `json:"ramp,omitempty"`
	// MaxInstances, when more than zero, bounds the glideins queued or
	// running together as a budget does: a submission it stops is
	// reported (api.FactoryEntry.Capped).
	MaxInstances int `json:"max_instances,omitempty"`
	// MaxHourlyCost, when more than zero, bounds what the entry's
	// glideins cost together, in US dollars an hour, at the prices of its
	// site (overlay/glidein.Pricer); a site without prices cannot start any.
	MaxHourlyCost float64 `json:"max_hourly_cost,omitempty"`
}

// The ramps of FactoryLimits.Ramp.
const (
	RampExponential = "exponential"
	RampLinear      = "linear"
	RampNone        = "none"
)

// FactoryBreaker is an entry's circuit breaker: after Failures failed glideins
// within Window, the entry submits nothing for Backoff.
type FactoryBreaker struct {
	Failures int      `json:"failures,omitempty"`
	Window   Duration `json:"window,omitempty"`
	Backoff  Duration `json:"backoff,omitempty"`
}

// Default breaker.
const (
	DefaultBreakerFailures = 3
	DefaultBreakerWindow   = 10 * time.Minute
	DefaultBreakerBackoff  = 5 * time.Minute
)

// Duration is a time.Duration written in JSON as Go's text ("90s", "4h")
// and read from that or a number of seconds.
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var n float64
	if err := json.Unmarshal(b, &n); err == nil {
		if n < 0 || n > float64(math.MaxInt64/int64(time.Second)) {
			return fmt.Errorf("duration %v: out of range", n)
		}
		*d = Duration(n * float64(time.Second))
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New(`want a duration such as "90s" or a number of seconds`)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: want such as \"90s\" or \"4h\"", s)
	}
	*d = Duration(v)
	return nil
}

var entryName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,19}$`) })

// Validate reports what is wrong with the entry, naming the field.
func (e *FactoryEntrySpec) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{field}, args...)...))
	}
	if !entryName().MatchString(e.Name) {
		bad("name", "%q: want 1 to 20 lower-case letters, digits and '-', starting with a letter or digit", e.Name)
	}
	if e.Site.Kind == "" {
		bad("site.kind", "missing: want ssh, slurm or aws")
	}
	for field, v := range map[string]string{"lineage": e.Lineage, "address": e.Address} {
		if len(v) > maxOwnerLen || strings.IndexFunc(v, func(r rune) bool { return r < ' ' || r == 0x7f }) >= 0 || !utf8.ValidString(v) {
			bad(field, "%q: want at most %d characters of text, without control characters", v, maxOwnerLen)
		}
	}
	t := e.Template
	if t.Slots < 0 {
		bad("template.slots", "%d is negative", t.Slots)
	}
	if t.CPUs < 1 {
		bad("template.cpus", "%d: want at least 1", t.CPUs)
	}
	if t.MemoryMB < 1 {
		bad("template.memory_mb", "%d: want at least 1", t.MemoryMB)
	}
	if t.DiskMB < 0 || t.GPUs < 0 {
		bad("template", "disk_mb and gpus may not be negative")
	}
	if t.Slots > t.CPUs {
		bad("template.slots", "%d slots need as many cpus, not %d", t.Slots, t.CPUs)
	}
	if time.Duration(t.Lifetime) < time.Minute {
		bad("template.lifetime", "%s: want at least 1m", time.Duration(t.Lifetime))
	}
	if t.IdleTimeout < 0 {
		bad("template.idle_timeout", "negative")
	}
	if t.MaxJobs < 0 {
		bad("template.max_jobs", "%d is negative (0 is no limit)", t.MaxJobs)
	}
	for k, v := range t.Attributes {
		if !ValidAttrName(k) {
			bad("template.attributes", "%q is not a ClassAd attribute name", k)
		}
		if _, err := classad.ParseExpr(v); err != nil {
			bad("template.attributes."+k, "%v", err)
		}
	}
	if len(t.Validate) > 0 {
		data, _ := json.Marshal(t.Validate)
		if _, err := ParseValidationChecks(data); err != nil {
			bad("template.validate", "%v", err)
		}
	}
	l := e.Limits
	if l.MaxQueued < 0 || l.MaxRunning < 0 || l.MaxSubmitPerCycle < 0 {
		bad("limits", "max_queued, max_running and max_submit_per_cycle may not be negative")
	}
	if l.MaxInstances < 0 {
		bad("limits.max_instances", "%d is negative", l.MaxInstances)
	}
	if l.MaxHourlyCost < 0 || math.IsNaN(l.MaxHourlyCost) || math.IsInf(l.MaxHourlyCost, 0) {
		bad("limits.max_hourly_cost", "%v: want a number of US dollars an hour, at least 0", l.MaxHourlyCost)
	}
	switch l.Ramp {
	case "", RampExponential, RampLinear, RampNone:
	default:
		bad("limits.ramp", "%q: want %s, %s or %s", l.Ramp, RampExponential, RampLinear, RampNone)
	}
	if l.MaxQueued > l.MaxRunning {
		bad("limits.max_queued", "%d is more than max_running (%d), which counts queued glideins too", l.MaxQueued, l.MaxRunning)
	}
	if e.Breaker.Failures < 0 || e.Breaker.Window < 0 || e.Breaker.Backoff < 0 {
		bad("breaker", "may not be negative")
	}
	if len(errs) > 0 {
		return fmt.Errorf("entry %q: %w", e.Name, errors.Join(errs...))
	}
	return nil
}

// MachineAd returns the slot ads one glidein of the entry would advertise
// before it runs anything: as the startd renders them (MyType Machine,
// Requirements START, State Unclaimed, Cpus, Memory, Disk, Gpus, Arch,
// OpSys, IsGlidein) with the template's attributes. name names the
// glidein's machine. With Slots <= 1 it is one partitionable slot.
func (t *FactoryTemplate) MachineAds(name string) ([]*classad.Ad, error) {
	n := t.Slots
	if n < 1 {
		n = 1
	}
	var ads []*classad.Ad
	for i := 1; i <= n; i++ {
		ad := classad.NewAd()
		ad.SetString("MyType", "Machine")
		ad.SetString("TargetType", "Job")
		ad.SetString("Machine", name)
		ad.SetString("Name", fmt.Sprintf("slot%d@%s", i, name))
		ad.SetString("Arch", strings.ToUpper(or(t.Arch, "X86_64")))
		ad.SetString("OpSys", strings.ToUpper(or(t.OpSys, "LINUX")))
		ad.SetString("OpSysAndVer", "LINUX")
		ad.SetBool("HasFileTransfer", true)
		ad.SetBool("IsGlidein", true)
		ad.SetString("GlideinID", name)
		ad.SetString("State", "Unclaimed")
		ad.SetString("Activity", "Idle")
		ad.Set("Start", classad.MustParseExpr("true"))
		ad.Set("Requirements", classad.MustParseExpr("START"))
		cpus, mem, disk, gpus := int64(t.CPUs), int64(t.MemoryMB), t.DiskMB*1024, int64(t.GPUs)
		if n > 1 {
			cpus, mem, disk, gpus = cpus/int64(n), mem/int64(n), disk/int64(n), gpus/int64(n)
		}
		if disk == 0 {
			disk = 1 << 40 // unknown: a glidein's disk is checked by validation
		}
		ad.SetInt("SlotID", int64(i))
		ad.SetInt("Cpus", cpus)
		ad.SetInt("Memory", mem)
		ad.SetInt("Disk", disk)
		ad.SetInt("Gpus", gpus)
		ad.SetInt("TotalCpus", int64(t.CPUs))
		ad.SetInt("TotalMemory", int64(t.MemoryMB))
		ad.SetBool("PartitionableSlot", n == 1)
		if n == 1 {
			ad.SetString("SlotType", "Partitionable")
		} else {
			ad.SetString("SlotType", "Static")
		}
		for k, v := range t.Attributes {
			if err := ad.SetExpr(k, v); err != nil {
				return nil, fmt.Errorf("attribute %s: %w", k, err)
			}
		}
		ads = append(ads, ad)
	}
	return ads, nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
