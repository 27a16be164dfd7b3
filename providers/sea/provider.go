// Package sea is pond's builtin provider for what lives in the sea rather
// than on machines it launches: ponds (pools on demand formed from free
// nodes found by tree queries), flocks, and the sea_query data source.
package sea

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/providers"
)

// Provider is the sea provider.
type Provider struct {
	seaAddr string
	logger  *slog.Logger
	workDir string
	// tokenMu guards token, what the provider presents to agents
	// (auth.FindToken), found again after tokenRefresh: the working
	// directory's own token is short-lived, and its authority may be made
	// by another provider after this one is configured.
	tokenMu sync.Mutex
	token   string
	tokenAt time.Time
	// tls is the TLS agents are called with.
	tls providers.SeaTLS
}

// tokenRefresh is how long the provider keeps the token it found.
const tokenRefresh = 5 * time.Minute

// New returns an unconfigured sea provider.
func New() providers.Provider { return &Provider{logger: slog.New(slog.DiscardHandler)} }

// APIAttr is the machine-ad attribute in which every agent advertises its
// API address, requested by queries so that matches can be invited.
const APIAttr = "PondAPI"

var matchType = cty.Object(map[string]cty.Type{
	"name":       cty.String,
	"address":    cty.String,
	"rank":       cty.Number,
	"attributes": cty.Map(cty.String),
})

var memberType = cty.Object(map[string]cty.Type{
	"name": cty.String,
	"api":  cty.String,
	"rank": cty.Number,
})

var querySchema = &providers.Schema{
	Description: "Runs a PonD tree query over the sea at plan time.",
	Attributes: map[string]*providers.Attribute{
		"requirements": {Type: cty.String, Required: true, Description: "ClassAd Requirements the machine ads must satisfy (the query is the job, the machine is TARGET)."},
		"rank":         {Type: cty.String, Optional: true, Description: "ClassAd Rank; higher is better."},
		"k":            {Type: cty.Number, Optional: true, Description: "How many matches to return (default 10)."},
		"mode":         {Type: cty.String, Optional: true, Description: `"best-rank" (default) or "first-fit".`},
		"redundant":    {Type: cty.Bool, Optional: true, Description: "Run the clockwise and counter-clockwise trees at once."},
		"attrs":        {Type: cty.List(cty.String), Optional: true, Description: "Machine-ad attributes to report for each match."},
		"sea":          {Type: cty.String, Optional: true, Description: "API address of the agent that roots the query (default: the provider's sea)."},
		"timeout":      {Type: cty.String, Optional: true, Description: `Query deadline, as a Go duration (default "5s").`},
		"matches":      {Type: cty.List(matchType), Computed: true},
		"complete":     {Type: cty.Bool, Computed: true, Description: "Whether every member of the sea answered (a first-fit query that found its k matches does not ask the rest)."},
		"completeness": {Type: cty.Number, Computed: true},
		"visited":      {Type: cty.Number, Computed: true},
		"messages":     {Type: cty.Number, Computed: true},
		"depth":        {Type: cty.Number, Computed: true},
		"missing":      {Type: cty.List(cty.String), Computed: true, Description: "Members the query could not reach."},
	},
}

var pondSchema = &providers.Schema{
	Description: "A pool on demand: sea nodes matching Requirements, best by Rank, invited to report to a central manager.",
	Attributes: map[string]*providers.Attribute{
		"central_manager": {Type: cty.String, Required: true, ForceNew: true, Description: "API address of the pond's central manager."},
		"requirements":    {Type: cty.String, Required: true, Description: "ClassAd Requirements members must satisfy."},
		"rank":            {Type: cty.String, Optional: true, Description: "ClassAd Rank; the best candidates are invited first."},
		"size":            {Type: cty.Number, Optional: true, Description: "How many members to gather (default 1)."},
		"min_size":        {Type: cty.Number, Optional: true, Description: "Fewer members than this fails the apply (default: size)."},
		"mode":            {Type: cty.String, Optional: true, Description: `"best-rank" (default) or "first-fit".`},
		"redundant":       {Type: cty.Bool, Optional: true},
		"attributes":      {Type: cty.Map(cty.String), Optional: true, Description: "ClassAd attributes (expressions) stamped on members while they belong to the pond."},
		"job_ids":         {Type: cty.List(cty.String), Optional: true, Description: "The jobs the pond is for, as CLUSTER.PROC ids of the central manager's schedd (at most 1000): stamped on the members as PondJobIds, which their RANK ranks highest, so they run these jobs before any other (preempting another job for one). See docs/flocks.md, \"Pond affinity\"."},
		"lease":           {Type: cty.String, Optional: true, Description: "Members return to the sea after this long unless the pond is applied again (Go duration; default: no lease)."},
		"drain":           {Type: cty.String, Optional: true, Description: `How members empty themselves when released: "wait" (default) starts no new job and lets the running ones finish, "evict" stops them at once (their schedd runs them elsewhere).`},
		"drain_timeout":   {Type: cty.String, Optional: true, Description: `How long "wait" waits for running jobs before evicting them (Go duration; default 10m).`},
		"sea":             {Type: cty.String, Optional: true, Description: "API address of the agent that roots the queries (default: central_manager)."},
		"id":              {Type: cty.String, Computed: true},
		"condor_host":     {Type: cty.String, Computed: true, Description: "The address HTCondor's clients take as CONDOR_HOST: the central manager's agent, which serves CEDAR on its API port."},
		"candidates":      {Type: cty.List(memberType), Computed: true, Description: "What the last query found, best first."},
		"members":         {Type: cty.List(cty.String), Computed: true},
		"member_details":  {Type: cty.List(memberType), Computed: true},
	},
}

// Schema implements providers.Provider.
func (p *Provider) Schema() *providers.ProviderSchema {
	return &providers.ProviderSchema{
		Provider: &providers.Schema{Attributes: map[string]*providers.Attribute{
			"address": {Type: cty.String, Optional: true, Description: "API address of an agent in the sea (default: pond { sea { address } }, -sea or POND_SEA_ADDR)."},
		}},
		Resources:   map[string]*providers.Schema{"pond": pondSchema, "flock": flockSchema},
		DataSources: map[string]*providers.Schema{"sea_query": querySchema},
	}
}

// Configure implements providers.Provider.
func (p *Provider) Configure(ctx context.Context, req providers.ConfigureRequest) providers.ConfigureResponse {
	if req.Logger != nil {
		p.logger = req.Logger
	}
	p.seaAddr = req.SeaAddr
	p.workDir = req.WorkDir
	token, err := auth.FindToken(os.Getenv, req.WorkDir)
	if err != nil {
		return providers.ConfigureResponse{Diagnostics: providers.FromError(fmt.Errorf("the token to present to agents: %w", err))}
	}
	p.token, p.tokenAt = token, time.Now()
	if !req.Config.IsNull() {
		if a := req.Config.GetAttr("address"); !a.IsNull() && a.IsKnown() {
			if err := checkAddr(a.AsString()); err != nil {
				return providers.ConfigureResponse{Diagnostics: providers.FromError(fmt.Errorf("address: %w", err))}
			}
			p.seaAddr = a.AsString()
		}
	}
	return providers.ConfigureResponse{}
}

// client is a client of the agent at addr that presents the provider's
// token.
func (p *Provider) client(addr string) *api.Client {
	return api.NewClient(addr).WithTLS(p.seaTLS()).WithToken(p.currentToken())
}

// currentToken is the token to present now: the one found last, unless it
// is empty or older than tokenRefresh.
func (p *Provider) currentToken() string {
	p.tokenMu.Lock()
	defer p.tokenMu.Unlock()
	if p.token != "" && time.Since(p.tokenAt) < tokenRefresh {
		return p.token
	}
	tok, err := auth.FindToken(os.Getenv, p.workDir)
	if err != nil {
		p.logger.Warn("finding the token to present to agents", "err", err)
		return p.token
	}
	p.token, p.tokenAt = tok, time.Now()
	return tok
}

// grant is the token the provider invites nodes into a pond with: a pond
// grant bound to the invitation's pond and central manager (see
// auth.FindGrant).
func (p *Provider) grant(inv api.Invitation) (string, error) {
	g, err := auth.FindGrant(os.Getenv, p.workDir, inv.PondID, inv.CentralManager)
	if err != nil {
		return "", fmt.Errorf("the grant to invite nodes into %s with: %w", inv.Pond, err)
	}
	return g, nil
}

// seaTLS returns the sea's TLS (auth.FindClientTLS), found when first
// there is a CA; nil before. A CA that cannot be read gives a
// configuration that fails every handshake with the reason, before
// anything is sent.
func (p *Provider) seaTLS() *tls.Config { return p.tls.Config(p.workDir) }

// checkAddr checks an agent API address, as api.NewClient takes it:
// HOST:PORT, or an http:// URL of one.
func checkAddr(s string) error {
	hp := strings.TrimRight(strings.TrimPrefix(s, "http://"), "/")
	if host, port, err := net.SplitHostPort(hp); err != nil || host == "" || port == "" || strings.Contains(hp, "/") {
		return fmt.Errorf("%q is not an agent API address HOST:PORT", s)
	}
	return nil
}

// Close implements providers.Provider.
func (p *Provider) Close() error { return nil }

// attr returns v's attribute name, or null when v has no such attribute.
func attr(v cty.Value, name string) cty.Value {
	if v.IsNull() || !v.IsKnown() || !v.Type().IsObjectType() || !v.Type().HasAttribute(name) {
		return cty.NullVal(cty.DynamicPseudoType)
	}
	return v.GetAttr(name)
}

func str(v cty.Value, name, def string) string {
	a := attr(v, name)
	if a.IsNull() || !a.IsKnown() {
		return def
	}
	return a.AsString()
}

func num(v cty.Value, name string, def int) int {
	a := attr(v, name)
	if a.IsNull() || !a.IsKnown() {
		return def
	}
	i, _ := a.AsBigFloat().Int64()
	return int(i)
}

func boolean(v cty.Value, name string) bool {
	a := attr(v, name)
	return !a.IsNull() && a.IsKnown() && a.True()
}

// ValidateResourceConfig implements providers.Provider.
func (p *Provider) ValidateResourceConfig(ctx context.Context, req providers.ValidateRequest) providers.ValidateResponse {
	return providers.ValidateResponse{Diagnostics: validateDiags(req.TypeName, req.Config)}
}

// validateDiags returns what validate finds wrong as diagnostics, those
// about one argument marked as such for the planner to place them there.
func validateDiags(typeName string, cfg cty.Value) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, err := range validate(typeName, cfg) {
		var ae *attrError
		if errors.As(err, &ae) {
			diags = append(diags, providers.AttributeError(ae.name, err))
			continue
		}
		diags = append(diags, providers.FromError(err)...)
	}
	return diags
}

// validate returns what is wrong with a pond's or a sea_query's
// configuration, each error naming its attribute. Unknown values pass.
func validate(typeName string, cfg cty.Value) []error {
	if !cfg.IsKnown() || cfg.IsNull() {
		return nil
	}
	// known returns the attribute name, and whether it is set and known.
	known := func(name string) (cty.Value, bool) {
		a := cfg.GetAttr(name)
		return a, a.IsKnown() && !a.IsNull()
	}
	var errs []error
	switch typeName {
	case "flock":
		errs = append(errs, validateFlock(cfg, known)...)
	case "pond":
		if a, ok := known("central_manager"); ok {
			if err := checkAddr(a.AsString()); err != nil {
				errs = append(errs, &attrError{"central_manager", err})
			}
		}
		errs = append(errs, validateQuery(cfg, known)...)
		if _, ok := known("size"); ok && num(cfg, "size", 1) < 1 {
			errs = append(errs, &attrError{"size", errors.New("a pond needs at least one member")})
		}
		// min_size is checked against size only once size is known.
		if s := cfg.GetAttr("size"); s.IsKnown() {
			if _, ok := known("min_size"); ok {
				if ms, size := num(cfg, "min_size", 0), num(cfg, "size", 1); ms < 0 || ms > size {
					errs = append(errs, &attrError{"min_size", fmt.Errorf("must be between 0 and size (%d)", size)})
				}
			}
		}
		if ids, ok := known("job_ids"); ok {
			if _, err := jobIDsOf(ids); err != nil {
				errs = append(errs, &attrError{"job_ids", err})
			}
		}
		if l, ok := known("lease"); ok {
			if _, err := time.ParseDuration(l.AsString()); err != nil {
				errs = append(errs, &attrError{"lease", err})
			}
		}
		if d, ok := known("drain"); ok {
			if _, err := api.ParseDrainMode(d.AsString()); err != nil {
				errs = append(errs, &attrError{"drain", err})
			}
		}
		if d, ok := known("drain_timeout"); ok {
			if t, err := time.ParseDuration(d.AsString()); err != nil || t <= 0 {
				errs = append(errs, &attrError{"drain_timeout", fmt.Errorf("%q is not a positive duration such as \"90s\" or \"10m\"", d.AsString())})
			}
		}
	case "sea_query":
		errs = append(errs, validateQuery(cfg, known)...)
		if _, ok := known("k"); ok && num(cfg, "k", 0) < 0 {
			errs = append(errs, &attrError{"k", errors.New("must be 0 (every match) or more")})
		}
		if d, ok := known("timeout"); ok {
			if t, err := time.ParseDuration(d.AsString()); err != nil || t <= 0 {
				errs = append(errs, &attrError{"timeout", fmt.Errorf("%q is not a positive duration such as \"2s\"", d.AsString())})
			}
		}
	}
	return errs
}

// validateQuery checks what a pond and a sea_query share: the query's
// expressions and mode, and the sea that roots it.
func validateQuery(cfg cty.Value, known func(string) (cty.Value, bool)) []error {
	var errs []error
	// Each expression is checked on its own, for its error to be placed
	// at its argument.
	if r, ok := known("requirements"); ok {
		if err := api.ValidateQuery(&api.Query{Requirements: r.AsString()}); err != nil {
			errs = append(errs, &attrError{"requirements", errors.Unwrap(err)})
		} else if err := checkBoolean(r.AsString()); err != nil {
			errs = append(errs, &attrError{"requirements", err})
		}
	}
	if r, ok := known("rank"); ok {
		if err := api.ValidateQuery(&api.Query{Rank: r.AsString()}); err != nil {
			errs = append(errs, &attrError{"rank", errors.Unwrap(err)})
		}
	}
	if m, ok := known("mode"); ok {
		if _, err := api.ParseMode(m.AsString()); err != nil {
			errs = append(errs, &attrError{"mode", err})
		}
	}
	if s, ok := known("sea"); ok {
		if err := checkAddr(s.AsString()); err != nil {
			errs = append(errs, &attrError{"sea", err})
		}
	}
	return errs
}

// attrError is what is wrong with the argument name.
type attrError struct {
	name string
	err  error
}

func (e *attrError) Error() string { return e.name + ": " + e.err.Error() }
func (e *attrError) Unwrap() error { return e.err }

// checkBoolean refuses a requirements expression that refers to nothing and
// evaluates to something other than a boolean, such as 42 or "x": no
// machine would ever match it. An expression that refers to attributes is
// left to the match.
func checkBoolean(src string) error {
	if src == "" {
		return nil
	}
	e, err := classad.ParseExpr(src)
	if err != nil {
		return err
	}
	if names, opaque := classad.AttrNames(e); len(names) > 0 || opaque {
		return nil
	}
	v := classad.EvalWith(e, classad.NewAd(), classad.NewAd())
	if v.Kind() == classad.BoolKind {
		return nil
	}
	return fmt.Errorf("%s is a constant %s, not a boolean ClassAd expression, so no machine would ever match it; write a condition such as \"Cpus >= 4\", or \"true\" to accept every machine", src, kindName(v.Kind()))
}

// kindName names a ClassAd value kind with its article.
func kindName(k classad.Kind) string {
	switch k {
	case classad.IntKind, classad.RealKind:
		return "number"
	case classad.StringKind:
		return "string"
	case classad.UndefinedKind:
		return "undefined value"
	case classad.ErrorKind:
		return "error value"
	}
	return k.String()
}

// ImportResource implements providers.Provider.
func (p *Provider) ImportResource(ctx context.Context, req providers.ImportRequest) providers.ImportResponse {
	return providers.ImportResponse{Diagnostics: providers.FromError(fmt.Errorf("%s cannot be imported", req.TypeName))}
}
