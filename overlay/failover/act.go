package failover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
)

// FollowerDaemons is the DAEMON_LIST a member of a pool with replicas
// starts with, and returns to when it hands the pool back: the pool's
// declared central manager runs no negotiator until it knows the epoch it
// negotiates at (it may be back from a failure that a replica took over);
// empty for the other members, which run what a member runs.
func (k *Keeper) FollowerDaemons() string {
	if !k.cfg.Original {
		return ""
	}
	return "MASTER COLLECTOR SCHEDD STARTD"
}

// fetchState asks the acting manager mgr for its state, nil when it does
// not answer.
func (k *Keeper) fetchState(ctx context.Context, mgr api.FailoverMember) *api.FailoverState {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	st, err := k.node.FetchState(ctx, mgr)
	if err != nil || st == nil {
		k.cfg.Logger.Warn("fetching the acting central manager's state", "manager", mgr.Name, "err", err)
		return nil
	}
	return st
}

// becomeManager makes the node its pool's central manager at epoch: it
// raises its own startd's fence, starts the collector and negotiator with
// the replicated knobs and accounting (of from, when given, else of the
// state it holds), points its daemons at itself and shows the epoch in
// its tags, so that the pool's members follow.
func (k *Keeper) becomeManager(ctx context.Context, epoch int64, from *api.FailoverState, why string) {
	prev := k.State()
	self := k.node.APIAddr()
	st := &api.FailoverState{Pool: k.cfg.Pool, Epoch: epoch, Manager: k.cfg.Name, ManagerAPI: self, Updated: time.Now().UTC()}
	var acc []map[string]float64
	knobsOf := map[string]string{}
	for _, s := range []*api.FailoverState{prev, from} {
		if s == nil {
			continue
		}
		acc = append(acc, s.Accounting)
		st.Replicas = s.Replicas
		for name, v := range s.Config {
			if api.ReplicatedKnob(name) {
				knobsOf[name] = v
			}
		}
	}
	st.Accounting = Accounting(acc...)
	set := map[string]string{
		"DAEMON_LIST":  k.cfg.ManagerDaemons,
		"CONDOR_HOST":  self,
		wire.EpochKnob: strconv.FormatInt(epoch, 10),
	}
	if !k.cfg.Original {
		// A replica negotiates with the manager's knobs; the declared
		// manager has its own in its configuration.
		for name, v := range knobsOf {
			if !k.node.OwnKnob(name) {
				set[name] = v
			}
		}
	}
	if err := k.node.Reconfigure("", set); err != nil {
		k.cfg.Logger.Error("starting the central manager's daemons", "epoch", epoch, "err", err)
		return
	}
	k.node.SetAccounting(st.Accounting)
	k.runFlocks(epoch, prev, from)
	st.Flocks = k.node.FlockConfigs()
	k.Acted(epoch, st, self)
	k.save(st)
	if err := k.node.SetTags(map[string]string{api.TagCM: self, api.TagEpoch: strconv.FormatInt(epoch, 10)}); err != nil {
		k.cfg.Logger.Warn("showing the central manager's epoch", "err", err)
	}
	k.node.Reschedule(ctx)
	k.cfg.Logger.Info("acting as the pool's central manager", "pool", k.cfg.Pool, "epoch", epoch, "why", why)
	if why != "start" || from != nil {
		k.replicate(ctx)
	}
}

// runFlocks starts the acting manager's flocking: it announces the pool
// and keeps its flocks: a replica those of the state it holds (prev),
// anyone those of the manager it takes the pool from (from); the declared
// manager by itself keeps its own.
func (k *Keeper) runFlocks(epoch int64, prev, from *api.FailoverState) {
	var flocks json.RawMessage
	if !k.cfg.Original && prev != nil && prev.Flocks != nil {
		flocks = prev.Flocks
	}
	if from != nil && from.Flocks != nil {
		flocks = from.Flocks
	}
	var cs []api.FlockConfig
	if flocks != nil {
		if err := json.Unmarshal(flocks, &cs); err != nil {
			k.cfg.Logger.Error("reading the replicated flocks", "err", err)
			flocks = nil
		}
	}
	if err := k.node.RunFlock(cs, flocks != nil); err != nil {
		k.cfg.Logger.Error("starting the pool's flocking", "epoch", epoch, "err", err)
	}
}

// stepDown ends a replica's time as manager: a member with a higher epoch
// acts now. Its daemons follow that one, and it stops its collector and
// negotiator.
func (k *Keeper) stepDown(mgr api.FailoverMember) {
	k.cfg.Logger.Info("handing the pool back", "pool", k.cfg.Pool, "to", mgr.Name, "epoch", mgr.Epoch)
	// The flocks stop, and the pool's announcement is withdrawn, while
	// the node still acts: once it says it does not, it takes no flock
	// (one set then would be lost with its Manager) and announces nothing.
	k.node.StopFlock()
	// The declared manager keeps its collector but runs no negotiator
	// while it follows; a replica runs what a member runs.
	set := map[string]string{"DAEMON_LIST": k.FollowerDaemons(), "CONDOR_HOST": mgr.API, wire.EpochKnob: strconv.FormatInt(mgr.Epoch, 10)}
	if st := k.StepDown(); st != nil {
		for name := range st.Config {
			if !k.node.OwnKnob(name) {
				set[name] = ""
			}
		}
	}
	if err := k.node.SetTags(map[string]string{api.TagEpoch: ""}); err != nil {
		k.cfg.Logger.Warn("clearing the epoch tag", "err", err)
	}
	k.moveTo(mgr, set)
}

// follow points the node's daemons at the acting manager mgr, raising the
// startd's fence to mgr's epoch in the same reconfiguration.
func (k *Keeper) follow(mgr api.FailoverMember) {
	if k.Follows(mgr) && k.node.CondorHost() == mgr.API {
		return
	}
	k.cfg.Logger.Info("following the pool's central manager", "pool", k.cfg.Pool, "manager", mgr.Name, "epoch", mgr.Epoch)
	k.moveTo(mgr, map[string]string{"CONDOR_HOST": mgr.API, wire.EpochKnob: strconv.FormatInt(mgr.Epoch, 10)})
}

func (k *Keeper) moveTo(mgr api.FailoverMember, set map[string]string) {
	if err := k.node.Reconfigure(mgr.API, set); err != nil {
		k.cfg.Logger.Error("moving the daemons to the pool's central manager", "manager", mgr.Name, "err", err)
		return
	}
	k.Followed(mgr)
	if err := k.node.SetTags(map[string]string{api.TagCM: mgr.API}); err != nil {
		k.cfg.Logger.Warn("setting the cm tag", "err", err)
	}
}

// replicate sends the manager's state to its replicas: the pool's live
// members nearest to it whose certificates name them and the pool, chosen
// again each time.
func (k *Keeper) replicate(ctx context.Context) {
	cands, apis := k.node.Candidates(ctx)
	st, ok := k.Replicable()
	if !ok {
		return
	}
	st.Replicas = ChooseReplicas(cands, k.cfg.Replicas, st.Replicas)
	st.Updated = time.Now().UTC()
	st.Config = k.node.ReplicatedConfig()
	st.Accounting = Accounting(st.Accounting, k.node.Accounting())
	if f := k.node.FlockConfigs(); f != nil {
		st.Flocks = f
	}
	k.Replicated(&st)
	k.save(&st)
	var wg sync.WaitGroup
	for _, name := range st.Replicas {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			if err := k.node.PushState(cctx, apis[name], &st); err != nil && ctx.Err() == nil {
				k.cfg.Logger.Warn("replicating the central manager's state", "replica", name, "err", err)
			}
		})
	}
	wg.Wait()
}

// save stores st where the node keeps its fail-over state.
func (k *Keeper) save(st *api.FailoverState) {
	if err := k.node.SaveState(st); err != nil {
		k.cfg.Logger.Warn("storing the fail-over state", "err", err)
	}
}

// ReadState reads the fail-over state stored at path: nil, nil when there
// is none.
func ReadState(path string) (*api.FailoverState, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var st api.FailoverState
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := st.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &st, nil
}
