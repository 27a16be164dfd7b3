package sea

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/providers/providertest"
)

func TestSchema(t *testing.T) {
	if err := providertest.CheckSchema(New().Schema()); err != nil {
		t.Fatal(err)
	}
}

// TestConfigure checks where the provider's sea comes from: the provider
// block's address, else the address given to pondctl; and the addresses
// it refuses.
func TestConfigure(t *testing.T) {
	schema := New().Schema().Provider
	for _, tc := range []struct {
		name    string
		config  cty.Value // the provider block; nil: none
		seaAddr string
		want    string
		err     string
	}{
		{name: "no block, no address", want: ""},
		{name: "address given to pondctl", seaAddr: "127.0.0.1:7947", want: "127.0.0.1:7947"},
		{name: "the block's address wins", config: cty.StringVal("10.0.0.1:7947"), seaAddr: "127.0.0.1:7947", want: "10.0.0.1:7947"},
		{name: "an http URL", config: cty.StringVal("http://sea.example:7947/"), want: "http://sea.example:7947/"},
		{name: "a null address", config: cty.NullVal(cty.String), seaAddr: "127.0.0.1:7947", want: "127.0.0.1:7947"},
		{name: "an unknown address", config: cty.UnknownVal(cty.String), seaAddr: "127.0.0.1:7947", want: "127.0.0.1:7947"},
		{name: "no port", config: cty.StringVal("10.0.0.1"), err: `address: "10.0.0.1" is not an agent API address`},
		{name: "empty", config: cty.StringVal(""), seaAddr: "127.0.0.1:7947", err: `address: "" is not an agent API address`},
		{name: "another scheme", config: cty.StringVal("https://sea.example:7947"), err: `address: "https://sea.example:7947" is not an agent API address`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attrs := map[string]cty.Value{}
			if tc.config != cty.NilVal {
				attrs["address"] = tc.config
			}
			p := New().(*Provider)
			resp := p.Configure(context.Background(), providers.ConfigureRequest{Config: object(t, schema, attrs), WorkDir: t.TempDir(), SeaAddr: tc.seaAddr})
			err := providers.Err(resp.Diagnostics)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Configure = %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.seaAddr != tc.want {
				t.Fatalf("sea address = %q, want %q", p.seaAddr, tc.want)
			}
		})
	}
	// A null provider block: pondctl's own address.
	p := New().(*Provider)
	if err := providers.Err(p.Configure(context.Background(), providers.ConfigureRequest{Config: cty.NullVal(schema.ImpliedType()), SeaAddr: "127.0.0.1:1"}).Diagnostics); err != nil || p.seaAddr != "127.0.0.1:1" {
		t.Fatalf("null block: sea %q, %v", p.seaAddr, err)
	}
}

// TestValidate checks ValidateResourceConfig: what it refuses in a pond
// and a sea_query, naming the attribute, what it accepts, unknown values
// included, and flocks, which it refuses outright.
func TestValidate(t *testing.T) {
	pond := map[string]cty.Value{
		"central_manager": cty.StringVal("127.0.0.1:9618"),
		"requirements":    cty.StringVal(`Score > 2`),
	}
	query := map[string]cty.Value{"requirements": cty.StringVal(`Score > 2`)}
	unknown := cty.UnknownVal(cty.String)
	for _, tc := range []struct {
		name     string
		typeName string
		attrs    map[string]cty.Value
		err      string
	}{
		{name: "minimal pond", typeName: "pond"},
		{name: "every pond argument", typeName: "pond", attrs: map[string]cty.Value{
			"rank": cty.StringVal("Score"), "size": cty.NumberIntVal(3), "min_size": cty.NumberIntVal(2), "mode": cty.StringVal("first-fit"),
			"redundant": cty.True, "attributes": cty.MapVal(map[string]cty.Value{"Project": cty.StringVal(`"burst"`)}),
			"lease": cty.StringVal("1h"), "drain": cty.StringVal("evict"), "drain_timeout": cty.StringVal("90s"), "sea": cty.StringVal("127.0.0.1:7947")}},
		{name: "empty requirements", typeName: "pond", attrs: map[string]cty.Value{"requirements": cty.StringVal("")}},
		{name: "unknown values", typeName: "pond", attrs: map[string]cty.Value{
			"central_manager": unknown, "requirements": unknown, "rank": unknown, "mode": unknown, "lease": unknown,
			"drain": unknown, "drain_timeout": unknown, "sea": unknown}},
		{name: "min_size of an unknown size", typeName: "pond", attrs: map[string]cty.Value{"size": cty.UnknownVal(cty.Number), "min_size": cty.NumberIntVal(2)}},
		{name: "unknown min_size", typeName: "pond", attrs: map[string]cty.Value{"size": cty.NumberIntVal(2), "min_size": cty.UnknownVal(cty.Number)}},
		{name: "bad requirements", typeName: "pond", attrs: map[string]cty.Value{"requirements": cty.StringVal("Score >")}, err: "requirements: "},
		{name: "number requirements", typeName: "pond", attrs: map[string]cty.Value{"requirements": cty.StringVal("42")}, err: "requirements: 42 is a constant number, not a boolean ClassAd expression"},
		{name: "string requirements", typeName: "pond", attrs: map[string]cty.Value{"requirements": cty.StringVal(`"Cpus > 2"`)}, err: `requirements: "Cpus > 2" is a constant string`},
		{name: "undefined requirements", typeName: "pond", attrs: map[string]cty.Value{"requirements": cty.StringVal("undefined")}, err: "is a constant undefined value"},
		{name: "constant arithmetic requirements", typeName: "pond", attrs: map[string]cty.Value{"requirements": cty.StringVal("1 + 2")}, err: "is a constant number"},
		{name: "constant boolean requirements", typeName: "pond", attrs: map[string]cty.Value{"requirements": cty.StringVal("true")}},
		{name: "constant comparison requirements", typeName: "pond", attrs: map[string]cty.Value{"requirements": cty.StringVal("1 < 2")}},
		{name: "requirements reading an attribute", typeName: "pond", attrs: map[string]cty.Value{"requirements": cty.StringVal("Memory")}},
		{name: "number query requirements", typeName: "sea_query", attrs: map[string]cty.Value{"requirements": cty.StringVal("42")}, err: "requirements: 42 is a constant number"},
		{name: "bad rank", typeName: "pond", attrs: map[string]cty.Value{"rank": cty.StringVal("Score +* 2")}, err: "rank: "},
		{name: "bad mode", typeName: "pond", attrs: map[string]cty.Value{"mode": cty.StringVal("best")}, err: `mode: query mode "best": want best-rank or first-fit`},
		{name: "size zero", typeName: "pond", attrs: map[string]cty.Value{"size": cty.NumberIntVal(0)}, err: "size: a pond needs at least one member"},
		{name: "min_size above size", typeName: "pond", attrs: map[string]cty.Value{"size": cty.NumberIntVal(2), "min_size": cty.NumberIntVal(3)}, err: "min_size: must be between 0 and size (2)"},
		{name: "min_size above the default size", typeName: "pond", attrs: map[string]cty.Value{"min_size": cty.NumberIntVal(2)}, err: "min_size: must be between 0 and size (1)"},
		{name: "negative min_size", typeName: "pond", attrs: map[string]cty.Value{"min_size": cty.NumberIntVal(-1)}, err: "min_size: must be between 0 and size"},
		{name: "bad lease", typeName: "pond", attrs: map[string]cty.Value{"lease": cty.StringVal("a while")}, err: `lease: `},
		{name: "bad drain mode", typeName: "pond", attrs: map[string]cty.Value{"drain": cty.StringVal("graceful")}, err: `drain: drain mode "graceful": want "wait" or "evict"`},
		{name: "bad drain timeout", typeName: "pond", attrs: map[string]cty.Value{"drain_timeout": cty.StringVal("-5m")}, err: `drain_timeout: "-5m" is not a positive duration`},
		{name: "bad central manager", typeName: "pond", attrs: map[string]cty.Value{"central_manager": cty.StringVal("manager")}, err: `central_manager: "manager" is not an agent API address`},
		{name: "bad sea", typeName: "pond", attrs: map[string]cty.Value{"sea": cty.StringVal("sea:")}, err: `sea: "sea:" is not an agent API address`},

		{name: "minimal query", typeName: "sea_query"},
		{name: "every query argument", typeName: "sea_query", attrs: map[string]cty.Value{
			"rank": cty.StringVal("Score"), "k": cty.NumberIntVal(0), "mode": cty.StringVal("first-fit"), "redundant": cty.True,
			"attrs": cty.ListVal([]cty.Value{cty.StringVal("Score")}), "sea": cty.StringVal("127.0.0.1:7947"), "timeout": cty.StringVal("2s")}},
		{name: "unknown query values", typeName: "sea_query", attrs: map[string]cty.Value{
			"requirements": unknown, "rank": unknown, "k": cty.UnknownVal(cty.Number), "mode": unknown, "sea": unknown, "timeout": unknown}},
		{name: "bad query requirements", typeName: "sea_query", attrs: map[string]cty.Value{"requirements": cty.StringVal(`Score == "`)}, err: "requirements: "},
		{name: "bad query rank", typeName: "sea_query", attrs: map[string]cty.Value{"rank": cty.StringVal("(Score")}, err: "rank: "},
		{name: "bad query mode", typeName: "sea_query", attrs: map[string]cty.Value{"mode": cty.StringVal("worst-rank")}, err: `mode: query mode "worst-rank"`},
		{name: "negative k", typeName: "sea_query", attrs: map[string]cty.Value{"k": cty.NumberIntVal(-1)}, err: "k: "},
		{name: "bad query timeout", typeName: "sea_query", attrs: map[string]cty.Value{"timeout": cty.StringVal("5")}, err: `timeout: "5" is not a positive duration`},
		{name: "bad query sea", typeName: "sea_query", attrs: map[string]cty.Value{"sea": cty.StringVal("sea")}, err: `sea: "sea" is not an agent API address`},

		{name: "flock", typeName: "flock"},
		{name: "every flock argument", typeName: "flock", attrs: map[string]cty.Value{"to": cty.ListVal([]cty.Value{cty.StringVal("127.0.0.1:2")}),
			"allow": cty.StringVal("IdleSlots > 0"), "deny": cty.StringVal(`PoolName == "x"`), "job_requirements": cty.StringVal("WantFlocking =?= true"), "max_jobs": cty.NumberIntVal(3)}},
		{name: "unknown flock values", typeName: "flock", attrs: map[string]cty.Value{"from": cty.UnknownVal(cty.List(cty.String)), "allow": unknown}},
		{name: "flock from nobody", typeName: "flock", attrs: map[string]cty.Value{"from": cty.ListValEmpty(cty.String)}, err: "at least one pool"},
		{name: "flock from a bad address", typeName: "flock", attrs: map[string]cty.Value{"from": cty.ListVal([]cty.Value{cty.StringVal("busy")})}, err: `element 0: "busy" is not an agent API address`},
		{name: "flock to a bad address", typeName: "flock", attrs: map[string]cty.Value{"to": cty.ListVal([]cty.Value{cty.StringVal("127.0.0.1:")})}, err: "element 0"},
		{name: "bad flock allow", typeName: "flock", attrs: map[string]cty.Value{"allow": cty.StringVal("Cpus >")}, err: "not a ClassAd expression"},
		{name: "bad flock deny", typeName: "flock", attrs: map[string]cty.Value{"deny": cty.StringVal("((")}, err: "not a ClassAd expression"},
		{name: "bad job requirements", typeName: "flock", attrs: map[string]cty.Value{"job_requirements": cty.StringVal("a =")}, err: "not a ClassAd expression"},
		{name: "negative max_jobs", typeName: "flock", attrs: map[string]cty.Value{"max_jobs": cty.NumberIntVal(-1)}, err: "must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sc *providers.Schema
			attrs := map[string]cty.Value{}
			switch tc.typeName {
			case "pond":
				sc = pondSchema
				for k, v := range pond {
					attrs[k] = v
				}
			case "sea_query":
				sc = querySchema
				for k, v := range query {
					attrs[k] = v
				}
			default:
				sc = flockSchema
				attrs["from"] = cty.ListVal([]cty.Value{cty.StringVal("127.0.0.1:1")})
			}
			for k, v := range tc.attrs {
				attrs[k] = v
			}
			resp := New().ValidateResourceConfig(context.Background(), providers.ValidateRequest{TypeName: tc.typeName, Config: object(t, sc, attrs)})
			err := providers.Err(resp.Diagnostics)
			if tc.err == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error = %v, want one containing %q", err, tc.err)
			}
			if strings.Contains(tc.err, "is a constant") && (len(resp.Diagnostics) != 1 || resp.Diagnostics[0].Extra != providers.AttributeRef("requirements")) {
				t.Fatalf("diagnostics %#v, want one about the argument requirements", resp.Diagnostics)
			}
		})
	}
	// A configuration not known at all yet is accepted.
	for _, typ := range []string{"pond", "sea_query"} {
		if err := providers.Err(New().ValidateResourceConfig(context.Background(), providers.ValidateRequest{TypeName: typ, Config: cty.DynamicVal}).Diagnostics); err != nil {
			t.Errorf("%s: an unknown configuration is refused: %v", typ, err)
		}
	}
}

// TestFlockUnreachable applies a flock whose source pool's central manager
// does not answer: the apply fails at the argument, naming the address,
// and keeps no state.
func TestFlockUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nobody listens there now
	cfg := object(t, flockSchema, map[string]cty.Value{"from": cty.ListVal([]cty.Value{cty.StringVal(addr)})})
	resp := New().ApplyResourceChange(context.Background(), providers.ApplyRequest{TypeName: "flock", Address: "flock.f",
		Prior: cty.NullVal(cfg.Type()), Planned: cfg, Config: cfg})
	err = providers.Err(resp.Diagnostics)
	if err == nil || !strings.Contains(err.Error(), addr+": not a reachable pool's central manager") ||
		len(resp.Diagnostics) != 1 || resp.Diagnostics[0].Extra != providers.AttributeRef("from") {
		t.Fatalf("apply of a flock from nowhere: %v %#v", err, resp.Diagnostics)
	}
	if !resp.New.IsNull() {
		t.Fatalf("state after a failed create: %#v", resp.New)
	}
}

func TestImportUnsupported(t *testing.T) {
	resp := New().ImportResource(context.Background(), providers.ImportRequest{TypeName: "pond", ID: "1b0c7f6e"})
	if len(resp.Diagnostics) != 1 || resp.Diagnostics[0].Severity != hcl.DiagError || !strings.Contains(resp.Diagnostics[0].Detail, "pond cannot be imported") {
		t.Fatalf("import: %#v", resp.Diagnostics)
	}
	if resp.Imported != cty.NilVal && !resp.Imported.IsNull() {
		t.Fatalf("import returned %#v", resp.Imported)
	}
}

// TestTokenFoundLater checks that a provider configured before its working
// directory has an authority (the local provider makes it when it starts
// the first node) presents the authority's token once there is one.
func TestTokenFoundLater(t *testing.T) {
	t.Setenv("POND_TOKEN", "")
	t.Setenv("POND_TOKEN_FILE", "")
	wd := t.TempDir()
	p := New().(*Provider)
	schema := p.Schema().Provider
	if err := providers.Err(p.Configure(context.Background(), providers.ConfigureRequest{Config: cty.NullVal(schema.ImpliedType()), WorkDir: wd}).Diagnostics); err != nil {
		t.Fatal(err)
	}
	if tok := p.currentToken(); tok != "" {
		t.Fatalf("a token %q without an authority", tok)
	}
	a, err := auth.OpenAuthority(filepath.Join(wd, ".pond", "auth"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := a.Verifier().Verify(p.currentToken())
	if err != nil || !c.Allows(auth.SeaAdmin) {
		t.Fatalf("token once the authority exists: %+v, %v", c, err)
	}
}
