// Package machinead composes a node's live machine ad, the one the sea's
// queries match against: the node's own attributes, the operator's from
// its configuration file (read again when the file changes), dynamic ones,
// where its API is, what its startd says of its health and end, and what
// its pond stamped. It also gives the startd the node's attributes, and
// refuses a configuration that would show a secret in the ad.
package machinead

import (
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/hostinfo"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/knobs"
)

// adTTL is how long a built machine ad is reused before dynamic attributes
// are read again.
const adTTL = time.Second

// Ad builds the node's live machine ad: the node's attributes,
// the operator's attributes from its configuration file (read again when
// the file changes), dynamic ones (LoadAvg, KeyboardIdle, FreeMemory,
// Disk, CpusInUse), where its API is (PondAPI), and what its pond stamped.
type Ad struct {
	// Static are the node's own attributes: the defaults and what the
	// operator gave at start (-attr, STARTD_ATTRS). They may be added to
	// before the ad is first read, not after.
	Static  map[string]any
	started time.Time
	dataDir string
	logger  *slog.Logger

	mu      sync.Mutex
	ad      *classad.Ad
	built   time.Time
	stamped map[string]string // pond attributes, ClassAd expression text
	// file re-reads the operator's attributes from the configuration
	// file; file0 are those read at start, which static already holds.
	file  attrFile
	file0 map[string]any
}

// New starts the ad of the node name: its Defaults from the configuration
// cc (nil without one), with attrs over them, the operator's attributes
// read from the configuration file configFile ("" for none), and the free
// disk of dataDir.
func New(name string, cc *config.Config, attrs map[string]any, configFile, dataDir string, logger *slog.Logger) *Ad {
	m := &Ad{Static: Defaults(name, cc), started: time.Now(), dataDir: dataDir, logger: logger}
	for k, v := range attrs {
		m.Static[k] = v
	}
	m.file = attrFile{path: configFile}
	m.file0, _, _ = m.file.load()
	return m
}

// Source is what a node tells its ad at each build.
type Source interface {
	// Self describes the node: its API address, reach, relay, pool,
	// central manager, quarantine and end.
	Self() api.Self
	// CpusInUse counts the cores of the startd's claimed slots, false
	// when the node runs no startd.
	CpusInUse() (int64, bool)
}

// Stamp replaces the attributes a pond stamps on the node (nil: none) and
// drops the cached ad.
func (m *Ad) Stamp(attrs map[string]string) {
	m.mu.Lock()
	m.stamped = attrs
	m.ad = nil
	m.mu.Unlock()
}

// Stamps adds attrs to the attributes stamped on the node, over those of
// the same names, and returns them all.
func (m *Ad) Stamps(attrs map[string]string) map[string]string {
	m.mu.Lock()
	for k, v := range m.stamped {
		if _, ok := attrs[k]; !ok {
			attrs[k] = v
		}
	}
	m.mu.Unlock()
	m.Stamp(attrs)
	return attrs
}

// Get returns the ad, built again from src when older than adTTL.
func (m *Ad) Get(src Source) *classad.Ad {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ad != nil && time.Since(m.built) < adTTL {
		return m.ad
	}
	self := src.Self()
	ad := classad.NewAd()
	names := make([]string, 0, len(m.Static))
	for k := range m.Static {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		setAny(ad, k, m.Static[k])
	}
	fileAttrs, changed, err := m.file.load()
	if err != nil && changed {
		m.logger.Warn("configuration file: keeping the attributes last read", "file", m.file.path, "err", err)
	}
	for k := range m.file0 {
		if _, ok := fileAttrs[k]; !ok {
			ad.Delete(k) // taken out of the file since the agent started
		}
	}
	for k, v := range fileAttrs {
		setAny(ad, k, v)
	}
	ad.SetString("MyType", "Machine")
	ad.SetString("PondAPI", self.API)
	ad.SetString("PondReach", self.Reach)
	if self.Relay != "" {
		ad.SetString("PondRelay", self.Relay)
	}
	ad.SetString("PondPool", self.Pool)
	ad.SetString("CondorHost", self.CondorHost)
	ad.SetInt("KeyboardIdle", int64(time.Since(m.started)/time.Second))
	if la, err := hostinfo.LoadAvg(); err == nil {
		ad.SetReal("LoadAvg", la)
	}
	if free, err := hostinfo.AvailableMemoryMiB(); err == nil {
		ad.SetInt("FreeMemory", free)
	}
	// What jobs' default Requirements ask of a machine.
	ad.SetBool("HasFileTransfer", true)
	if disk, err := hostinfo.DiskFreeKiB(m.dataDir); err == nil {
		ad.SetInt("Disk", disk)
	}
	if used, ok := src.CpusInUse(); ok {
		ad.SetInt("CpusInUse", used)
	}
	// What the node's startd says of its health and end, so that a pond
	// does not draw a quarantined node or one about to go.
	if q := self.Quarantine; q != nil {
		ad.SetBool("PondQuarantined", true)
		ad.SetString("PondQuarantineReason", q.Reason)
	}
	if end := self.EndTime; !end.IsZero() {
		ad.SetInt("PondEndTime", end.Unix())
	}
	for k, v := range m.stamped {
		if err := ad.SetExpr(k, v); err != nil {
			ad.SetString(k, v)
		}
	}
	m.ad, m.built = ad, time.Now()
	return ad
}

func setAny(ad *classad.Ad, k string, v any) {
	switch v := v.(type) {
	case int64:
		ad.SetInt(k, v)
	case int:
		ad.SetInt(k, int64(v))
	case float64:
		if v == float64(int64(v)) && v < 1<<53 && v > -(1<<53) {
			ad.SetInt(k, int64(v))
		} else {
			ad.SetReal(k, v)
		}
	case bool:
		ad.SetBool(k, v)
	case string:
		ad.SetString(k, v)
	default:
		ad.SetString(k, fmt.Sprint(v))
	}
}

// StartdAttrs are the attributes the node's startd advertises besides
// those it measures itself, as ClassAd expression text: the operator's
// static ones (-attr), and where its API is (PondAPI), how it is reached
// (PondReach) and through which relay (PondRelay, when relayed).
func StartdAttrs(static map[string]any, apiAddr, reach, relay string) map[string]string {
	attrs := map[string]string{}
	for k, v := range static {
		// The startd measures the machine itself; only what the operator
		// added (-attr) passes through.
		switch strings.ToLower(k) {
		case "name", "machine", "cpus", "memory", "opsys", "arch":
			continue
		}
		attrs[k] = literal(v)
	}
	attrs["PondAPI"] = strconv.Quote(apiAddr)
	attrs["PondReach"] = strconv.Quote(reach)
	if relay != "" {
		attrs["PondRelay"] = strconv.Quote(relay)
	}
	return attrs
}

// literal writes a node attribute as ClassAd expression text.
func literal(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case bool:
		if v {
			return "true"
		}
		return "false"
	case int64:
		return strconv.FormatInt(v, 10)
	case int:
		return strconv.Itoa(v)
	case float64:
		s := strconv.FormatFloat(v, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eEnN") {
			s += ".0"
		}
		return s
	}
	return strconv.Quote(fmt.Sprint(v))
}

// RefuseSecretAttrs refuses a configuration whose STARTD_ATTRS (or
// STARTD_EXPRS) names a knob that holds a secret (knobs.Hidden: by its
// name, or named in POND_SECRET_KNOBS): the startd would copy its value
// into the machine ad, which anyone who may read the pool sees. get looks
// a knob up by its upper-case name. The error names the knob, never its
// value.
func RefuseSecretAttrs(get func(name string) (string, bool)) error {
	secret, _ := get(knobs.SecretKnobs)
	hidden := knobs.Hidden(map[string]string{knobs.SecretKnobs: secret})
	for _, list := range []string{"STARTD_ATTRS", "STARTD_EXPRS"} {
		v, _ := get(list)
		for _, name := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
			if hidden(name) {
				return fmt.Errorf("%s names %s, a knob that holds a secret (its name says so, or %s names it): "+
					"the machine ad would show its value to anyone who may read the pool; remove it from %s", list, name, knobs.SecretKnobs, list)
			}
		}
	}
	return nil
}

// Defaults are the machine attributes every agent advertises unless
// overridden. Cpus and Memory are those the node's startd offers: NUM_CPUS
// and MEMORY of the configuration file cc (nil without one), else the
// detected ones.
func Defaults(name string, cc *config.Config) map[string]any {
	host, _ := os.Hostname()
	if cc == nil {
		cc = config.New(config.Options{})
	}
	res, err := cc.Resources()
	if err != nil {
		// The startd refuses such a configuration: advertise the machine.
		res, _ = config.New(config.Options{}).Resources()
	}
	return map[string]any{
		"Name":    name,
		"Machine": host,
		"Cpus":    int64(res.CPUs),
		"Memory":  int64(res.MemoryMiB),
		"OpSys":   hostinfo.OpSys(),
		"Arch":    hostinfo.Arch(),
	}
}
