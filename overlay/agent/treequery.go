package agent

import (
	"fmt"
	"net"
	"time"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/tree"
)

// HopTimeout bounds how long a node waits for a silent child before
// handing the child's region on.
const HopTimeout = 250 * time.Millisecond

// RepairRounds is how many times a query rooted at this node re-asks the
// parts of the sea its trees did not cover, while its deadline allows (see
// tree.Config.RepairRounds). A complete answer costs nothing more.
const RepairRounds = 2

// startTree serves tree queries over TCP on the API's host, matched with
// the agent's evaluator, and advertises their address in the tree tag.
func (a *Agent) startTree() error {
	host, _, err := net.SplitHostPort(a.APIAddr())
	if err != nil {
		return fmt.Errorf("API address %q: %w", a.APIAddr(), err)
	}
	var ln net.Listener
	if a.tunnel != nil {
		ln = a.tunnel.Tree()
	} else if a.treeLn != nil {
		// Bound by the connect-back check, which tested it.
		ln = a.treeLn
	}
	ts, err := tree.NewServer(tree.ServerConfig{
		Name:         a.cfg.Name,
		Listen:       net.JoinHostPort(host, "0"),
		Listener:     ln,
		Evaluator:    a.eval,
		Logger:       a.logger,
		HopTimeout:   HopTimeout,
		RepairRounds: RepairRounds,
		TCP:          tree.TCPConfig{ServerTLS: a.serverTLS, ClientTLS: a.clientTLS},
	})
	if err != nil {
		return err
	}
	a.tree = ts
	return a.SetTags(map[string]string{api.TagTree: ts.Addr()})
}
