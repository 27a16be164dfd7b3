package wire

// Paths of the master's endpoints, relative to PathPrefix; both take an
// empty JSON object and answer a MasterInfo.
const (
	PathReconfig   = "master/reconfig"
	PathMasterInfo = "master/info"
)

// MasterInfo describes a node's daemons, as master/info and
// master/reconfig answer.
type MasterInfo struct {
	Name       string   `json:"name"`
	Address    string   `json:"address"`
	CondorHost string   `json:"condor_host"`
	Daemons    []string `json:"daemons"`
	StartTime  int64    `json:"start_time"`
}
