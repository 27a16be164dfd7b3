package planner

import (
	"context"
	"sort"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/state"
)

// refresh reads every managed instance of prior from its provider.
func (e *Engine) refresh(ctx context.Context, prior *state.State, infos map[string]*resourceInfo, opts PlanOptions) (*state.State, []*ResourceChange, hcl.Diagnostics) {
	refreshed := prior.DeepCopy()
	if !opts.Refresh {
		return refreshed, nil, nil
	}
	type job struct {
		res  *state.Resource
		inst *state.Instance
	}
	var jobs []job
	for _, r := range refreshed.Resources {
		if r.Mode != state.ModeManaged {
			continue
		}
		for _, inst := range r.Instances {
			jobs = append(jobs, job{r, inst})
		}
	}
	var (
		mu    sync.Mutex
		diags hcl.Diagnostics
		drift []*ResourceChange
		gone  = map[*state.Instance]bool{}
		wg    sync.WaitGroup
		sem   = make(chan struct{}, opts.Parallelism)
	)
	for _, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func(j job) {
			defer wg.Done()
			defer func() { <-sem }()
			ra := stateResourceAddr(j.res)
			addr := ra.Instance(normalizeKey(j.inst.IndexKey))
			pi, schema, d := e.providerForState(ctx, j.res)
			if d.HasErrors() {
				mu.Lock()
				diags = append(diags, d...)
				mu.Unlock()
				return
			}
			cur, err := decodeAttrs(j.inst.Attributes, schema)
			if err != nil {
				mu.Lock()
				diags = append(diags, errDiag("Invalid state for "+addr.String(), err, nil))
				mu.Unlock()
				return
			}
			e.hooks.PreRefresh(addr)
			resp, err := pi.p.ReadResource(ctx, providers.ReadRequest{TypeName: j.res.Type, Address: addr.String(), Current: cur})
			e.hooks.PostRefresh(addr, err)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				diags = append(diags, errDiag("Failed to refresh "+addr.String(), err, e.declRange(ra.String())))
				return
			}
			nv := resp.New
			if nv.IsNull() {
				gone[j.inst] = true
				drift = append(drift, &ResourceChange{Addr: addr, ProviderKey: providerKeyOfState(j.res.Provider), Action: Delete, Before: cur, After: cty.NullVal(schema.ImpliedType())})
				return
			}
			nv, err = convert.Convert(nv, schema.ImpliedType())
			if err != nil {
				diags = append(diags, errDiag("Provider returned an invalid value for "+addr.String(), err, nil))
				return
			}
			if !valuesEqual(nv, cur) {
				drift = append(drift, &ResourceChange{Addr: addr, ProviderKey: providerKeyOfState(j.res.Provider), Action: Update, Before: cur, After: nv, Sensitive: sensitiveAttrs(schema)})
			}
			raw, err := encodeAttrs(nv, schema)
			if err != nil {
				diags = append(diags, errDiag("Cannot store state of "+addr.String(), err, nil))
				return
			}
			j.inst.Attributes = raw
		}(j)
	}
	wg.Wait()
	for _, r := range refreshed.Resources {
		kept := r.Instances[:0]
		for _, inst := range r.Instances {
			if !gone[inst] {
				kept = append(kept, inst)
			}
		}
		r.Instances = kept
	}
	sort.Slice(drift, func(i, j int) bool { return drift[i].Addr.String() < drift[j].Addr.String() })
	return refreshed, drift, diags
}
