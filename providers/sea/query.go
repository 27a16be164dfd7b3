package sea

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/providers"
)

// queryParams are what a query takes from a configuration.
type queryParams struct {
	root    string
	q       api.Query
	timeout time.Duration
}

func (p *Provider) queryParams(cfg cty.Value, defRoot string, k int, attrs []string) (queryParams, error) {
	qp := queryParams{root: str(cfg, "sea", defRoot), timeout: 5 * time.Second}
	if qp.root == "" {
		qp.root = p.seaAddr
	}
	if qp.root == "" {
		return qp, errors.New("no sea to query: set sea, or give the provider an address (pond { sea { address } }, -sea or POND_SEA_ADDR)")
	}
	mode, err := api.ParseMode(str(cfg, "mode", ""))
	if err != nil {
		return qp, err
	}
	if t := str(cfg, "timeout", ""); t != "" {
		if qp.timeout, err = time.ParseDuration(t); err != nil {
			return qp, fmt.Errorf("timeout: %w", err)
		}
	}
	qp.q = api.Query{
		Requirements: str(cfg, "requirements", "true"),
		Rank:         str(cfg, "rank", ""),
		K:            k,
		Mode:         mode,
		Redundant:    boolean(cfg, "redundant"),
		Attrs:        attrs,
	}
	return qp, nil
}

func (p *Provider) run(ctx context.Context, qp queryParams) (*api.Answer, error) {
	qp.q.Deadline = time.Now().Add(qp.timeout)
	ans, err := p.client(qp.root).Query(ctx, qp.q)
	if err != nil {
		return nil, err
	}
	return ans, nil
}

// ReadDataSource implements providers.Provider.
func (p *Provider) ReadDataSource(ctx context.Context, req providers.ReadDataRequest) providers.ReadDataResponse {
	if req.TypeName == "sea_query" {
		if diags := validateDiags(req.TypeName, req.Config); diags.HasErrors() {
			return providers.ReadDataResponse{Diagnostics: diags}
		}
	}
	v, whole, err := p.readQuery(ctx, req)
	if err != nil {
		return providers.ReadDataResponse{Diagnostics: providers.FromError(err)}
	}
	resp := providers.ReadDataResponse{Value: v}
	if !whole {
		resp.Diagnostics = hcl.Diagnostics{providers.Warning("Matches of "+req.Address+" may be missing",
			fmt.Sprintf("Part of the sea did not answer the query (completeness %s), so its matches come from the members that did: %s is false.", v.GetAttr("completeness").AsBigFloat().Text('g', 3), req.Address+".complete"))}
	}
	return resp
}

// readQuery runs a sea_query and returns its value, and whether the answer
// lacks no match (see whole).
func (p *Provider) readQuery(ctx context.Context, req providers.ReadDataRequest) (cty.Value, bool, error) {
	if req.TypeName != "sea_query" {
		return cty.NilVal, false, fmt.Errorf("unknown data source %q", req.TypeName)
	}
	cfg := req.Config
	// A bad query is refused before it travels.
	if err := errors.Join(validate(req.TypeName, cfg)...); err != nil {
		return cty.NilVal, false, err
	}
	var attrs []string
	if a := cfg.GetAttr("attrs"); !a.IsNull() {
		for _, v := range a.AsValueSlice() {
			attrs = append(attrs, v.AsString())
		}
	}
	qp, err := p.queryParams(cfg, "", num(cfg, "k", 10), append(attrs, APIAttr))
	if err != nil {
		return cty.NilVal, false, err
	}
	ans, err := p.run(ctx, qp)
	if err != nil {
		return cty.NilVal, false, err
	}
	out := cfg.AsValueMap()
	out["matches"] = matchesValue(ans.Matches, attrs)
	out["complete"] = cty.BoolVal(ans.Stats.Completeness >= 1)
	out["completeness"] = cty.NumberFloatVal(ans.Stats.Completeness)
	out["visited"] = cty.NumberIntVal(int64(ans.Stats.Visited))
	out["messages"] = cty.NumberIntVal(int64(ans.Stats.Messages))
	out["depth"] = cty.NumberIntVal(int64(ans.Stats.Depth))
	out["missing"] = stringList(ans.Stats.MissingMembers)
	return cty.ObjectVal(out), whole(qp.q, ans), nil
}

// whole reports whether an answer lacks no match of its query: every
// member of the sea answered, or a first-fit query found the k matches it
// asked for (it stops asking the rest of the sea once it has them, so its
// completeness is below 1 although nothing is missing).
func whole(q api.Query, ans *api.Answer) bool {
	return ans.Stats.Completeness >= 1 || q.Mode == api.FirstFit && q.K > 0 && len(ans.Matches) >= q.K
}

func stringList(ss []string) cty.Value {
	if len(ss) == 0 {
		return cty.ListValEmpty(cty.String)
	}
	vals := make([]cty.Value, len(ss))
	for i, s := range ss {
		vals[i] = cty.StringVal(s)
	}
	return cty.ListVal(vals)
}

func matchesValue(ms []api.Match, attrs []string) cty.Value {
	if len(ms) == 0 {
		return cty.ListValEmpty(matchType)
	}
	vals := make([]cty.Value, len(ms))
	for i, m := range ms {
		am := map[string]cty.Value{}
		keys := make([]string, 0, len(m.Attrs))
		for k := range m.Attrs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if k == APIAttr && !contains(attrs, APIAttr) {
				continue
			}
			am[k] = cty.StringVal(fmt.Sprint(m.Attrs[k]))
		}
		attrVal := cty.MapValEmpty(cty.String)
		if len(am) > 0 {
			attrVal = cty.MapVal(am)
		}
		vals[i] = cty.ObjectVal(map[string]cty.Value{
			"name":       cty.StringVal(m.Name),
			"address":    cty.StringVal(apiOf(m)),
			"rank":       cty.NumberFloatVal(m.Rank),
			"attributes": attrVal,
		})
	}
	return cty.ListVal(vals)
}

// apiOf is a match's agent API address.
func apiOf(m api.Match) string {
	if s, ok := m.Attrs[APIAttr].(string); ok && s != "" {
		return s
	}
	return m.Addr
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
