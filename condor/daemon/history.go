package daemon

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/collector/history"
	"github.com/pond-htc/pond/condor/config"
)

// history returns the node's history store (DataDir/history.db), opening
// it at the first call: the central manager's collector records the
// slots' states there, and the master its configuration changes.
// POND_HISTORY_RETENTION and POND_HISTORY_MAX_ROWS bound it, and the
// POND_HISTORY_SNAPSHOT_* knobs its machine ads' snapshots.
func (m *Master) history(ctx context.Context, cfg *config.Config) (*history.Store, error) {
	m.histMu.Lock()
	defer m.histMu.Unlock()
	if m.hist != nil {
		return m.hist, nil
	}
	ret, err := cfg.Duration("POND_HISTORY_RETENTION", history.DefaultRetention)
	if err != nil {
		return nil, fmt.Errorf("POND_HISTORY_RETENTION: %w", err)
	}
	if ret <= 0 {
		return nil, fmt.Errorf("POND_HISTORY_RETENTION: %s is not a positive duration", ret)
	}
	rows, err := cfg.Int("POND_HISTORY_MAX_ROWS", history.DefaultMaxRows)
	if err != nil {
		return nil, fmt.Errorf("POND_HISTORY_MAX_ROWS: %w", err)
	}
	if rows <= 0 {
		return nil, fmt.Errorf("POND_HISTORY_MAX_ROWS: %d is not a positive number of rows", rows)
	}
	ival, err := cfg.Duration("POND_HISTORY_SNAPSHOT_INTERVAL", history.DefaultSnapshotInterval)
	if err != nil || ival <= 0 {
		return nil, fmt.Errorf("POND_HISTORY_SNAPSHOT_INTERVAL: %s is not a positive duration (%v)", ival, err)
	}
	sret, err := cfg.Duration("POND_HISTORY_SNAPSHOT_RETENTION", history.DefaultSnapshotRetention)
	if err != nil || sret <= 0 {
		return nil, fmt.Errorf("POND_HISTORY_SNAPSHOT_RETENTION: %s is not a positive duration (%v)", sret, err)
	}
	sbytes, err := cfg.Int("POND_HISTORY_SNAPSHOT_MAX_BYTES", history.DefaultSnapshotMaxBytes)
	if err != nil || sbytes <= 0 {
		return nil, fmt.Errorf("POND_HISTORY_SNAPSHOT_MAX_BYTES: %d is not a positive number of bytes (%v)", sbytes, err)
	}
	h, err := history.Open(ctx, filepath.Join(m.opts.DataDir, "history.db"), history.Options{Retention: ret, MaxRows: rows, Logger: m.log,
		SnapshotInterval: ival, SnapshotRetention: sret, SnapshotMaxBytes: int64(sbytes)})
	if err != nil {
		return nil, err
	}
	m.hist = h
	return h, nil
}

// closeHistory closes the history store, if it was opened.
func (m *Master) closeHistory() {
	m.histMu.Lock()
	defer m.histMu.Unlock()
	if m.hist != nil {
		if err := m.hist.Close(); err != nil {
			m.log.Warn("closing the history", "err", err)
		}
		m.hist = nil
	}
}

// recordConfig records in the history the knobs that differ between the
// configuration last recorded for this node and cfg, when this node keeps
// a history (it runs the collector): as every node's master advertises
// it (EffectiveConfig), so that the change is recorded once, with who,
// the subject that asked for the reconfiguration. A secret knob's values
// are never written: its change is recorded as "(secret, changed)". The
// machine attributes the agent stamps (a token's expiry) are no
// configuration: their changes are not recorded.
func (m *Master) recordConfig(old, cfg *config.Config, who string) {
	m.histMu.Lock()
	h := m.hist
	m.histMu.Unlock()
	if h == nil || old == nil || old == cfg {
		return
	}
	names := map[string]string{} // upper case -> as spelled
	for _, n := range old.Names() {
		names[strings.ToUpper(n)] = n
	}
	for _, n := range cfg.Names() {
		names[strings.ToUpper(n)] = n
	}
	var secrets []history.ConfigChange
	at := time.Now()
	stamped := stampedAttrs(old)
	maps.Copy(stamped, stampedAttrs(cfg))
	for _, n := range names {
		if !old.Secret(n) && !cfg.Secret(n) || stamped[strings.ToUpper(n)] {
			continue
		}
		was, _ := old.Raw(n)
		now, _ := cfg.Raw(n)
		if was != now {
			secrets = append(secrets, history.ConfigChange{At: at, Node: m.opts.Name, Knob: n, Old: config.Secret, New: "(secret, changed)", Who: who})
		}
	}
	sort.Slice(secrets, func(i, j int) bool { return secrets[i].Knob < secrets[j].Knob })
	h.ObserveConfig(secrets)
	// The configuration replaced first, in case its ad has not reached
	// the collector yet: the base of the change.
	text, hash := EffectiveConfig(old)
	if err := h.ObserveNodeConfig(m.opts.Name, hash, text, "node agent"); err != nil {
		m.log.Warn("history: the configuration not recorded", "err", err)
	}
	text, hash = EffectiveConfig(cfg)
	if err := h.ObserveNodeConfig(m.opts.Name, hash, text, who); err != nil {
		m.log.Warn("history: the configuration not recorded", "err", err)
	}
}
