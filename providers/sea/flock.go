package sea

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/providers"
)

// willingType is one entry of a flock's willing list.
var willingType = cty.Object(map[string]cty.Type{
	"from":       cty.String,
	"pool":       cty.String,
	"api":        cty.String,
	"rtt_ms":     cty.Number,
	"idle_slots": cty.Number,
})

var flockSchema = &providers.Schema{
	Description: "Pools that flock jobs to each other: the schedds of the pools in from send the jobs their own pool cannot run to the nearest willing pools of to (or of the whole sea).",
	Attributes: map[string]*providers.Attribute{
		"from":             {Type: cty.List(cty.String), Required: true, Description: "The -pool addresses (pool.NAME.central_manager) of the pools whose jobs may flock."},
		"to":               {Type: cty.List(cty.String), Optional: true, Description: "The -pool addresses of the pools that take them; omitted, any pool of the sea whose announcement allow and deny admit."},
		"allow":            {Type: cty.String, Optional: true, Description: "ClassAd expression a destination pool's announcement must satisfy (PoolName, Name, IdleSlots, Cpus, Memory, Gpus, RTT in seconds)."},
		"deny":             {Type: cty.String, Optional: true, Description: "ClassAd expression that excludes a destination pool when true of its announcement."},
		"job_requirements": {Type: cty.String, Optional: true, Description: "ClassAd expression a job (MY) must satisfy to flock, as HTCondor's per-job FlockTo opt-in; omitted, any job."},
		"max_jobs":         {Type: cty.Number, Optional: true, Description: "The most jobs of a source pool running in each destination pool at once, its schedds together (default 0: no bound)."},
		"id":               {Type: cty.String, Computed: true},
		"willing":          {Type: cty.List(willingType), Computed: true, Description: "The pools willing to take each source pool's jobs as last observed, nearest first."},
	},
}

// validateFlock returns what is wrong with a flock's configuration, each
// error naming its argument. Unknown values pass.
func validateFlock(cfg cty.Value, known func(string) (cty.Value, bool)) []error {
	var errs []error
	addrs := func(name string) {
		l, ok := known(name)
		if !ok || !l.IsWhollyKnown() {
			return
		}
		if name == "from" && l.LengthInt() == 0 {
			errs = append(errs, &attrError{name, errors.New("a flock needs at least one pool whose jobs flock")})
		}
		for i, v := range l.AsValueSlice() {
			if v.IsNull() {
				errs = append(errs, &attrError{name, fmt.Errorf("element %d is null", i)})
				continue
			}
			if err := checkAddr(v.AsString()); err != nil {
				errs = append(errs, &attrError{name, fmt.Errorf("element %d: %w", i, err)})
			}
		}
	}
	addrs("from")
	addrs("to")
	for _, name := range []string{"allow", "deny", "job_requirements"} {
		if v, ok := known(name); ok {
			if _, err := classad.ParseExpr(v.AsString()); err != nil {
				errs = append(errs, &attrError{name, fmt.Errorf("not a ClassAd expression: %w", err)})
			}
		}
	}
	if _, ok := known("max_jobs"); ok && num(cfg, "max_jobs", 0) < 0 {
		errs = append(errs, &attrError{"max_jobs", errors.New("must not be negative")})
	}
	return errs
}

// strList is a known list attribute's strings.
func strList(v cty.Value, name string) []string {
	a := attr(v, name)
	if a.IsNull() || !a.IsKnown() {
		return nil
	}
	var out []string
	for _, e := range a.AsValueSlice() {
		if !e.IsNull() && e.IsKnown() {
			out = append(out, e.AsString())
		}
	}
	return out
}

// flockName is the name the central managers keep a flock under: its
// resource address.
func flockName(address string) string { return address }

// planFlock plans a flock: the willing list is known after apply when the
// flock is new or its configuration changes.
func (p *Provider) planFlock(req providers.PlanRequest) providers.PlanResponse {
	m := req.ProposedNew.AsValueMap()
	if req.Prior.IsNull() {
		m["id"] = cty.UnknownVal(cty.String)
		m["willing"] = cty.UnknownVal(cty.List(willingType))
		return providers.PlanResponse{Planned: cty.ObjectVal(m)}
	}
	for _, a := range []string{"from", "to", "allow", "deny", "job_requirements", "max_jobs"} {
		if !req.Prior.GetAttr(a).RawEquals(req.ProposedNew.GetAttr(a)) {
			m["willing"] = cty.UnknownVal(cty.List(willingType))
			break
		}
	}
	return providers.PlanResponse{Planned: cty.ObjectVal(m)}
}

// cmInfo is what a flock's apply learns of a central manager.
type cmInfo struct {
	addr string
	st   *api.FlockStatus
}

// flockConfigs works out what each central manager of a flock keeps: the
// sources an Out, the destinations an In naming the sources' pools.
func flockConfigs(name string, v cty.Value, pools map[string]string) map[string]api.FlockConfig {
	out := map[string]api.FlockConfig{}
	from, to := strList(v, "from"), strList(v, "to")
	var sources []string
	for _, f := range from {
		sources = append(sources, pools[f])
	}
	sort.Strings(sources)
	// Destinations by pool name, not address: the pool's central
	// manager may move (a replica takes over), its name stays.
	var dests []string
	for _, t := range to {
		dests = append(dests, pools[t])
	}
	for _, f := range from {
		c := out[f]
		c.Name = name
		c.Out = &api.FlockOut{To: dests, Allow: str(v, "allow", ""), Deny: str(v, "deny", ""),
			JobRequirements: str(v, "job_requirements", ""), MaxJobs: num(v, "max_jobs", 0)}
		out[f] = c
	}
	for _, t := range to {
		c := out[t]
		c.Name = name
		c.In = &api.FlockIn{From: sources}
		out[t] = c
	}
	return out
}

// applyFlock sets the flock on its central managers (and removes it from
// those it no longer names), or removes it everywhere when it is
// destroyed: the sources' schedds stop flocking through it, and the jobs
// they flocked finish where they run.
func (p *Provider) applyFlock(ctx context.Context, req providers.ApplyRequest) (cty.Value, hcl.Diagnostics) {
	progress := req.Progress
	if progress == nil {
		progress = func(string) {}
	}
	name := flockName(req.Address)
	var prevCMs []string
	if !req.Prior.IsNull() {
		prevCMs = append(strList(req.Prior, "from"), strList(req.Prior, "to")...)
	}
	if req.Planned.IsNull() {
		if err := p.removeFlock(ctx, name, prevCMs, nil, progress); err != nil {
			return req.Prior, providers.FromError(err)
		}
		return req.Planned, nil
	}
	planned := req.Planned
	// Every central manager the flock names must answer, as one.
	infos := map[string]*cmInfo{}
	clients := map[string]*api.Client{}
	var order []string
	all := append(strList(planned, "from"), strList(planned, "to")...)
	for _, arg := range []string{"from", "to"} {
		for i, addr := range strList(planned, arg) {
			if _, ok := infos[addr]; ok {
				continue
			}
			c, st, err := p.flockClient(ctx, addr, all)
			if err != nil {
				return req.Prior, hcl.Diagnostics{providers.AttributeError(arg, fmt.Errorf("%s: element %d, %s: not a reachable pool's central manager: %w", arg, i, addr, err))}
			}
			infos[addr] = &cmInfo{addr: addr, st: st}
			clients[addr] = c
			order = append(order, addr)
		}
	}
	pools := map[string]string{}
	for addr, in := range infos {
		pools[addr] = in.st.Pool
	}
	for _, f := range strList(planned, "from") {
		for _, t := range strList(planned, "to") {
			if pools[f] == pools[t] {
				return req.Prior, hcl.Diagnostics{providers.AttributeError("to", fmt.Errorf("to: %s is pool %s, a source of the flock too: a pool does not flock to itself", t, pools[t]))}
			}
		}
	}
	configs := flockConfigs(name, planned, pools)
	keep := map[string]bool{}
	for _, addr := range order {
		keep[addr] = true
		st, err := clients[addr].SetFlock(ctx, configs[addr])
		if err != nil {
			return req.Prior, providers.FromError(fmt.Errorf("setting flock %s on %s (pool %s): %w", name, addr, pools[addr], err))
		}
		infos[addr].st = st
		progress(fmt.Sprintf("flock set on pool %s (%s)", pools[addr], addr))
	}
	if err := p.removeFlock(ctx, name, prevCMs, keep, progress); err != nil {
		return req.Prior, providers.FromError(err)
	}
	m := planned.AsValueMap()
	m["id"] = cty.StringVal(name)
	m["willing"] = willingValue(name, strList(planned, "from"), infos)
	return cty.ObjectVal(m), nil
}

// removeFlock removes flock name from the central managers addrs but
// those in keep; a central manager that is gone has nothing to remove.
func (p *Provider) removeFlock(ctx context.Context, name string, addrs []string, keep map[string]bool, progress func(string)) error {
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	seen := map[string]bool{}
	for _, addr := range addrs {
		if keep[addr] || seen[addr] {
			continue
		}
		seen[addr] = true
		wg.Go(func() {
			err := p.client(addr).RemoveFlock(ctx, name)
			if err != nil && isUnreachable(err) {
				// A replica may act for the pool's manager.
				if acting := p.actingFor(ctx, addr, addrs); acting != "" && acting != addr && !keep[acting] {
					if err = p.client(acting).RemoveFlock(ctx, name); err == nil {
						addr = acting
					}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				progress(fmt.Sprintf("flock removed from %s", addr))
			case isUnreachable(err):
				progress(fmt.Sprintf("%s is gone: nothing to remove there", addr))
			case isNotCM(err):
				// A replica that acted for its pool's manager and
				// handed the pool back keeps no flocks.
				progress(fmt.Sprintf("%s is no pool's central manager now: nothing to remove there", addr))
			default:
				errs = append(errs, fmt.Errorf("removing flock %s from %s: %w", name, addr, err))
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// willingValue is the willing list of flock name at each source, nearest
// first: the pools that the flock admits.
func willingValue(name string, from []string, infos map[string]*cmInfo) cty.Value {
	var out []cty.Value
	for _, f := range from {
		in := infos[f]
		if in == nil || in.st == nil {
			continue
		}
		for _, c := range in.st.Willing {
			admits := false
			for _, n := range c.Flocks {
				admits = admits || n == name
			}
			if !admits {
				continue
			}
			rtt := cty.NullVal(cty.Number)
			if c.RTTKnown {
				rtt = cty.NumberFloatVal(float64(c.RTT.Microseconds()) / 1000)
			}
			out = append(out, cty.ObjectVal(map[string]cty.Value{
				"from": cty.StringVal(in.st.Pool), "pool": cty.StringVal(c.Pool), "api": cty.StringVal(c.API),
				"rtt_ms": rtt, "idle_slots": cty.NumberIntVal(int64(c.IdleSlots)),
			}))
		}
	}
	if len(out) == 0 {
		return cty.ListValEmpty(willingType)
	}
	return cty.ListVal(out)
}

// readFlock observes a flock: the willing list its sources see now. A
// flock no source keeps any more is gone; a source that does not answer
// leaves the state as it was, with a warning.
func (p *Provider) readFlock(ctx context.Context, req providers.ReadRequest) providers.ReadResponse {
	cur := req.Current
	name := str(cur, "id", flockName(req.Address))
	from := strList(cur, "from")
	infos := map[string]*cmInfo{}
	var diags hcl.Diagnostics
	kept := 0
	via := append(slices.Clone(from), strList(cur, "to")...)
	for _, f := range from {
		_, st, err := p.flockClient(ctx, f, via)
		if err != nil {
			diags = append(diags, providers.Warning("Flock "+req.Address+" not observed at "+f,
				fmt.Sprintf("The central manager %s did not answer (%v): the state keeps what it said last.", f, err)))
			return providers.ReadResponse{New: cur, Diagnostics: diags}
		}
		for _, c := range st.Flocks {
			if c.Name == name && c.Out != nil {
				kept++
			}
		}
		infos[f] = &cmInfo{addr: f, st: st}
	}
	if kept == 0 && len(from) > 0 {
		return providers.ReadResponse{New: cty.NullVal(cur.Type())}
	}
	m := cur.AsValueMap()
	m["willing"] = willingValue(name, from, infos)
	p.logger.Debug("flock read", "address", req.Address, "willing", describeWilling(m["willing"]))
	return providers.ReadResponse{New: cty.ObjectVal(m), Diagnostics: diags}
}

// describeWilling is the willing list as one line, for logs.
func describeWilling(v cty.Value) string {
	if v.IsNull() || !v.IsKnown() {
		return "(unknown)"
	}
	var parts []string
	for _, e := range v.AsValueSlice() {
		parts = append(parts, e.GetAttr("from").AsString()+"->"+e.GetAttr("pool").AsString())
	}
	return strings.Join(parts, ", ")
}

// flockClient returns the client of the pool's acting central manager
// for the central manager at addr: addr itself when it answers as one,
// else, when the pool keeps replicas of its manager, the member that acts
// as the pool's manager now (the live member of its pool with the highest
// epoch tag, as the pool's central_manager follows it). via lists other
// agents to ask the sea's members of (the flock's other central
// managers), besides the provider's sea address. It returns the status
// the manager answered.
func (p *Provider) flockClient(ctx context.Context, addr string, via []string) (*api.Client, *api.FlockStatus, error) {
	c := p.client(addr)
	st, err := c.Flock(ctx)
	if err == nil {
		return c, st, nil
	}
	if !isUnreachable(err) && !isNotCM(err) && !errors.Is(err, context.DeadlineExceeded) {
		return nil, nil, err
	}
	acting := p.actingFor(ctx, addr, via)
	if acting == "" || acting == addr {
		return nil, nil, err
	}
	c = p.client(acting)
	st, err2 := c.Flock(ctx)
	if err2 != nil {
		return nil, nil, fmt.Errorf("%w; the pool's acting central manager %s: %w", err, acting, err2)
	}
	return c, st, nil
}

// actingFor finds the pool of the central manager at addr among the sea's
// members (asking the agents of via, then the provider's sea address) and
// returns the API address of the member that acts as that pool's manager,
// "" when there is none or nobody answers.
func (p *Provider) actingFor(ctx context.Context, addr string, via []string) string {
	ask := slices.Clone(via)
	if p.seaAddr != "" {
		ask = append(ask, p.seaAddr)
	}
	for _, v := range ask {
		if v == "" || v == addr {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		ms, err := p.client(v).Members(cctx, api.MembersFilter{})
		cancel()
		if err != nil {
			continue
		}
		pool := ""
		var fms []api.FailoverMember
		for _, m := range ms {
			if m.Tags[api.TagAPI] == addr {
				pool = m.Tags[api.TagPool]
			}
			fms = append(fms, api.FailoverMember{Name: m.Name, API: m.Tags[api.TagAPI], Pool: m.Tags[api.TagPool],
				Alive: m.Status == api.StatusAlive, Epoch: api.ParseEpoch(m.Tags[api.TagEpoch])})
		}
		if pool == "" {
			continue
		}
		if m, ok := api.FailoverManager(fms, pool); ok {
			return m.API
		}
		return ""
	}
	return ""
}

// isNotCM says whether err is an agent's answer that it is no pool's
// central manager (409 at the flock routes).
func isNotCM(err error) bool {
	var se *api.StatusError
	return errors.As(err, &se) && se.Status == http.StatusConflict
}
