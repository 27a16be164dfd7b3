package wire

import "context"

// Paths of the master's endpoints, relative to PathPrefix; both take an
// empty JSON object and answer a MasterInfo.
const (
	pathReconfig   = "master/reconfig"
	pathMasterInfo = "master/info"
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

// Master is a client of a node's master.
type Master struct{ c *Client }

// NewMaster returns a client of the master served at addr (a node's API
// address) presenting token.
func NewMaster(addr, token string) *Master { return NewClient(addr, token).Master() }

// Master returns a client of the master of c's node.
func (c *Client) Master() *Master { return &Master{c} }

// Addr returns the API address of the master's node.
func (c *Master) Addr() string { return c.c.Addr }

// Info describes the node's daemons.
func (c *Master) Info(ctx context.Context) (*MasterInfo, error) {
	return c.call(ctx, pathMasterInfo)
}

// Reconfig has the master re-read its configuration and apply it
// (condor_reconfig).
func (c *Master) Reconfig(ctx context.Context) (*MasterInfo, error) {
	return c.call(ctx, pathReconfig)
}

func (c *Master) call(ctx context.Context, path string) (*MasterInfo, error) {
	var info MasterInfo
	if err := c.c.Call(ctx, path, struct{}{}, &info); err != nil {
		return nil, err
	}
	return &info, nil
}
