package glidein

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/hashicorp/hcl/v2"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/providers"
	"github.com/zclconf/go-cty/cty"
)

// Defaults of the glidein resource's arguments.
const (
	defaultLifetime    = 4 * time.Hour
	defaultIdleTimeout = 20 * time.Minute
	defaultCMTimeout   = 5 * time.Minute
	// maxNodes bounds nodes: more glideins than that from one resource is
	// a typing error more likely than a plan.
	maxNodes = 10000
	maxSlots = 1024
	// maxMaxJobs bounds max_jobs, for the same reason.
	maxMaxJobs = 1000000
)

// spec is what a glidein resource's configuration says about each of its
// glideins. Its hash, recorded with each glidein, tells a glidein
// submitted under another configuration, which apply replaces.
type spec struct {
	Nodes       int           `json:"-"`
	Pool        string        `json:"pool"`
	Lifetime    time.Duration `json:"lifetime"`
	IdleTimeout time.Duration `json:"idle_timeout"`
	CMTimeout   time.Duration `json:"cm_timeout"`
	// MaxJobs is the most jobs a glidein runs before it leaves (0: no
	// limit); left out of the hash when 0, so that glideins of a
	// configuration without it are not replaced.
	MaxJobs  int         `json:"max_jobs,omitempty"`
	Slots    int         `json:"slots"`
	CPUs     int         `json:"cpus"`
	MemoryMB int         `json:"memory_mb"`
	Attrs    []string    `json:"attrs"`
	Validate *validation `json:"validate,omitempty"`
	// Factory, when set, hands the glideins to the pilot factory of the
	// pool's central manager instead of keeping Nodes of them.
	Factory *factorySpec `json:"factory,omitempty"`
	// MaxInstances and MaxHourlyCost are the resource's own budget, which
	// its factory entry keeps (only with Factory: a resource of nodes has
	// its budget checked by plan).
	MaxInstances  int     `json:"max_instances,omitempty"`
	MaxHourlyCost float64 `json:"max_hourly_cost,omitempty"`
}

// validation is the validate block; the glidein's validation file holds
// its checks (see checks).
type validation struct {
	// DiskBytes and MemoryBytes are the least free disk in the glidein's
	// directory and the least memory of the machine; 0 checks nothing.
	DiskBytes   int64 `json:"disk_bytes,omitempty"`
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// Command must exit with status 0.
	Command []string `json:"command,omitempty"`
}

// checks are the validation file's checks (-validate), as the agent's
// glidein runtime reads them (overlay/api.ParseValidationChecks): sizes in MiB,
// rounded up.
func (v *validation) checks() []api.ValidationCheck {
	mib := func(b int64) int64 { return (b + 1<<20 - 1) >> 20 }
	out := []api.ValidationCheck{}
	if v.DiskBytes > 0 {
		out = append(out, api.ValidationCheck{Type: api.CheckDisk, MinMB: mib(v.DiskBytes)})
	}
	if v.MemoryBytes > 0 {
		out = append(out, api.ValidationCheck{Type: api.CheckMemory, MinMB: mib(v.MemoryBytes)})
	}
	if len(v.Command) > 0 {
		out = append(out, api.ValidationCheck{Type: api.CheckCommand, Command: v.Command})
	}
	return out
}

func (s spec) hash() string {
	data, _ := json.Marshal(s)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

func getAttr(v cty.Value, name string) cty.Value {
	if v.IsNull() || !v.IsKnown() || !v.Type().IsObjectType() || !v.Type().HasAttribute(name) {
		return cty.NullVal(cty.DynamicPseudoType)
	}
	return v.GetAttr(name)
}

func getString(v cty.Value, name string) string {
	a := getAttr(v, name)
	if a.IsNull() || !a.IsKnown() || a.Type() != cty.String {
		return ""
	}
	return a.AsString()
}

// attrError is an error about one argument of the resource.
type attrError struct {
	attr string
	err  error
}

func (e *attrError) Error() string { return e.attr + ": " + e.err.Error() }
func (e *attrError) Unwrap() error { return e.err }

func attrErr(attr string, format string, args ...any) error {
	return &attrError{attr: attr, err: fmt.Errorf(format, args...)}
}

// diagnostics turns errors into diagnostics, each at its argument when it
// is an attrError.
func diagnostics(errs ...error) hcl.Diagnostics {
	var out hcl.Diagnostics
	for _, err := range errs {
		if err == nil {
			continue
		}
		var ae *attrError
		if errors.As(err, &ae) {
			out = append(out, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid glidein argument",
				Detail: err.Error(), Extra: providers.AttributeRef(ae.attr)})
			continue
		}
		out = append(out, providers.FromError(err)...)
	}
	return out
}

func intAttr(v cty.Value, name string, def, lo, hi int) (int, error) {
	a := getAttr(v, name)
	if a.IsNull() {
		return def, nil
	}
	if !a.IsKnown() {
		return 0, attrErr(name, "not known")
	}
	bf := a.AsBigFloat()
	if !bf.IsInt() {
		return 0, attrErr(name, "%s is not a whole number", bf.Text('g', -1))
	}
	i, acc := bf.Int64()
	if acc != big.Exact || i < int64(lo) || i > int64(hi) {
		return 0, attrErr(name, "%s is out of range: want %d to %d", bf.Text('g', -1), lo, hi)
	}
	return int(i), nil
}

// durationAttr reads a duration argument: def when absent, an error at
// the argument when it is not a duration of at least least.
func durationAttr(v cty.Value, name string, def, least time.Duration) (time.Duration, error) {
	a := getAttr(v, name)
	if a.IsNull() {
		return def, nil
	}
	if !a.IsKnown() {
		return 0, attrErr(name, "not known")
	}
	d, err := time.ParseDuration(a.AsString())
	if err != nil {
		return 0, attrErr(name, "%q is not a duration such as \"30m\" or \"4h\"", a.AsString())
	}
	if d < least {
		if least == 0 {
			return 0, attrErr(name, "%q is negative", a.AsString())
		}
		return 0, attrErr(name, "%q is less than %s", a.AsString(), least)
	}
	return d, nil
}

// ParseSize parses a size such as "10GB", "512MB", "4GiB" or "1024" (bytes).
// Units are B, KB, MB, GB, TB (powers of 1000), KiB, MiB, GiB, TiB (powers
// of 1024), case-insensitively; a number may have a fraction ("1.5GB").
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return !(r >= '0' && r <= '9' || r == '.') })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.TrimSpace(t[i:])
	}
	if num == "" {
		return 0, fmt.Errorf("size %q: no number (want a size such as \"10GB\")", s)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("size %q: %q is not a number (want a size such as \"10GB\")", s, num)
	}
	mult := map[string]float64{"": 1, "b": 1,
		"k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
	}[strings.ToLower(unit)]
	if mult == 0 {
		return 0, fmt.Errorf("size %q: unknown unit %q (want B, KB, MB, GB, TB, KiB, MiB, GiB or TiB)", s, unit)
	}
	b := f * mult
	if b >= math.MaxInt64/2 || math.IsNaN(b) {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return int64(b), nil
}

// sizeAttr reads the size argument name of v; its errors are at the
// resource's argument attr (name itself, or the block holding it).
func sizeAttr(v cty.Value, name, attr string) (int64, error) {
	a := getAttr(v, name)
	if a.IsNull() {
		return 0, nil
	}
	wrap := func(err error) error {
		if name != attr {
			err = fmt.Errorf("%s: %w", name, err)
		}
		return &attrError{attr: attr, err: err}
	}
	if !a.IsKnown() {
		return 0, wrap(errors.New("not known"))
	}
	n, err := ParseSize(a.AsString())
	if err != nil {
		return 0, wrap(err)
	}
	return n, nil
}

// specOf reads a glidein resource's spec from a wholly known
// configuration or plan. Its errors are attrErrors at the argument.
func specOf(v cty.Value) (spec, error) {
	var s spec
	var errs []error
	var err error
	if s.Nodes, err = intAttr(v, "nodes", 1, 0, maxNodes); err != nil {
		errs = append(errs, err)
	}
	if s.Slots, err = intAttr(v, "slots", 1, 1, maxSlots); err != nil {
		errs = append(errs, err)
	}
	if s.CPUs, err = intAttr(v, "cpus", s.Slots, 1, maxSlots); err != nil {
		errs = append(errs, err)
	}
	mem, err := sizeAttr(v, "memory", "memory")
	if err != nil {
		errs = append(errs, err)
	}
	s.MemoryMB = int((mem + 1e6 - 1) / 1e6)
	if s.Lifetime, err = durationAttr(v, "lifetime", defaultLifetime, time.Minute); err != nil {
		errs = append(errs, err)
	}
	if s.IdleTimeout, err = durationAttr(v, "idle_timeout", defaultIdleTimeout, 0); err != nil {
		errs = append(errs, err)
	}
	if s.CMTimeout, err = durationAttr(v, "cm_timeout", defaultCMTimeout, time.Second); err != nil {
		errs = append(errs, err)
	}
	if s.MaxJobs, err = intAttr(v, "max_jobs", 0, 0, maxMaxJobs); err != nil {
		errs = append(errs, err)
	}
	if s.Lifetime > 0 && s.IdleTimeout > s.Lifetime {
		errs = append(errs, attrErr("idle_timeout", "%s is longer than lifetime (%s): the glidein would never be idle long enough to leave", s.IdleTimeout, s.Lifetime))
	}
	s.Pool = getString(v, "pool")
	if a := getAttr(v, "pool"); a.IsKnown() && !a.IsNull() {
		if err := checkHostPort(s.Pool); err != nil {
			errs = append(errs, &attrError{attr: "pool", err: err})
		}
	}
	if s.Attrs, err = providers.AttrArgs(getAttr(v, "attributes"), ""); err != nil {
		errs = append(errs, &attrError{attr: "attributes", err: err})
	}
	if vb := getAttr(v, "validate"); !vb.IsNull() {
		val := &validation{}
		if val.DiskBytes, err = sizeAttr(vb, "disk", "validate"); err != nil {
			errs = append(errs, err)
		}
		if val.MemoryBytes, err = sizeAttr(vb, "memory", "validate"); err != nil {
			errs = append(errs, err)
		}
		if c := getAttr(vb, "command"); !c.IsNull() {
			for _, e := range c.AsValueSlice() {
				if e.IsNull() {
					errs = append(errs, attrErr("validate", "command: null element"))
					continue
				}
				val.Command = append(val.Command, e.AsString())
			}
			if len(val.Command) == 0 || val.Command[0] == "" {
				errs = append(errs, attrErr("validate", "command: want a program and its arguments, such as [\"/bin/true\"]"))
			}
		}
		s.Validate = val
	}
	if fb := getAttr(v, "factory"); !fb.IsNull() {
		if n := getAttr(v, "nodes"); !n.IsNull() {
			errs = append(errs, attrErr("nodes", "nodes and a factory block are mutually exclusive: nodes keeps that many glideins, "+
				"a factory block lets the pool's central manager keep as many as its idle jobs need; remove one of them"))
		}
		fs, ferrs := factorySpecOf(fb)
		errs = append(errs, ferrs...)
		s.Factory = fs
		if b, err := budgetOf(v); err == nil {
			s.MaxInstances, s.MaxHourlyCost = b.maxInstances, b.maxHourlyCost
		}
		if s.MemoryMB == 0 {
			// The factory matches jobs against what its glideins offer.
			s.MemoryMB = defaultFactoryMemoryMB * s.Slots
		}
	}
	return s, errors.Join(errs...)
}

func checkHostPort(s string) error {
	if s == "" {
		return errors.New("empty: want the API address of the pool's central manager, such as pool.campus.central_manager")
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		return fmt.Errorf("%q is not an address HOST:PORT: want the API address of the pool's central manager, such as pool.campus.central_manager", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: port %q is not a port number", s, port)
	}
	return nil
}

// ResourceName derives the readable part of a glidein resource's IDs from
// its instance address: glidein.hpc is "hpc", glidein.w["a"] is "w-a",
// module.m.glidein.x is "m-x"; letters, digits and '-' only, at most 20.
func ResourceName(address string) string {
	s := strings.ReplaceAll(address, "module.", "")
	if i := strings.LastIndex(s, ResourceType+"."); i == 0 || (i > 0 && s[i-1] == '.') {
		s = s[:i] + s[i+len(ResourceType)+1:]
	}
	var b strings.Builder
	dash := false
	for _, r := range s {
		if r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 20 {
			break
		}
	}
	out := strings.Trim(b.String(), "-")
	if out == "" {
		out = "g"
	}
	return out
}
