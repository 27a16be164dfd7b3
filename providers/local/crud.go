package local

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/providers/factorycred"
	"github.com/zclconf/go-cty/cty"
)

var computedAttrs = []string{"central_manager", "condor_host", "sea", "members", "node_details"}

// PlanResourceChange implements providers.Provider.
func (p *Provider) PlanResourceChange(ctx context.Context, req providers.PlanRequest) providers.PlanResponse {
	if diags := p.checkLimits(req); diags.HasErrors() {
		return providers.PlanResponse{Diagnostics: diags}
	}
	if _, diags := secretKnobs(req.Config, req.Sensitive); diags.HasErrors() {
		return providers.PlanResponse{Diagnostics: diags}
	}
	resp, err := p.plan(req)
	if err != nil {
		return providers.PlanResponse{Diagnostics: providers.FromError(err)}
	}
	resp.Diagnostics = append(resp.Diagnostics, p.starts(req, resp)...)
	return *resp
}

// checkLimits refuses a pool with more nodes than max_nodes or more slots
// per node than max_slots_per_node, at the argument; CheckPlan counts the
// nodes of every pool together.
func (p *Provider) checkLimits(req providers.PlanRequest) hcl.Diagnostics {
	if req.TypeName != "pool" || req.ProposedNew.IsNull() {
		return nil
	}
	var diags hcl.Diagnostics
	for _, l := range []struct {
		attr, knob, what string
		max              int
	}{
		{"nodes", "max_nodes", "each node is an agent process on this machine, and the limit counts the nodes of all the pools together", p.maxNodes},
		{"slots", "max_slots_per_node", "each slot is a share of this machine", p.maxSlots},
	} {
		if a := getAttr(req.Config, l.attr); a.IsNull() || !a.IsKnown() {
			continue
		}
		n, err := intAttr(req.Config, l.attr, 1)
		if err != nil || n <= l.max {
			continue
		}
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError,
			Summary: fmt.Sprintf("Too many %s", l.attr),
			Detail: fmt.Sprintf("%s: %s = %d is more than the local provider allows (%s = %d): %s. Lower %s, or raise %s in the provider \"local\" block.",
				req.Address, l.attr, n, l.knob, l.max, l.what, l.attr, l.knob),
			Extra: providers.AttributeRef(l.attr)})
	}
	return diags
}

// CheckPlan implements providers.PlanChecker: it refuses a plan after
// which the provider's pools would run more nodes in all than max_nodes,
// counting the pools the plan does not touch (left out by -target) as
// they run now. The error is at the nodes argument of the pool that grows
// the most.
func (p *Provider) CheckPlan(ctx context.Context, req providers.CheckPlanRequest) providers.CheckPlanResponse {
	var pools []providers.Growth
	inPlan := map[string]bool{}
	inPlanPool := map[string]bool{} // by pool name, which a moved pool keeps
	total := 0
	for _, in := range req.Instances {
		if in.TypeName != "pool" {
			continue
		}
		inPlan[in.Address] = true
		if id := getAttr(in.Prior, "id"); !in.Prior.IsNull() && !id.IsNull() && id.IsKnown() {
			inPlanPool[id.AsString()] = true
		}
		if in.Planned.IsNull() {
			continue
		}
		n, err := intAttr(in.Planned, "nodes", 1)
		if err != nil {
			continue // not known until apply
		}
		was := 0
		if !in.Prior.IsNull() {
			if m := getAttr(in.Prior, "members"); !m.IsNull() && m.IsKnown() {
				was = m.LengthInt()
			}
		}
		total += n
		pools = append(pools, providers.Growth{Address: in.Address, Count: n, Grows: n - was})
	}
	others := 0
	if es, err := p.journal.all(); err == nil {
		for _, e := range es {
			if !inPlan[e.Address] && !inPlanPool[e.Pool] && e.alive() {
				others++
			}
		}
	}
	total += others
	if total <= p.maxNodes || len(pools) == 0 {
		return providers.CheckPlanResponse{}
	}
	worst, parts := providers.OverCap(pools)
	if others > 0 {
		parts = append(parts, fmt.Sprintf("%d of pools this plan leaves as they are", others))
	}
	return providers.CheckPlanResponse{Diagnostics: hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Too many nodes",
		Detail: fmt.Sprintf("The local provider's pools would run %d nodes in all (%s), more than it allows (max_nodes = %d): each node is an agent process on this machine. Lower nodes, or raise max_nodes in the provider \"local\" block.",
			total, strings.Join(parts, ", "), p.maxNodes),
		Extra: providers.InstanceAttributeRef{Address: worst, Name: "nodes"},
	}}}
}

var _ providers.PlanChecker = (*Provider)(nil)

// starts tells how many agent processes a planned change starts, as a
// warning diagnostic (the plan's only channel to the user): none for a
// change that starts none.
func (p *Provider) starts(req providers.PlanRequest, resp *providers.PlanResponse) hcl.Diagnostics {
	if req.ProposedNew.IsNull() || resp.Planned.IsNull() {
		return nil
	}
	n, err := intAttr(resp.Planned, "nodes", 1)
	if err != nil {
		return nil // unknown until apply
	}
	have := 0
	if !req.Prior.IsNull() && len(resp.RequiresReplace) == 0 {
		if m := getAttr(req.Prior, "members"); !m.IsNull() && m.IsKnown() {
			have = m.LengthInt()
		}
	}
	var diags hcl.Diagnostics
	if req.Prior.IsNull() {
		// Nodes of this pool that run but that the state does not record
		// (it was lost, or the apply that started them died): apply
		// adopts them with their queues and jobs.
		adopt := 0
		if es, err := p.journal.pool(PoolName(req.Address)); err == nil {
			for _, e := range es {
				if e.Address == req.Address && e.API != "" && e.alive() && e.Index < n {
					adopt++
				}
			}
		}
		if adopt > 0 {
			have = adopt
			diags = append(diags, providers.Warning(fmt.Sprintf("Will adopt %d running node(s)", adopt),
				fmt.Sprintf("%s has %d node(s) running in this working directory that the state does not record (the state was lost, or the apply that started them was stopped): apply adopts them as they are, with their job queues and running jobs, rather than start new ones.",
					req.Address, adopt)))
		}
	}
	start := n - have
	if start <= 0 {
		return diags
	}
	slots, _ := intAttr(resp.Planned, "slots", 1)
	what := "agent processes"
	if start == 1 {
		what = "agent process"
	}
	return append(diags, providers.Warning(fmt.Sprintf("Will start %d %s", start, what),
		fmt.Sprintf("%s will start %d pondctl %s on this machine (slots = %d per node; max_nodes = %d for all the pools together).",
			req.Address, start, what, slots, p.maxNodes)))
}

func (p *Provider) plan(req providers.PlanRequest) (*providers.PlanResponse, error) {
	if req.TypeName != "pool" {
		return nil, fmt.Errorf("local provider: no resource type %q", req.TypeName)
	}
	if req.ProposedNew.IsNull() {
		return &providers.PlanResponse{Planned: req.ProposedNew}, nil
	}
	ty := providerSchema().Resources["pool"].ImpliedType()
	// A pool keeps its name, and its nodes theirs, for life: one a moved
	// block gives a new address goes on under its old name.
	pool := PoolName(req.Address)
	if id := getAttr(req.Prior, "id"); !req.Prior.IsNull() && !id.IsNull() && id.IsKnown() && id.AsString() != "" {
		pool = id.AsString()
	}
	if pool != PoolName(req.Address) {
		// Moved (or imported under another name): the journal learns the
		// owner's address even when the plan reads nothing (-refresh=false).
		es, err := p.journal.pool(pool)
		if err != nil {
			return nil, err
		}
		if err := p.retag(pool, req.Address, es); err != nil {
			return nil, err
		}
	}
	set := map[string]cty.Value{"id": cty.StringVal(pool)}
	// Defaults apply whenever the configuration leaves an argument out, so
	// removing "nodes = 3" goes back to one node.
	for _, n := range []string{"nodes", "slots"} {
		if getAttr(req.Config, n).IsNull() {
			set[n] = cty.NumberIntVal(1)
		}
	}
	planned := providers.WithAttrs(req.ProposedNew, set)
	resp := &providers.PlanResponse{}
	if req.Prior.IsNull() {
		unk := map[string]cty.Value{}
		for _, n := range computedAttrs {
			unk[n] = cty.UnknownVal(ty.AttributeType(n))
		}
		resp.Planned = providers.WithAttrs(planned, unk)
		return resp, nil
	}
	for _, n := range []string{"slots", "free", "reach"} {
		a, b := getAttr(req.Prior, n), getAttr(planned, n)
		if n == "free" {
			a, b = boolOrFalse(a), boolOrFalse(b)
		}
		if n == "reach" && a.IsKnown() && b.IsKnown() && !a.IsNull() && !b.IsNull() && sameReach(a.AsString(), b.AsString()) {
			continue // relay and its synonym reverse
		}
		if !b.IsKnown() || !a.RawEquals(b) {
			resp.RequiresReplace = append(resp.RequiresReplace, cty.GetAttrPath(n))
		}
	}
	if len(resp.RequiresReplace) > 0 {
		unk := map[string]cty.Value{}
		for _, n := range computedAttrs {
			unk[n] = cty.UnknownVal(ty.AttributeType(n))
		}
		resp.Planned = providers.WithAttrs(planned, unk)
		return resp, nil
	}
	restart := false
	for _, n := range []string{"attributes", "config", "pond_policy", "replicas", "lenders_first"} {
		a, b := getAttr(req.Prior, n), getAttr(planned, n)
		if !b.IsWhollyKnown() || !a.RawEquals(b) {
			restart = true
		}
	}
	nodes := getAttr(planned, "nodes")
	members := getAttr(req.Prior, "members")
	grow := !nodes.IsKnown() || members.IsNull() || !members.IsKnown()
	missing0 := true
	if !grow {
		n, err := intAttr(planned, "nodes", 1)
		if err != nil {
			return nil, err
		}
		grow = members.LengthInt() != n
		name0 := nodeName(pool, 0)
		for it := members.ElementIterator(); it.Next(); {
			_, m := it.Element()
			if m.IsKnown() && !m.IsNull() && m.AsString() == name0 {
				missing0 = false
			}
		}
		if !grow {
			// Same count: every expected name must be there.
			want := map[string]bool{}
			for i := range n {
				want[nodeName(pool, i)] = true
			}
			for it := members.ElementIterator(); it.Next(); {
				_, m := it.Element()
				if !m.IsKnown() || m.IsNull() || !want[m.AsString()] {
					grow = true
				}
			}
		}
	}
	unk := map[string]cty.Value{}
	es, err := p.journal.pool(pool)
	if err != nil {
		return nil, err
	}
	// A node's token near its expiry: the apply renews it.
	// so does the pilot factory's delegated CA.
	renew := tokensDue(es, p.now()) || factorycred.CADue(p.factoryDir(pool), p.now())
	if grow || restart || renew {
		unk["members"] = cty.UnknownVal(cty.List(cty.String))
		unk["node_details"] = cty.UnknownVal(cty.List(nodeDetailType))
	}
	if restart || missing0 {
		unk["central_manager"] = cty.UnknownVal(cty.String)
		unk["condor_host"] = cty.UnknownVal(cty.String)
	}
	if restart || members.IsNull() || (members.IsKnown() && members.LengthInt() == 0) {
		unk["sea"] = cty.UnknownVal(cty.String)
	}
	resp.Planned = providers.WithAttrs(planned, unk)
	return resp, nil
}

func boolOrFalse(v cty.Value) cty.Value {
	if v.IsNull() {
		return cty.False
	}
	return v
}

// ApplyResourceChange implements providers.Provider.
func (p *Provider) ApplyResourceChange(ctx context.Context, req providers.ApplyRequest) providers.ApplyResponse {
	resp, err := p.apply(ctx, req)
	var out providers.ApplyResponse
	if resp != nil {
		out = *resp
	}
	out.Diagnostics = append(out.Diagnostics, providers.FromError(err)...)
	return out
}

func (p *Provider) apply(ctx context.Context, req providers.ApplyRequest) (*providers.ApplyResponse, error) {
	if req.TypeName != "pool" {
		return nil, fmt.Errorf("local provider: no resource type %q", req.TypeName)
	}
	progress := req.Progress
	if progress == nil {
		progress = func(string) {}
	}
	pool := PoolName(req.Address)
	if !req.Prior.IsNull() {
		if id := getAttr(req.Prior, "id"); !id.IsNull() && id.IsKnown() && id.AsString() != "" {
			pool = id.AsString()
		}
	}
	unlock := p.lockPool(pool)
	defer unlock()
	if req.Planned.IsNull() {
		return p.deletePool(pool, progress)
	}
	sp, err := specOf(req.Planned)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", req.Address, err)
	}
	secret, diags := secretKnobs(req.Config, req.Sensitive)
	if diags.HasErrors() {
		return nil, fmt.Errorf("%s: %w", req.Address, providers.Err(diags))
	}
	sp.Secret = secret
	if req.Prior.IsNull() {
		// Whatever the journal holds for this pool, the state does not
		// record: nodes a run that died before saving the state started,
		// or a whole pool whose state was lost. They are adopted as they
		// are (converge keeps, restarts or relaunches each on its own data
		// directory), so that their queues and running jobs are kept.
		old, err := p.journal.pool(pool)
		if err != nil {
			return nil, err
		}
		alive := 0
		var unready []*entry
		for _, e := range old {
			if e.Address != req.Address && e.alive() {
				return nil, fmt.Errorf("%s: pool name %q is already used by %s in this working directory", req.Address, pool, e.Address)
			}
			switch {
			case e.API == "":
				// Started by a run that died before the node was
				// ready: it never served, and holds no job.
				unready = append(unready, e)
			case e.alive():
				alive++
			}
		}
		if len(unready) > 0 {
			progress(fmt.Sprintf("reaping %d node(s) an interrupted run started and never saw ready", len(unready)))
			if err := p.stopAll(unready, true); err != nil {
				return nil, fmt.Errorf("%s: reaping leftover nodes: %w", req.Address, err)
			}
		}
		if alive > 0 {
			progress(fmt.Sprintf("adopting %d running node(s) of this pool that the state does not record", alive))
		}
	}
	return p.converge(ctx, req.Address, pool, sp, req.Planned, progress)
}

// converge makes the pool's running nodes match sp: it keeps live nodes
// with the same spec, restarts changed ones, stops surplus ones (highest
// index first) and launches missing ones.
func (p *Provider) converge(ctx context.Context, address, pool string, sp spec, planned cty.Value, progress func(string)) (*providers.ApplyResponse, error) {
	es, err := p.journal.pool(pool)
	if err != nil {
		return nil, err
	}
	rec, err := p.recorded(sp)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", address, err)
	}
	live, drop, restart, err := p.sortNodes(es, sp, rec.hash())
	if err != nil {
		return nil, err
	}
	if err := p.stopDropped(drop, sp, progress); err != nil {
		return p.partial(ctx, pool, planned, err)
	}
	prev := map[int]*entry{}
	for _, e := range es {
		prev[e.Index] = e
	}
	if len(restart) > 0 {
		// Every changed node's new configuration is written before any
		// node stops: one that cannot be written (a full disk) fails the
		// apply with the pool running as it was, and its state as it was
		// (no partial state: that would taint the pool for replacement).
		for _, e := range restart {
			if err := p.writeNodeConfig(e.DataDir, launchReq{address: address, spec: sp}); err != nil {
				return nil, fmt.Errorf("%s: %s: writing its new configuration, before any node stopped: %w", address, e.Node, err)
			}
		}
		progress(fmt.Sprintf("restarting %d node(s) with the new configuration", len(restart)))
		if err := p.stopAll(restart, false); err != nil {
			return p.partial(ctx, pool, planned, err)
		}
	}

	if err := p.checkNamesFree(ctx, pool, sp.Nodes, live, prev); err != nil {
		return p.partial(ctx, pool, planned, err)
	}

	// Node 0 first: it seeds the sea if there is none, and the others need
	// its API address as their central manager.
	launch := func(i int, cm string, join []string) (*entry, error) {
		e, err := p.launch(ctx, launchReq{pool: pool, address: address, index: i, spec: sp, record: rec, cm: cm, join: join, prev: prev[i]})
		if err == nil {
			progress(fmt.Sprintf("%s started (pid %d, api %s)", e.Node, e.PID, e.API))
		}
		return e, err
	}
	if live[0] == nil {
		p.seedMu.Lock()
		join := p.seaJoinAddrs(ctx, nodeName(pool, 0))
		e, err := launch(0, "", join)
		p.seedMu.Unlock()
		if err != nil {
			return p.partial(ctx, pool, planned, err)
		}
		live[0] = e
	}
	cm := ""
	if !sp.Free {
		cm = live[0].API
		p.tellManager(ctx, live, sp, cm)
		if err := p.renewFactoryCA(ctx, pool, cm, progress); err != nil {
			return p.partial(ctx, pool, planned, err)
		}
	}
	if err := launchWorkers(sp, live, cm, []string{live[0].Gossip}, launch); err != nil {
		return p.partial(ctx, pool, planned, err)
	}
	all := make([]*entry, 0, len(live))
	for i := range sp.Nodes {
		all = append(all, live[i])
	}
	progress("waiting for the nodes to see each other in the sea")
	if err := p.waitMembers(ctx, all, p.seaWatchers(pool), membersTimeout+time.Duration(len(all))*200*time.Millisecond); err != nil {
		return p.partial(ctx, pool, planned, fmt.Errorf("%w%s", err, logTail(all[len(all)-1].DataDir+"/"+LogFileName)))
	}
	return &providers.ApplyResponse{New: p.stateOf(planned, all, all[0].API)}, nil
}

// sortNodes sorts the pool's recorded nodes: those alive with the
// configuration of hash are kept (live, by index, their grants renewed),
// those dead or beyond the pool's size dropped, and those with another
// configuration restarted. A kept node whose token nears its expiry
// (tokenDue) gets a new one.
func (p *Provider) sortNodes(es []*entry, sp spec, hash string) (live map[int]*entry, drop, restart []*entry, err error) {
	live = map[int]*entry{}
	for _, e := range es {
		switch {
		case !e.alive():
			drop = append(drop, e)
		case e.Index >= sp.Nodes:
			drop = append(drop, e)
		case e.Spec != hash:
			restart = append(restart, e)
		default:
			if err := p.keepGrant(e, sp); err != nil {
				return nil, nil, nil, fmt.Errorf("%s: %w", e.Node, err)
			}
			if _, err := p.renewToken(e, sp); err != nil {
				return nil, nil, nil, fmt.Errorf("%s: %w", e.Node, err)
			}
			live[e.Index] = e
		}
	}
	return live, drop, restart, nil
}

// stopDropped stops the dropped nodes, highest index first, and removes
// those beyond the pool's size.
func (p *Provider) stopDropped(drop []*entry, sp spec, progress func(string)) error {
	slices.SortFunc(drop, func(a, b *entry) int { return b.Index - a.Index })
	for _, e := range drop {
		if e.alive() {
			progress(fmt.Sprintf("stopping %s", e.Node))
		}
		e.stop(stopTimeout)
		if e.Index >= sp.Nodes {
			if err := p.stopAll([]*entry{e}, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// tellManager tells the survivors of a relaunched central manager its new
// address, cm. The members of a pool with replicas follow the acting
// manager by themselves (the relaunched one takes the pool back when its
// epoch is the highest), and a replica that acts must not be told to
// report to another.
func (p *Provider) tellManager(ctx context.Context, live map[int]*entry, sp spec, cm string) {
	for i, e := range live {
		if i == 0 || sp.Replicas > 0 {
			continue
		}
		p.refreshAddrs(e)
		if _, err := p.nodeClient(e).SetTags(ctx, map[string]string{api.TagCM: cm}); err != nil {
			p.logger.Warn("updating central manager tag", "node", e.Node, "err", err)
		}
	}
}

// launchWorkers launches the pool's missing nodes other than node 0, a
// few at a time, reporting to cm and joining the sea at join, and adds
// them to live.
func launchWorkers(sp spec, live map[int]*entry, cm string, join []string, launch func(i int, cm string, join []string) (*entry, error)) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	var missing []int
	for i := 1; i < sp.Nodes; i++ {
		if live[i] == nil {
			missing = append(missing, i)
		}
	}
	// Starting every process at once starves them all on a small
	// machine (none answers within the ready timeout); a few at a time
	// is faster in total.
	sem := make(chan struct{}, launchParallelism())
	for _, i := range missing {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			e, err := launch(i, cm, join)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			live[i] = e
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// partial returns the state of what is running after a failed apply, so
// that nothing is lost, with err.
func (p *Provider) partial(ctx context.Context, pool string, planned cty.Value, err error) (*providers.ApplyResponse, error) {
	es, jerr := p.journal.pool(pool)
	if jerr != nil {
		return nil, errors.Join(err, jerr)
	}
	var live []*entry
	for _, e := range es {
		if e.alive() && e.API != "" {
			live = append(live, e)
		}
	}
	seaAddr := ""
	if len(live) > 0 {
		seaAddr = live[0].API
	}
	return &providers.ApplyResponse{New: p.stateOf(planned, live, seaAddr)}, fmt.Errorf("pool %s: %w", pool, err)
}

// stateOf builds a pool's state from its configuration-derived attributes
// in base and its live nodes.
func (p *Provider) stateOf(base cty.Value, live []*entry, seaAddr string) cty.Value {
	names := make([]cty.Value, 0, len(live))
	details := make([]cty.Value, 0, len(live))
	cm := ""
	for _, e := range live {
		if e.Index == 0 {
			cm = e.API
		}
		names = append(names, cty.StringVal(e.Node))
		details = append(details, cty.ObjectVal(map[string]cty.Value{
			"name":   cty.StringVal(e.Node),
			"api":    cty.StringVal(e.API),
			"gossip": cty.StringVal(e.Gossip),
			"pid":    cty.NumberIntVal(int64(e.PID)),
		}))
	}
	set := map[string]cty.Value{
		"members":      cty.ListValEmpty(cty.String),
		"node_details": cty.ListValEmpty(nodeDetailType),
		"sea":          cty.StringVal(seaAddr),
	}
	if len(names) > 0 {
		set["members"] = cty.ListVal(names)
		set["node_details"] = cty.ListVal(details)
	}
	if cm != "" {
		set["central_manager"] = cty.StringVal(cm)
		set["condor_host"] = cty.StringVal(cm)
	} else if c := getAttr(base, "central_manager"); c.IsNull() || !c.IsKnown() {
		set["central_manager"] = cty.StringVal("")
		set["condor_host"] = cty.StringVal("")
	} else {
		set["condor_host"] = c
	}
	for _, n := range []string{"id", "nodes", "slots"} {
		if v := getAttr(base, n); !v.IsKnown() {
			set[n] = cty.NullVal(v.Type())
		}
	}
	return providers.WithAttrs(base, set)
}

func (p *Provider) deletePool(pool string, progress func(string)) (*providers.ApplyResponse, error) {
	es, err := p.journal.pool(pool)
	if err != nil {
		return nil, err
	}
	if len(es) > 0 {
		progress(fmt.Sprintf("stopping %d node(s)", len(es)))
	}
	if err := p.stopAll(es, true); err != nil {
		return nil, fmt.Errorf("pool %s: %w", pool, err)
	}
	return &providers.ApplyResponse{New: cty.NullVal(providerSchema().Resources["pool"].ImpliedType())}, nil
}

// observe returns the pool's nodes that are present: process alive and
// alive in the sea's membership.
func (p *Provider) observe(ctx context.Context, es []*entry) []*entry {
	var procAlive []*entry
	for _, e := range es {
		if e.alive() && e.API != "" {
			procAlive = append(procAlive, e)
		}
	}
	if len(procAlive) == 0 {
		return nil
	}
	// Views converge by gossip: merge a few agents' views (each node sees
	// itself), and count a node present when some view has it alive and
	// none says it left.
	alive, left := map[string]bool{}, map[string]bool{}
	asked := 0
	for _, e := range procAlive {
		if asked == 4 {
			break
		}
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		ms, err := p.client(e.API).Members(cctx, api.MembersFilter{})
		cancel()
		if err != nil {
			continue
		}
		asked++
		for _, m := range ms {
			switch m.Status {
			case api.StatusAlive:
				alive[m.Name] = true
			case api.StatusLeft:
				left[m.Name] = true
			}
		}
	}
	if asked == 0 {
		return nil
	}
	var out []*entry
	for _, e := range procAlive {
		if alive[e.Node] && !left[e.Node] {
			out = append(out, e)
		}
	}
	return out
}

// actingManager returns the API address of the member that acts as the
// pool's central manager when the pool keeps replicas of it (the live
// member with the highest epoch tag), "" when none shows one.
func (p *Provider) actingManager(ctx context.Context, pool string, present []*entry) string {
	if len(present) == 0 || present[0].NodeSpec == nil || present[0].NodeSpec.Replicas == 0 {
		return ""
	}
	for _, e := range present[:min(len(present), 2)] {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		ms, err := p.client(e.API).Members(cctx, api.MembersFilter{})
		cancel()
		if err != nil {
			continue
		}
		var fms []api.FailoverMember
		for _, m := range ms {
			fms = append(fms, api.FailoverMember{Name: m.Name, API: m.Tags[api.TagAPI], Pool: m.Tags[api.TagPool],
				Alive: m.Status == api.StatusAlive, Epoch: api.ParseEpoch(m.Tags[api.TagEpoch])})
		}
		if m, ok := api.FailoverManager(fms, pool); ok {
			return m.API
		}
	}
	return ""
}

// ReadResource implements providers.Provider.
func (p *Provider) ReadResource(ctx context.Context, req providers.ReadRequest) providers.ReadResponse {
	resp, err := p.read(ctx, req)
	if err != nil {
		return providers.ReadResponse{Diagnostics: providers.FromError(err)}
	}
	return *resp
}

// retag records address as the owner of the pool's journal entries, when
// the state now holds the pool at another address (a moved block moved
// it): a new pool at the old address must not take them for nodes an
// interrupted run of its own left behind, and reap them.
func (p *Provider) retag(pool, address string, es []*entry) error {
	stale := false
	for _, e := range es {
		if e.Address != address {
			stale = true
		}
	}
	if !stale {
		return nil
	}
	unlock := p.lockPool(pool)
	defer unlock()
	for _, e := range es {
		if e.Address != address {
			e.Address = address
			if err := p.journal.write(e); err != nil {
				return err
			}
		}
	}
	return nil
}

func (p *Provider) read(ctx context.Context, req providers.ReadRequest) (*providers.ReadResponse, error) {
	if req.TypeName != "pool" {
		return nil, fmt.Errorf("local provider: no resource type %q", req.TypeName)
	}
	if req.Current.IsNull() {
		return &providers.ReadResponse{New: req.Current}, nil
	}
	pool := PoolName(req.Address)
	if id := getAttr(req.Current, "id"); !id.IsNull() && id.IsKnown() && id.AsString() != "" {
		pool = id.AsString()
	}
	es, err := p.journal.pool(pool)
	if err != nil {
		return nil, err
	}
	if len(es) == 0 {
		return &providers.ReadResponse{New: cty.NullVal(req.Current.Type())}, nil
	}
	if err := p.retag(pool, req.Address, es); err != nil {
		return nil, err
	}
	present := p.observe(ctx, es)
	seaAddr := ""
	if cur := getAttr(req.Current, "sea"); !cur.IsNull() && cur.IsKnown() {
		for _, e := range present {
			if e.API == cur.AsString() {
				seaAddr = e.API
			}
		}
	}
	if seaAddr == "" && len(present) > 0 {
		seaAddr = present[0].API
	}
	if seaAddr == "" {
		// Any live agent of this working directory will do.
		if all, err := p.journal.all(); err == nil {
			for _, e := range all {
				if e.alive() && e.API != "" {
					seaAddr = e.API
					break
				}
			}
		}
	}
	resp := &providers.ReadResponse{New: p.stateOf(req.Current, present, seaAddr)}
	if cm := p.actingManager(ctx, pool, present); cm != "" {
		resp.New = providers.WithAttrs(resp.New, map[string]cty.Value{"central_manager": cty.StringVal(cm), "condor_host": cty.StringVal(cm)})
	}
	if w := p.goneNodes(req.Address, req.Current, es, present); w != nil {
		resp.Diagnostics = hcl.Diagnostics{w}
	}
	resp.Diagnostics = append(resp.Diagnostics, p.credentialWarnings(ctx, req.Address, pool, present)...)
	return resp, nil
}

// goneNodes warns of the members the state records that are no longer
// running or have left the sea, naming their logs, which say why.
func (p *Provider) goneNodes(address string, current cty.Value, es, present []*entry) *hcl.Diagnostic {
	recorded := map[string]bool{}
	if m := getAttr(current, "members"); !m.IsNull() && m.IsWhollyKnown() {
		for _, v := range m.AsValueSlice() {
			recorded[v.AsString()] = true
		}
	}
	here := map[string]bool{}
	for _, e := range present {
		here[e.Node] = true
	}
	var gone []string
	for _, e := range es {
		if !recorded[e.Node] || here[e.Node] {
			continue
		}
		log := filepath.Join(e.DataDir, LogFileName)
		if rel, err := filepath.Rel(p.workDir, log); err == nil && !strings.HasPrefix(rel, "..") {
			log = rel
		}
		gone = append(gone, fmt.Sprintf("%s (log: %s)", e.Node, log))
	}
	if len(gone) == 0 {
		return nil
	}
	return providers.Warning(
		fmt.Sprintf("%d of the %d nodes of %s are gone", len(gone), len(recorded), address),
		fmt.Sprintf("Not running, or no longer in the sea: %s. The plan shows what changed; apply starts the missing nodes again.", strings.Join(gone, ", ")))
}

// ImportResource implements providers.Provider: the ID is the pool's name.
func (p *Provider) ImportResource(ctx context.Context, req providers.ImportRequest) providers.ImportResponse {
	v, err := p.importPool(ctx, req.TypeName, req.ID)
	return providers.ImportResponse{Imported: v, Diagnostics: providers.FromError(err)}
}

func (p *Provider) importPool(ctx context.Context, typeName, id string) (cty.Value, error) {
	if typeName != "pool" {
		return cty.NilVal, fmt.Errorf("local provider: no resource type %q", typeName)
	}
	es, err := p.journal.pool(id)
	if err != nil {
		return cty.NilVal, err
	}
	present := p.observe(ctx, es)
	if len(present) == 0 {
		return cty.NilVal, fmt.Errorf("import: no running pool %q in %s", id, p.journal.dir)
	}
	if present[0].NodeSpec == nil {
		return cty.NilVal, fmt.Errorf("import %s: journal entry of %s has no node spec", id, present[0].Node)
	}
	sp := *present[0].NodeSpec
	ty := providerSchema().Resources["pool"].ImpliedType()
	m := map[string]cty.Value{}
	for n, t := range ty.AttributeTypes() {
		m[n] = cty.NullVal(t)
	}
	m["id"] = cty.StringVal(id)
	m["nodes"] = cty.NumberIntVal(int64(len(present)))
	m["slots"] = cty.NumberIntVal(int64(sp.Slots))
	if sp.Free {
		m["free"] = cty.True
	}
	if sp.Reach != "" {
		m["reach"] = cty.StringVal(sp.Reach)
	}
	if len(sp.Attrs) > 0 {
		attrs := map[string]cty.Value{}
		for _, a := range sp.Attrs {
			k, v, _ := strings.Cut(a, "=")
			switch x := api.ParseAttrValue(v).(type) {
			case int64:
				attrs[k] = cty.NumberIntVal(x)
			case float64:
				attrs[k] = cty.NumberFloatVal(x)
			case bool:
				attrs[k] = cty.BoolVal(x)
			case string:
				attrs[k] = cty.StringVal(x)
			}
		}
		m["attributes"] = cty.ObjectVal(attrs)
	}
	if len(sp.Knobs) > 0 {
		knobs := map[string]cty.Value{}
		for k, v := range sp.Knobs {
			if slices.Contains(sp.Secret, k) {
				// The journal holds its hash only: the next plan
				// shows it as changed, and apply sets it again.
				continue
			}
			knobs[k] = cty.StringVal(v)
		}
		if len(knobs) > 0 {
			m["config"] = cty.MapVal(knobs)
		}
	}
	return p.stateOf(cty.ObjectVal(m), present, present[0].API), nil
}
