package wire

import "context"

const pathCollectorHistory = "collector/history"

// HistoryRequest selects a period of the central manager's history
// (condor/collector/history): Since and Until are Unix seconds (zero
// Until: now), Machine one machine's or slot's rows ("" every one), Limit
// the rows of each kind (zero: the collector's default), Constraint a
// ClassAd expression over each row's ad (history.SlotState.Ad,
// history.ConfigChange.Ad) that keeps the rows it is true of.
type HistoryRequest struct {
	Since      int64  `json:"since,omitempty"`
	Until      int64  `json:"until,omitempty"`
	Machine    string `json:"machine,omitempty"`
	Limit      int    `json:"limit,omitempty"`
	Constraint string `json:"constraint,omitempty"`
	// Snapshots asks for the machine ads' snapshots taken in the period
	// instead; At (Unix seconds) for the pool as it was then: each
	// slot's last snapshot at or before it (within its second). Constraint applies to the
	// snapshot's ad.
	Snapshots bool  `json:"snapshots,omitempty"`
	At        int64 `json:"at,omitempty"`
	// ConfigOnly asks for the configuration changes alone (Machine: one
	// node's).
	ConfigOnly bool `json:"config_only,omitempty"`
}

// History asks the collector for the history of a period and decodes the
// answer (a history.Report of condor/collector/history) into resp.
func (c *Collector) History(ctx context.Context, req *HistoryRequest, resp any) error {
	return c.c.Call(ctx, pathCollectorHistory, req, resp)
}

const pathCollectorApply = "collector/apply"

// RecordApply sends the collector the record of a pondctl command that
// changed its pool (a history.ApplyRecord of condor/collector/history),
// which it keeps in its history under the subject of the token this
// client presents. The route needs ADMINISTRATOR.
func (c *Collector) RecordApply(ctx context.Context, rec any) error {
	return c.c.Call(ctx, pathCollectorApply, rec, &struct{}{})
}
