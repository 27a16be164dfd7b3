package glidein

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	site "github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/ec2"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/providers/providertest"
	"github.com/zclconf/go-cty/cty"
)

func TestBudgetOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		attrs map[string]cty.Value
		want  budget
		err   string
	}{
		{"none", nil, budget{}, ""},
		{"both", map[string]cty.Value{"max_hourly_cost": cty.NumberFloatVal(2.5), "max_instances": cty.NumberIntVal(10)}, budget{2.5, 10}, ""},
		{"negative cost", map[string]cty.Value{"max_hourly_cost": cty.NumberFloatVal(-1)}, budget{}, "max_hourly_cost: -1: want a positive amount"},
		{"zero cost", map[string]cty.Value{"max_hourly_cost": cty.NumberIntVal(0)}, budget{}, "max_hourly_cost: 0"},
		{"negative instances", map[string]cty.Value{"max_instances": cty.NumberIntVal(-3)}, budget{}, "max_instances: -3 is out of range"},
		{"fractional instances", map[string]cty.Value{"max_instances": cty.NumberFloatVal(1.5)}, budget{}, "max_instances: 1.5 is not a whole number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := providertest.Object(glideinSchema(), tc.attrs)
			if err != nil {
				t.Fatal(err)
			}
			got, err := budgetOf(v)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("budgetOf = %v, want an error with %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("budgetOf = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// ec2Provider is an aws glidein provider whose site is a real EC2 site
// that is never asked anything: without spot, its prices come from the
// on-demand table and prices.
func ec2Provider(t *testing.T, types []string, prices map[string]float64, b budget) *Provider {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	s, err := ec2.New(context.Background(), ec2.Config{Region: "us-east-1", Endpoint: "http://127.0.0.1:1",
		AMI: "ami-12345678", InstanceTypes: types, Prices: prices})
	if err != nil {
		t.Fatal(err)
	}
	return &Provider{kind: "aws", k: ec2.Kind(), site: s, budget: b}
}

// glideinVal is a glidein resource's value with attrs.
func glideinVal(t *testing.T, attrs map[string]cty.Value) cty.Value {
	t.Helper()
	base := map[string]cty.Value{"pool": cty.StringVal("127.0.0.1:9618"), "lifetime": cty.StringVal("4h0m0s")}
	for k, v := range attrs {
		base[k] = v
	}
	v, err := providertest.Object(glideinSchema(), base)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestPlanCost: the estimate of a glidein resource on EC2 counts each
// instance at the highest price of its instance types; it says how many
// instances the change starts; and the resource's caps, and the
// provider's when an instance type has no price, refuse the plan at the
// argument, naming the resource, the estimate and the cap.
func TestPlanCost(t *testing.T) {
	ids := func(n int) cty.Value {
		vs := []cty.Value{}
		for i := range n {
			vs = append(vs, cty.StringVal("pond-x-"+string(rune('a'+i))))
		}
		if n == 0 {
			return cty.ListValEmpty(cty.String)
		}
		return cty.ListVal(vs)
	}
	cheap := []string{"c7i.large", "c6i.large"} // 0.08925, 0.085
	for _, tc := range []struct {
		name           string
		types          []string
		prices         map[string]float64
		provider       budget
		prior, planned map[string]cty.Value // prior nil: a create
		hourly, start  float64
		instances      int
		starts         int
		complete       bool
		errs           []string // summaries of the errors, in order
		errAt          []string // their AttributeRef ("" for none)
		detail         []string // in the errors' details
	}{
		{name: "create", types: cheap, planned: map[string]cty.Value{"nodes": cty.NumberIntVal(4)},
			hourly: 0.357, start: 0.357, instances: 4, starts: 4, complete: true},
		{name: "grow", types: cheap,
			prior:   map[string]cty.Value{"nodes": cty.NumberIntVal(2), "ids": ids(2)},
			planned: map[string]cty.Value{"nodes": cty.NumberIntVal(5), "ids": ids(2)},
			hourly:  5 * 0.08925, start: 3 * 0.08925, instances: 5, starts: 3, complete: true},
		{name: "no change", types: cheap,
			prior:   map[string]cty.Value{"nodes": cty.NumberIntVal(2), "ids": ids(2)},
			planned: map[string]cty.Value{"nodes": cty.NumberIntVal(2), "ids": ids(2)},
			hourly:  2 * 0.08925, start: 0, instances: 2, starts: 0, complete: true},
		{name: "replaced", types: cheap,
			prior:   map[string]cty.Value{"nodes": cty.NumberIntVal(2), "ids": ids(2)},
			planned: map[string]cty.Value{"nodes": cty.NumberIntVal(2), "ids": ids(2), "lifetime": cty.StringVal("8h0m0s")},
			hourly:  2 * 0.08925, start: 2 * 0.08925, instances: 2, starts: 2, complete: true},
		{name: "gpu fallback is the worst", types: []string{"g4dn.xlarge", "p3.2xlarge"}, planned: map[string]cty.Value{"nodes": cty.NumberIntVal(2)},
			hourly: 6.12, start: 6.12, instances: 2, starts: 2, complete: true},
		{name: "under the cap", types: cheap, planned: map[string]cty.Value{"nodes": cty.NumberIntVal(4), "max_hourly_cost": cty.NumberFloatVal(0.357)},
			hourly: 0.357, start: 0.357, instances: 4, starts: 4, complete: true},
		{name: "over the cap", types: cheap, planned: map[string]cty.Value{"nodes": cty.NumberIntVal(4), "max_hourly_cost": cty.NumberFloatVal(0.3)},
			hourly: 0.357, start: 0.357, instances: 4, starts: 4, complete: true,
			errs: []string{"Over the hourly budget"}, errAt: []string{"nodes"},
			detail: []string{"glidein.burst: 4 instances at up to $0.08925 an hour each (c7i.large) would cost up to $0.357 an hour, more than its max_hourly_cost = $0.3"}},
		{name: "too many instances", types: cheap, planned: map[string]cty.Value{"nodes": cty.NumberIntVal(4), "max_instances": cty.NumberIntVal(3)},
			hourly: 0.357, start: 0.357, instances: 4, starts: 4, complete: true,
			errs: []string{"Too many instances"}, errAt: []string{"nodes"}, detail: []string{"nodes = 4 is more than its max_instances = 3"}},
		{name: "no price, no cap", types: []string{"c7i.large", "hpc7a.12xlarge"}, planned: map[string]cty.Value{"nodes": cty.NumberIntVal(2)},
			hourly: 0.1785, start: 0.1785, instances: 2, starts: 2, complete: false},
		{name: "no price, own cap", types: []string{"c7i.large", "hpc7a.12xlarge"}, planned: map[string]cty.Value{"nodes": cty.NumberIntVal(2), "max_hourly_cost": cty.NumberIntVal(10)},
			hourly: 0.1785, start: 0.1785, instances: 2, starts: 2, complete: false,
			errs: []string{"Instance type without a price"}, errAt: []string{"max_hourly_cost"},
			detail: []string{"glidein.burst may launch hpc7a.12xlarge, which has no price", "its max_hourly_cost ($10) cannot be checked", "prices argument"}},
		{name: "no price, provider cap", types: []string{"hpc7a.12xlarge"}, provider: budget{maxHourlyCost: 10}, planned: map[string]cty.Value{"nodes": cty.NumberIntVal(1)},
			instances: 1, starts: 1, complete: false,
			errs: []string{"Instance type without a price"}, errAt: []string{""},
			detail: []string{"the aws provider's max_hourly_cost ($10) cannot be checked"}},
		{name: "priced by the prices argument", types: []string{"hpc7a.12xlarge"}, prices: map[string]float64{"hpc7a.12xlarge": 1.44},
			provider: budget{maxHourlyCost: 10}, planned: map[string]cty.Value{"nodes": cty.NumberIntVal(2)},
			hourly: 2.88, start: 2.88, instances: 2, starts: 2, complete: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ec2Provider(t, tc.types, tc.prices, tc.provider)
			prior := cty.NullVal(glideinSchema().ImpliedType())
			if tc.prior != nil {
				prior = glideinVal(t, tc.prior)
			}
			c, diags := p.planCost(context.Background(), providers.PlanRequest{TypeName: ResourceType, Address: "glidein.burst", Prior: prior}, glideinVal(t, tc.planned))
			var errs []*hcl.Diagnostic
			for _, d := range diags {
				if d.Severity == hcl.DiagError {
					errs = append(errs, d)
				}
			}
			if len(errs) != len(tc.errs) {
				t.Fatalf("errors %v, want %v", diags, tc.errs)
			}
			for i, d := range errs {
				ref, _ := d.Extra.(providers.AttributeRef)
				if d.Summary != tc.errs[i] || string(ref) != tc.errAt[i] {
					t.Errorf("error %d: %q at %q, want %q at %q", i, d.Summary, ref, tc.errs[i], tc.errAt[i])
				}
			}
			for _, want := range tc.detail {
				found := false
				for _, d := range errs {
					found = found || strings.Contains(d.Detail, want)
				}
				if !found {
					t.Errorf("no error says %q: %v", want, diags)
				}
			}
			if c == nil {
				t.Fatal("no estimate")
			}
			if math.Abs(c.HourlyCost-tc.hourly) > 1e-9 || math.Abs(c.StartHourlyCost-tc.start) > 1e-9 ||
				c.Instances != tc.instances || c.Starts != tc.starts || c.Complete != tc.complete || c.Currency != "USD" {
				t.Errorf("estimate %+v; want hourly %v, start %v, instances %d, starts %d, complete %t", c, tc.hourly, tc.start, tc.instances, tc.starts, tc.complete)
			}
			if len(c.Offers) != len(tc.types) {
				t.Errorf("offers %+v, want %v", c.Offers, tc.types)
			}
			for i, o := range c.Offers {
				if o.Name != tc.types[i] {
					t.Errorf("offer %d is %s, want %s", i, o.Name, tc.types[i])
				}
			}
		})
	}
}

// TestCheckPlanBudget: the provider's caps count every glidein resource
// of the plan together; the error is at the nodes of the one that grows
// the most, and names each resource, the estimate and the cap.
func TestCheckPlanBudget(t *testing.T) {
	plan := func(t *testing.T, nodes ...int) []providers.PlannedInstance {
		var out []providers.PlannedInstance
		for i, n := range nodes {
			out = append(out, providers.PlannedInstance{TypeName: ResourceType, Address: "glidein.g" + string(rune('a'+i)),
				Prior: cty.NullVal(glideinSchema().ImpliedType()), Planned: glideinVal(t, map[string]cty.Value{"nodes": cty.NumberIntVal(int64(n))})})
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		b      budget
		nodes  []int
		errs   []string
		detail string
	}{
		{"no caps", budget{}, []int{100, 100}, nil, ""},
		{"under", budget{maxHourlyCost: 1, maxInstances: 11}, []int{5, 6}, nil, ""},
		{"too many", budget{maxInstances: 10}, []int{5, 6}, []string{"Too many instances"},
			"would keep 11 instances in all (glidein.ga 5, glidein.gb 6), more than its max_instances = 10"},
		{"too dear", budget{maxHourlyCost: 0.5}, []int{3, 3}, []string{"Over the hourly budget"},
			"would keep 6 instances (glidein.ga 3, glidein.gb 3) at up to $0.08925 an hour each (c7i.large): up to $0.5355 an hour, more than its max_hourly_cost = $0.5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ec2Provider(t, []string{"c7i.large", "c6i.large"}, nil, tc.b)
			resp := p.CheckPlan(context.Background(), providers.CheckPlanRequest{Instances: plan(t, tc.nodes...)})
			if len(resp.Diagnostics) != len(tc.errs) {
				t.Fatalf("diagnostics %v, want %v", resp.Diagnostics, tc.errs)
			}
			for i, d := range resp.Diagnostics {
				if d.Severity != hcl.DiagError || d.Summary != tc.errs[i] || !strings.Contains(d.Detail, tc.detail) {
					t.Errorf("diagnostic %q: %s; want %q: %s", d.Summary, d.Detail, tc.errs[i], tc.detail)
				}
				want := providers.InstanceAttributeRef{Address: "glidein.gb", Name: "nodes"}
				if tc.nodes[0] == tc.nodes[1] {
					want.Address = "glidein.ga"
				}
				if d.Extra != want {
					t.Errorf("diagnostic at %v, want %v", d.Extra, want)
				}
			}
		})
	}
}

func TestLaunchSettings(t *testing.T) {
	for _, tc := range []struct {
		name  string
		attrs map[string]cty.Value
		check func(ec2.Config) bool
		err   string
	}{
		{"template and devices", map[string]cty.Value{
			"launch_template": cty.ObjectVal(map[string]cty.Value{"id": cty.NullVal(cty.String), "name": cty.StringVal("burst"), "version": cty.StringVal("3")}),
			"block_device": cty.ListVal([]cty.Value{
				cty.ObjectVal(map[string]cty.Value{"device_name": cty.StringVal("/dev/xvda"), "volume_size": cty.NumberIntVal(50),
					"volume_type": cty.StringVal("gp3"), "delete_on_termination": cty.NullVal(cty.Bool), "encrypted": cty.True}),
				cty.ObjectVal(map[string]cty.Value{"device_name": cty.StringVal("/dev/sdf"), "volume_size": cty.NullVal(cty.Number),
					"volume_type": cty.NullVal(cty.String), "delete_on_termination": cty.False, "encrypted": cty.NullVal(cty.Bool)}),
			}),
			"prices": cty.MapVal(map[string]cty.Value{"x9.large": cty.NumberFloatVal(0.5)}),
		}, func(s ec2.Config) bool {
			return *s.LaunchTemplate == ec2.LaunchTemplate{Name: "burst", Version: "3"} && len(s.BlockDevices) == 2 &&
				s.BlockDevices[0] == ec2.BlockDevice{DeviceName: "/dev/xvda", VolumeSize: 50, VolumeType: "gp3", DeleteOnTermination: true, Encrypted: true} &&
				s.BlockDevices[1] == ec2.BlockDevice{DeviceName: "/dev/sdf"} && s.Prices["x9.large"] == 0.5
		}, ""},
		{"template without id or name", map[string]cty.Value{
			"launch_template": cty.ObjectVal(map[string]cty.Value{"id": cty.NullVal(cty.String), "name": cty.NullVal(cty.String), "version": cty.NullVal(cty.String)}),
		}, nil, "launch_template: want id or name"},
		{"negative volume", map[string]cty.Value{
			"block_device": cty.ListVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{"device_name": cty.StringVal("/dev/xvda"), "volume_size": cty.NumberIntVal(-5),
				"volume_type": cty.NullVal(cty.String), "delete_on_termination": cty.NullVal(cty.Bool), "encrypted": cty.NullVal(cty.Bool)})}),
		}, nil, "block_device[0].volume_size: -5: want 1 to 65536 GiB"},
		{"negative price", map[string]cty.Value{"prices": cty.MapVal(map[string]cty.Value{"c7i.large": cty.NumberIntVal(-1)})}, nil, "prices: c7i.large: -1 is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AWS_ACCESS_KEY_ID", "test")
			t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
			attrs := map[string]cty.Value{"ami": cty.StringVal("ami-12345678"), "instance_types": cty.ListVal([]cty.Value{cty.StringVal("t3.micro")}),
				"region": cty.StringVal("us-east-1"), "endpoint": cty.StringVal("http://127.0.0.1:1")}
			for k, v := range tc.attrs {
				attrs[k] = v
			}
			c, err := providertest.Object(providerBlockSchema(ec2.Kind()), attrs)
			if err != nil {
				t.Fatal(err)
			}
			s, err := awsSite(t, c)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("the site of the block: %v, want an error with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var cfg ec2.Config
			if data, err := s.(site.Describer).Describe(); err != nil || json.Unmarshal(data, &cfg) != nil || !tc.check(cfg) {
				t.Fatalf("the site of the block: %s, %v", data, err)
			}
		})
	}
}
