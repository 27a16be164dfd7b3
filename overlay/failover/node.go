package failover

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/serf/coordinate"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/internal/jsonfile"
	"github.com/pond-htc/pond/overlay/knobs"
	"github.com/pond-htc/pond/overlay/relay"
)

// StateFile is the file, in a pool member's data directory, that holds
// the latest central-manager state it replicated or received.
const StateFile = "failover.json"

// WriteState stores st in the data directory dataDir (StateFile); a node
// without a data directory keeps none.
func WriteState(dataDir string, st *api.FailoverState) error {
	if dataDir == "" {
		return nil
	}
	return jsonfile.Write(filepath.Join(dataDir, StateFile), st)
}

// FromKnobs reads the fail-over knobs (POND_CM_REPLICAS and the timings)
// into cfg, which names the node, its pool and its role, and makes the
// node's Keeper, starting from the state stored in dataDir when it is of
// cfg's pool. It returns nil when the node's pool keeps no replicas of its
// manager.
func FromKnobs(r knobs.Reader, cfg Config, dataDir string, node Node) (*Keeper, error) {
	n, err := r.Int(knobs.CMReplicas)
	if err != nil {
		return nil, err
	}
	if n == 0 || cfg.Pool == "" {
		return nil, nil
	}
	cfg.Replicas = n
	if cfg.Step, err = r.Duration(knobs.CMTakeoverStep); err != nil {
		return nil, err
	}
	if cfg.Interval, err = r.Duration(knobs.CMReplicateInterval); err != nil {
		return nil, err
	}
	if cfg.HoldDown, err = r.Duration(knobs.CMHandbackHoldDown); err != nil {
		return nil, err
	}
	var state *api.FailoverState
	if dataDir != "" {
		st, err := ReadState(filepath.Join(dataDir, StateFile))
		if err != nil {
			cfg.Logger.Warn("ignoring the stored fail-over state", "err", err)
		} else if st != nil && st.Pool == cfg.Pool {
			state = st
		}
	}
	return NewKeeper(cfg, node, state), nil
}

// Members returns the sea's members ms as fail-over sees them from a
// member of pool. A member's epoch tag counts only once the member proved
// it (its certificate names it and the pool, and it says it acts at that
// epoch); until then, and when it cannot, the member shows no epoch, so
// that nobody follows it, nor takes its epoch for the pool's highest.
func (c *Claims) Members(ctx context.Context, ms []api.Member, pool string) []api.FailoverMember {
	out := make([]api.FailoverMember, 0, len(ms))
	for _, m := range ms {
		out = append(out, api.FailoverMember{Name: m.Name, API: m.Tags[api.TagAPI], Pool: m.Tags[api.TagPool],
			Alive: m.Status == api.StatusAlive, Epoch: api.ParseEpoch(m.Tags[api.TagEpoch])})
	}
	var wg sync.WaitGroup
	for i, m := range out {
		if m.Epoch == 0 || m.Pool != pool || m.Name == c.Self {
			continue
		}
		k := Claim{API: m.API, Pool: m.Pool, Epoch: m.Epoch}
		if !m.Alive || m.API == "" {
			// A member that is gone proves nothing more: what it
			// proved while alive stands.
			if !c.Known(m.Name, k) {
				out[i].Epoch = 0
			}
			continue
		}
		wg.Go(func() {
			if !c.Proven(ctx, m.Name, k, true) {
				out[i].Epoch = 0
			}
		})
	}
	wg.Wait()
	return out
}

// ActingManager returns, when the central manager at addr belongs to a
// pool that keeps replicas of its manager, and another live member of
// that pool acts for it now (the highest epoch, as the pool's own members
// follow), the API address of that member; "" otherwise. ms are the sea's
// members, and ownPool the pool of the node that asks (Members).
func (c *Claims) ActingManager(ctx context.Context, ms []api.Member, ownPool, addr string) string {
	var pool string
	for _, m := range ms {
		if m.Tags[api.TagAPI] == addr {
			pool = m.Tags[api.TagPool]
			break
		}
	}
	if pool == "" {
		return ""
	}
	mgr, ok := api.FailoverManager(c.Members(ctx, ms, ownPool), pool)
	if !ok || mgr.API == addr {
		return ""
	}
	return mgr.API
}

// Candidates returns the live members of pool among ms that could be its
// manager's replicas, with their distance from self (the node's network
// coordinate, nil when unknown), and their API addresses. The state goes,
// with the manager's token, only to members whose certificate names them
// and the pool: a pool tag is anyone's to set.
func (c *Claims) Candidates(ctx context.Context, ms []api.Member, pool string, self *coordinate.Coordinate) ([]Candidate, map[string]string) {
	var cands []Candidate
	apis := map[string]string{}
	for _, m := range ms {
		if m.Name == c.Self || m.Status != api.StatusAlive || m.Tags[api.TagPool] != pool || m.Tags[api.TagAPI] == "" {
			continue
		}
		rtt := time.Duration(-1)
		if mc := (*coordinate.Coordinate)(m.Coordinate); self != nil && mc != nil && self.IsCompatibleWith(mc) {
			rtt = self.DistanceTo(mc)
		}
		cands = append(cands, Candidate{Name: m.Name, RTT: rtt})
		apis[m.Name] = m.Tags[api.TagAPI]
	}
	cands = slices.DeleteFunc(cands, func(cd Candidate) bool {
		return !c.Proven(ctx, cd.Name, Claim{API: apis[cd.Name], Pool: pool}, true)
	})
	return cands, apis
}

// Push serves PUT /v1/failover: it takes the state the pool's manager
// replicates, only from the manager's own node token, of this pool, and
// of an epoch no lower than the highest the node knows.
type Push struct {
	Keeper *Keeper
	// Pool is the node's pool.
	Pool string
	// Verified says that the API checks tokens: a request without a
	// token's claims is then refused.
	Verified bool
	// TLS says that the API is served with TLS: the caller's certificate
	// must name the manager and the pool.
	TLS bool
	// DataDir is where the state is stored (WriteState).
	DataDir string
	Logger  *slog.Logger
}

func (p *Push) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var st api.FailoverState
	if err := wire.ReadJSON(r, &st); err != nil {
		wire.WriteError(w, http.StatusBadRequest, fmt.Errorf("failover: body: %w", err))
		return
	}
	if err := st.Check(); err != nil {
		wire.WriteError(w, http.StatusBadRequest, fmt.Errorf("failover: state: %w", err))
		return
	}
	if claims, ok := auth.FromContext(r.Context()); ok && claims.Subject != relay.NodeSubjectPrefix+st.Manager {
		wire.WriteError(w, http.StatusForbidden, fmt.Errorf("failover: %s may not replicate the state of manager %s: only node/%s may", claims.Subject, st.Manager, st.Manager))
		return
	} else if !ok && p.Verified {
		wire.WriteError(w, http.StatusForbidden, errors.New("failover: only the pool's central manager, with its node token, replicates its state"))
		return
	}
	if p.TLS {
		// The token says who sends the state; the certificate, which
		// only the authority issues, that it is a member of the pool.
		if id, ok := PeerIdentity(r); !ok || id.Node != st.Manager || id.Pool != p.Pool {
			wire.WriteError(w, http.StatusForbidden, fmt.Errorf("failover: only a member of pool %q whose certificate names it replicates the pool's state: the caller's certificate names node %q of pool %q", p.Pool, id.Node, id.Pool))
			return
		}
	}
	if st.Pool != p.Pool {
		wire.WriteError(w, http.StatusConflict, fmt.Errorf("failover: state of pool %q sent to a member of pool %q", st.Pool, p.Pool))
		return
	}
	if known, ok := p.Keeper.Receive(&st); !ok {
		wire.WriteError(w, http.StatusConflict, fmt.Errorf("failover: epoch %d is lower than epoch %d, which this node knows: a newer manager acts", st.Epoch, known))
		return
	}
	if err := WriteState(p.DataDir, &st); err != nil {
		p.Logger.Warn("storing the fail-over state", "err", err)
	}
	wire.WriteJSON(w, http.StatusOK, struct{}{})
}
