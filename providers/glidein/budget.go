package glidein

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strings"

	"github.com/hashicorp/hcl/v2"
	site "github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/providers"
	"github.com/zclconf/go-cty/cty"
)

// budget is a cap on what glideins cost: max_hourly_cost (US dollars an
// hour, worst case over the instance types they may run on) and
// max_instances. Zero is no cap.
type budget struct {
	maxHourlyCost float64
	maxInstances  int
}

// costEpsilon absorbs the rounding of sums of prices.
const costEpsilon = 1e-9

// budgetAttrs are the arguments of a budget, in the aws provider block
// (for all its glideins together) and in a glidein resource (for its own).
func budgetAttrs(scope string) map[string]*providers.Attribute {
	return map[string]*providers.Attribute{
		"max_hourly_cost": {Type: cty.Number, Optional: true,
			Description: "Most " + scope + " may cost, in US dollars an hour, counting each instance at the highest price of the instance types it may launch as (the on-demand table, prices, or the spot price history); plan refuses more (default: no cap)."},
		"max_instances": {Type: cty.Number, Optional: true,
			Description: "Most instances " + scope + " may keep queued or running; plan refuses more (default: no cap)."},
	}
}

// budgetOf reads the budget arguments of a provider block or a glidein
// resource. Its errors are attrErrors at the argument.
func budgetOf(v cty.Value) (budget, error) {
	var b budget
	var errs []error
	if a := getAttr(v, "max_hourly_cost"); !a.IsNull() {
		if !a.IsKnown() {
			errs = append(errs, attrErr("max_hourly_cost", "not known"))
		} else if f, _ := a.AsBigFloat().Float64(); f <= 0 || a.AsBigFloat().Cmp(big.NewFloat(1e6)) > 0 {
			errs = append(errs, attrErr("max_hourly_cost", "%s: want a positive amount of US dollars an hour, such as 2.50", a.AsBigFloat().Text('g', -1)))
		} else {
			b.maxHourlyCost = f
		}
	}
	var err error
	if getAttr(v, "max_instances").IsNull() {
		// No cap.
	} else if b.maxInstances, err = intAttr(v, "max_instances", 0, 1, maxNodes); err != nil {
		errs = append(errs, err)
	}
	return b, errors.Join(errs...)
}

// priceList is what a site says its glideins cost.
type priceList struct {
	prices  []site.Price
	worst   float64  // highest known price
	unknown []string // offers without a price
}

// prices asks the site for its prices; ok is false for a site without
// any (not a glidein.Pricer).
func (p *Provider) prices(ctx context.Context) (pl priceList, ok bool, err error) {
	pr, ok := p.site.(site.Pricer)
	if !ok {
		return pl, false, nil
	}
	ps, err := pr.Prices(ctx)
	if err != nil {
		return pl, true, fmt.Errorf("the prices of the %s site: %w", p.kind, err)
	}
	pl.prices = ps
	for _, x := range ps {
		if !x.Known {
			pl.unknown = append(pl.unknown, x.Offer)
			continue
		}
		pl.worst = max(pl.worst, x.USDPerHour)
	}
	return pl, true, nil
}

// starts is how many glideins applying planned over prior starts: all of
// them when the resource is new or its glideins are replaced (a changed
// spec), else those beyond the live ones.
func starts(prior, planned cty.Value, nodes int) int {
	if prior.IsNull() {
		return nodes
	}
	for _, name := range []string{"pool", "lifetime", "idle_timeout", "cm_timeout", "max_jobs", "slots", "cpus", "memory", "attributes", "validate"} {
		a, b := getAttr(prior, name), getAttr(planned, name)
		if a.IsNull() && name == "pool" {
			continue
		}
		if !b.IsWhollyKnown() || !a.RawEquals(b) && !(a.IsNull() && b.IsNull()) {
			return nodes
		}
	}
	live := 0
	if ids := getAttr(prior, "ids"); !ids.IsNull() && ids.IsKnown() {
		live = ids.LengthInt()
	}
	return max(0, nodes-live)
}

// planCost estimates what the glidein resource planned costs and checks
// it against its own budget and the provider's: nodes beyond max_instances,
// a cost beyond max_hourly_cost, and an instance type without a price when
// a max_hourly_cost is set, are errors at the resource's arguments. The
// site's notes on its prices (a spot price replaced by the on-demand one)
// are warnings. A resource whose nodes are not known until apply has no
// estimate.
func (p *Provider) planCost(ctx context.Context, req providers.PlanRequest, planned cty.Value) (*providers.CostEstimate, hcl.Diagnostics) {
	if p.site == nil {
		return nil, nil
	}
	own, err := budgetOf(planned)
	if err != nil {
		return nil, nil // ValidateResourceConfig reports it
	}
	// A factory's entry keeps its budget itself, at each submission: its
	// estimate is what it may keep at most, never over a cap.
	fact := isFactory(planned)
	var nodes int
	if fact {
		if nodes, err = intAttr(getAttr(planned, "factory"), "max_running", 0, 0, maxNodes); err != nil {
			return nil, nil
		}
		if own.maxInstances > 0 {
			nodes = min(nodes, own.maxInstances)
		} else if p.budget.maxInstances > 0 {
			nodes = min(nodes, p.budget.maxInstances)
		}
	} else {
		if !getAttr(planned, "nodes").IsKnown() {
			return nil, nil
		}
		if nodes, err = intAttr(planned, "nodes", 1, 0, maxNodes); err != nil {
			return nil, nil
		}
	}
	var diags hcl.Diagnostics
	if !fact && own.maxInstances > 0 && nodes > own.maxInstances {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Too many instances",
			Detail: fmt.Sprintf("%s: nodes = %d is more than its max_instances = %d. Lower nodes, or raise max_instances.", req.Address, nodes, own.maxInstances),
			Extra:  providers.AttributeRef("nodes")})
	}
	pl, priced, err := p.prices(ctx)
	if err != nil {
		return nil, append(diags, providers.FromError(fmt.Errorf("%s: %w", req.Address, err))...)
	}
	if !priced {
		if own.maxHourlyCost > 0 {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "No prices",
				Detail: fmt.Sprintf("%s: the %s site has no prices, so its max_hourly_cost cannot be checked: only the aws provider's glideins have a cost. Remove max_hourly_cost.", req.Address, p.kind),
				Extra:  providers.AttributeRef("max_hourly_cost")})
		}
		return nil, diags
	}
	for _, x := range pl.prices {
		if x.Note != "" {
			diags = append(diags, providers.Warning(fmt.Sprintf("Price of %s for %s", x.Offer, req.Address), x.Note+"."))
		}
	}
	if len(pl.unknown) > 0 {
		var capped []string
		ref := providers.AttributeRef("")
		if own.maxHourlyCost > 0 {
			capped = append(capped, fmt.Sprintf("its max_hourly_cost (%s)", usd(own.maxHourlyCost)))
			ref = "max_hourly_cost"
		}
		if p.budget.maxHourlyCost > 0 {
			capped = append(capped, fmt.Sprintf("the %s provider's max_hourly_cost (%s)", p.kind, usd(p.budget.maxHourlyCost)))
		}
		if len(capped) > 0 {
			d := &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Instance type without a price",
				Detail: fmt.Sprintf("%s may launch %s, which has no price (pond's on-demand table does not list it for this region, and no spot price was found), so %s cannot be checked. Give its price in US dollars an hour in the %s provider's prices argument, or remove it from instance_types.",
					req.Address, strings.Join(pl.unknown, ", "), strings.Join(capped, " and "), p.kind)}
			if ref != "" {
				d.Extra = ref
			}
			diags = append(diags, d)
		}
	}
	n := 0
	if !fact {
		n = starts(req.Prior, planned, nodes)
	}
	c := &providers.CostEstimate{Currency: "USD", Instances: nodes, HourlyCost: float64(nodes) * pl.worst,
		Starts: n, StartHourlyCost: float64(n) * pl.worst, Complete: len(pl.unknown) == 0,
		MaxHourlyCost: own.maxHourlyCost, MaxInstances: own.maxInstances}
	if c.MaxHourlyCost == 0 {
		c.MaxHourlyCost = p.budget.maxHourlyCost
	}
	if c.MaxInstances == 0 {
		c.MaxInstances = p.budget.maxInstances
	}
	for _, x := range pl.prices {
		c.Offers = append(c.Offers, providers.OfferPrice{Name: x.Offer, HourlyCost: x.USDPerHour, Known: x.Known, Spot: x.Spot, Source: x.Source})
	}
	if fact {
		// The factory starts glideins only within the caps.
		if c.MaxHourlyCost > 0 {
			c.HourlyCost = min(c.HourlyCost, c.MaxHourlyCost)
		}
		return c, diags
	}
	if own.maxHourlyCost > 0 && c.HourlyCost > own.maxHourlyCost+costEpsilon {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Over the hourly budget",
			Detail: fmt.Sprintf("%s: %d instances at up to %s an hour each (%s) would cost up to %s an hour, more than its max_hourly_cost = %s. Lower nodes, drop the dearest instance types, or raise max_hourly_cost.",
				req.Address, nodes, usd(pl.worst), worstOffers(pl), usd(c.HourlyCost), usd(own.maxHourlyCost)),
			Extra: providers.AttributeRef("nodes")})
	}
	return c, diags
}

// worstOffers names the offers at the highest price.
func worstOffers(pl priceList) string {
	var out []string
	for _, x := range pl.prices {
		if x.Known && x.USDPerHour == pl.worst {
			out = append(out, x.Offer)
		}
	}
	return strings.Join(out, ", ")
}

// usd formats an amount of US dollars.
func usd(v float64) string {
	return "$" + strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.5f", v), "0"), ".")
}

// CheckPlan implements providers.PlanChecker: it refuses a plan after
// which the provider's glidein resources would keep more instances in all
// than its max_instances, or cost more than its max_hourly_cost (each
// instance at the highest price of the instance types it may launch as).
// It counts the glidein resources of the plan (those -target leaves out
// are not counted). The error is at the nodes argument of the resource
// that grows the most.
func (p *Provider) CheckPlan(ctx context.Context, req providers.CheckPlanRequest) providers.CheckPlanResponse {
	b := p.budget
	if b.maxHourlyCost == 0 && b.maxInstances == 0 || p.site == nil {
		return providers.CheckPlanResponse{}
	}
	var rs []providers.Growth
	var unknown []string
	total := 0
	for _, in := range req.Instances {
		if in.TypeName != ResourceType || in.Planned.IsNull() || isFactory(in.Planned) {
			// A factory's entry keeps the provider's budget itself
			// (entryOf), at each submission.
			continue
		}
		if !getAttr(in.Planned, "nodes").IsKnown() {
			unknown = append(unknown, in.Address)
			continue
		}
		n, err := intAttr(in.Planned, "nodes", 1, 0, maxNodes)
		if err != nil {
			continue
		}
		total += n
		rs = append(rs, providers.Growth{Address: in.Address, Count: n, Grows: starts(in.Prior, in.Planned, n)})
	}
	var diags hcl.Diagnostics
	if len(unknown) > 0 {
		diags = append(diags, providers.Warning("Budget not checked for "+strings.Join(unknown, ", "),
			fmt.Sprintf("The number of nodes of %s is not known until apply, so the %s provider's max_instances and max_hourly_cost cannot count them.", strings.Join(unknown, ", "), p.kind)))
	}
	if len(rs) == 0 {
		return providers.CheckPlanResponse{Diagnostics: diags}
	}
	worst, parts := providers.OverCap(rs)
	at := providers.InstanceAttributeRef{Address: worst, Name: "nodes"}
	if b.maxInstances > 0 && total > b.maxInstances {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Too many instances",
			Detail: fmt.Sprintf("The %s provider's glideins would keep %d instances in all (%s), more than its max_instances = %d. Lower nodes, or raise max_instances in the provider %q block.",
				p.kind, total, strings.Join(parts, ", "), b.maxInstances, p.kind),
			Extra: at})
	}
	if b.maxHourlyCost > 0 {
		pl, _, err := p.prices(ctx)
		if err != nil {
			return providers.CheckPlanResponse{Diagnostics: append(diags, providers.FromError(err)...)}
		}
		if cost := float64(total) * pl.worst; cost > b.maxHourlyCost+costEpsilon {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Over the hourly budget",
				Detail: fmt.Sprintf("The %s provider's glideins would keep %d instances (%s) at up to %s an hour each (%s): up to %s an hour, more than its max_hourly_cost = %s. Lower nodes, drop the dearest instance types, or raise max_hourly_cost in the provider %q block.",
					p.kind, total, strings.Join(parts, ", "), usd(pl.worst), worstOffers(pl), usd(cost), usd(b.maxHourlyCost), p.kind),
				Extra: at})
		}
	}
	return providers.CheckPlanResponse{Diagnostics: diags}
}

var _ providers.PlanChecker = (*Provider)(nil)

// configDiagnostics turns an error of Configure into diagnostics, at the
// provider block's argument when it is an attrError.
func configDiagnostics(err error) hcl.Diagnostics {
	var ae *attrError
	if err != nil && errors.As(err, &ae) {
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid provider argument",
			Detail: err.Error(), Extra: providers.AttributeRef(ae.attr)}}
	}
	// An argument the kind's site refuses.
	var se *site.SettingError
	if err != nil && errors.As(err, &se) {
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid provider argument",
			Detail: err.Error(), Extra: providers.AttributeRef(se.Setting)}}
	}
	return providers.FromError(err)
}
