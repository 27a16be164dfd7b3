package reach

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/gossip"
	"github.com/pond-htc/pond/overlay/knobs"
	"github.com/pond-htc/pond/overlay/relay"
)

// NewRelay makes a node reached directly a relay for others
// (POND_RELAY_MAX_WORKERS, POND_RELAY_GRACE): it serves workers on the
// host of its API address apiAddr, or of its gossip address when the API
// listens on every address, and lets them send gossip only to members of
// sea. recheck, when not nil, checks a worker's token again while its
// tunnel lasts.
func NewRelay(r knobs.Reader, name, apiAddr string, sea *gossip.Sea, recheck func(string) error, logger *slog.Logger) (*relay.Relay, error) {
	maxWorkers, err := r.Int(knobs.RelayMaxWorkers)
	if err != nil {
		return nil, err
	}
	grace, err := r.Duration(knobs.RelayGrace)
	if err != nil {
		return nil, err
	}
	h := Host(apiAddr)
	if ip, err := netip.ParseAddr(h); err != nil || ip.IsUnspecified() {
		h = Host(sea.GossipAddr())
	}
	peers := &peerSet{sea: sea}
	return relay.New(relay.Config{Name: name, Host: h, MaxWorkers: maxWorkers, Grace: grace,
		AllowSend: peers.has, Recheck: recheck, Logger: logger}), nil
}

// RelayRoutes are the relay's routes on the node name, by pattern; r is
// nil on a node that is itself relayed, which refuses to relay. ctx is
// the node's services' context, which attached tunnels last for.
func RelayRoutes(ctx context.Context, name string, r *relay.Relay) map[string]http.HandlerFunc {
	routes := map[string]http.HandlerFunc{
		"GET " + api.PathRelay: func(w http.ResponseWriter, _ *http.Request) {
			out := []api.RelayWorker{}
			if r != nil {
				out = r.Workers()
			}
			wire.WriteJSON(w, http.StatusOK, out)
		},
		"POST " + api.PathRelayDrop: func(w http.ResponseWriter, req *http.Request) {
			var body api.RelayDropRequest
			if err := wire.ReadJSON(req, &body); err != nil || body.Name == "" {
				wire.WriteError(w, http.StatusBadRequest, errors.New(`body: want {"name": "WORKER"}`))
				return
			}
			if r == nil || !r.Drop(body.Name) {
				wire.WriteError(w, http.StatusNotFound, fmt.Errorf("%s holds no tunnel of %s", name, body.Name))
				return
			}
			wire.WriteJSON(w, http.StatusOK, map[string]string{"dropped": body.Name})
		},
		"POST " + api.PathRelayAttach: relay.Refuse,
		"POST " + api.PathRelayCheck:  relay.Refuse,
	}
	if r != nil {
		routes["POST "+api.PathRelayAttach] = r.ServeAttach(ctx)
		routes["POST "+api.PathRelayCheck] = relay.ServeCheck()
	}
	return routes
}

// peerSet says whether an address is the gossip address of a member of
// the sea: where a relay lets its workers send gossip. The set is built
// again from the membership at most every peerSetTTL.
type peerSet struct {
	sea *gossip.Sea

	mu    sync.Mutex
	built time.Time
	addrs map[netip.AddrPort]bool
}

const peerSetTTL = time.Second

func (p *peerSet) has(addr netip.AddrPort) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.built) > peerSetTTL || (!p.addrs[addr] && time.Since(p.built) > 100*time.Millisecond) {
		p.addrs = map[netip.AddrPort]bool{}
		for _, m := range p.sea.Serf().Members() {
			if ip, ok := netip.AddrFromSlice(m.Addr); ok {
				p.addrs[netip.AddrPortFrom(ip.Unmap(), m.Port)] = true
			}
		}
		p.built = time.Now()
	}
	return p.addrs[addr]
}
