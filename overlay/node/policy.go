package node

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/pond-htc/pond/condor/daemon"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/autoscale"
	"github.com/pond-htc/pond/overlay/internal/jsonhttp"
	"github.com/pond-htc/pond/overlay/tree"
)

// startPolicy starts the pond policy when the agent's configuration turns
// it on (POND_POLICY = true) and the node runs a schedd. Its state is
// served at GET /v1/policy.
func (n *Node) startPolicy(ctx context.Context) error {
	a := n.a
	enabled, cfg, err := autoscale.ParseConfig(a.Knob)
	if err != nil {
		return fmt.Errorf("pond policy: %w", err)
	}
	if !enabled {
		return nil
	}
	if !n.condor.hasDaemon(daemon.Schedd) {
		a.Logger().Warn("pond policy: the node runs no schedd; the policy stays off")
		return nil
	}
	token, err := wire.PoolToken(n.condor.master.Config())
	if err != nil {
		return fmt.Errorf("pond policy: %w", err)
	}
	fastValue := strconv.FormatFloat(cfg.MinInterval.Seconds(), 'f', -1, 64)
	p, err := autoscale.New(autoscale.Options{
		Name:           a.Self().Name,
		API:            a.APIAddr(),
		CentralManager: a.CondorHost,
		Pool:           &autoscale.WirePool{Schedd: a.APIAddr(), CentralManager: a.CondorHost, Token: token},
		Query:          func(ctx context.Context, q tree.Query) (*tree.Answer, error) { return n.tree.Query(ctx, q) },
		Fast: func(ctx context.Context, on bool) error {
			v := ""
			if on {
				v = fastValue
			}
			return n.condor.set(map[string]string{"NEGOTIATOR_MIN_INTERVAL": v})
		},
		DataDir: a.DataDir(),
		Config:  cfg,
		Logger:  a.Logger(),
	})
	if err != nil {
		return err
	}
	n.policy = p
	a.Mux().HandleFunc("GET /v1/policy", func(w http.ResponseWriter, r *http.Request) {
		jsonhttp.Write(w, http.StatusOK, PolicyStatus{Config: cfg, Ponds: p.Ponds(), Stats: p.Stats()})
	})
	a.Logger().Info("pond policy on", "max_members", cfg.MaxMembers, "max_ponds", cfg.MaxPonds,
		"query_interval", cfg.QueryInterval, "grace", cfg.Grace)
	go p.Run(ctx)
	return nil
}

// PolicyStatus is what GET /v1/policy answers.
type PolicyStatus struct {
	Config autoscale.Config `json:"config"`
	Ponds  []autoscale.Pond `json:"ponds"`
	Stats  autoscale.Stats  `json:"stats"`
}
