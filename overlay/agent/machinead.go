package agent

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/hostinfo"
)

// adTTL is how long a built machine ad is reused before dynamic attributes
// are read again.
const adTTL = time.Second

// machineAd builds the node's live machine ad: the agent's attributes,
// the operator's attributes from its configuration file (read again when
// the file changes), dynamic ones (LoadAvg, KeyboardIdle, FreeMemory,
// Disk, CpusInUse), where its API is (PondAPI), and what its pond stamped.
type machineAd struct {
	// static are the agent's own attributes: the defaults and what the
	// operator gave at start (-attr, STARTD_ATTRS).
	static  map[string]any
	started time.Time

	mu      sync.Mutex
	ad      *classad.Ad
	built   time.Time
	stamped map[string]string // pond attributes, ClassAd expression text
	// file re-reads the operator's attributes from the configuration
	// file; file0 are those read at start, which static already holds.
	file  attrFile
	file0 map[string]any
}

func (m *machineAd) init(cfg *Config) {
	m.static = defaultAttrs(cfg.Name, cfg.Condor)
	for k, v := range cfg.Attrs {
		m.static[k] = v
	}
	m.started = time.Now()
	m.file = attrFile{path: cfg.ConfigFile}
	m.file0, _, _ = m.file.load()
}

// stamp replaces the attributes a pond stamps on the node (nil: none) and
// drops the cached ad.
func (m *machineAd) stamp(attrs map[string]string) {
	m.mu.Lock()
	m.stamped = attrs
	m.ad = nil
	m.mu.Unlock()
}

// get returns the ad, built again when older than adTTL.
func (m *machineAd) get(a *Agent) *classad.Ad {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ad != nil && time.Since(m.built) < adTTL {
		return m.ad
	}
	self := a.Self()
	ad := classad.NewAd()
	names := make([]string, 0, len(m.static))
	for k := range m.static {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		setAny(ad, k, m.static[k])
	}
	fileAttrs, changed, err := m.file.load()
	if err != nil && changed {
		a.logger.Warn("configuration file: keeping the attributes last read", "file", m.file.path, "err", err)
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
	if disk, err := hostinfo.DiskFreeKiB(a.cfg.DataDir); err == nil {
		ad.SetInt("Disk", disk)
	}
	if used, ok := a.daemons.cpusInUse(); ok {
		ad.SetInt("CpusInUse", used)
	}
	// What the node's startd says of its health and end, so that a pond
	// does not draw a quarantined node or one about to go.
	if q := a.quarantine(); q != nil {
		ad.SetBool("PondQuarantined", true)
		ad.SetString("PondQuarantineReason", q.Reason)
	}
	if end := a.endTime(); !end.IsZero() {
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
