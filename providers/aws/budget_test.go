package aws

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/hashicorp/hcl/v2"
	"github.com/pond-htc/pond/overlay/glidein"
	ec2site "github.com/pond-htc/pond/overlay/glidein/ec2"
	"github.com/pond-htc/pond/overlay/glidein/ec2/ec2test"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/providers/providertest"
	"github.com/zclconf/go-cty/cty"
)

// motoImage returns the ID of an image moto knows.
func motoImage(t *testing.T, endpoint string) string {
	t.Helper()
	ac, err := ec2site.LoadAWS(context.Background(), ec2test.Region, "", endpoint)
	if err != nil {
		t.Fatal(err)
	}
	im, err := ec2.NewFromConfig(ac).DescribeImages(context.Background(), &ec2.DescribeImagesInput{})
	if err != nil || len(im.Images) == 0 {
		t.Fatalf("moto's images: %v", err)
	}
	return aws.ToString(im.Images[0].ImageId)
}

// configured returns a provider "aws" on moto's endpoint configured with
// attrs.
func configured(t *testing.T, endpoint string, attrs map[string]cty.Value) providers.Provider {
	t.Helper()
	p := New()
	all := map[string]cty.Value{"endpoint": cty.StringVal(endpoint), "region": cty.StringVal(ec2test.Region),
		"ami": cty.StringVal(motoImage(t, endpoint)), "bind_address": cty.StringVal("127.0.0.1")}
	for k, v := range attrs {
		all[k] = v
	}
	cfg, err := providertest.Object(p.Schema().Provider, all)
	if err != nil {
		t.Fatal(err)
	}
	if err := providers.Err(p.Configure(context.Background(), providers.ConfigureRequest{Config: cfg, WorkDir: t.TempDir()}).Diagnostics); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func plan(t *testing.T, p providers.Provider, address string, attrs map[string]cty.Value) providers.PlanResponse {
	t.Helper()
	sc := p.Schema().Resources["glidein"]
	all := map[string]cty.Value{"pool": cty.StringVal("127.0.0.1:9618")}
	for k, v := range attrs {
		all[k] = v
	}
	cfg, err := providertest.Object(sc, all)
	if err != nil {
		t.Fatal(err)
	}
	prior := cty.NullVal(sc.ImpliedType())
	return p.PlanResourceChange(context.Background(), providers.PlanRequest{TypeName: "glidein", Address: address,
		Prior: prior, Config: cfg, ProposedNew: providertest.ProposedNew(sc, prior, cfg)})
}

func types(ts ...string) cty.Value {
	var vs []cty.Value
	for _, t := range ts {
		vs = append(vs, cty.StringVal(t))
	}
	return cty.ListVal(vs)
}

// TestSpotPricesAndCap: the provider "aws" on moto estimates a glidein
// resource's cost from the spot price history (moto's 0.00001 for
// t3.micro) and, for a type moto sells no spot of, its on-demand price
// with a warning; it refuses a resource over its own max_hourly_cost, and
// the glidein resources together over the provider's max_hourly_cost and
// max_instances.
func TestSpotPricesAndCap(t *testing.T) {
	endpoint := ec2test.StartMoto(t)
	p := configured(t, endpoint, map[string]cty.Value{
		"instance_types":  types("t3.micro", "hpc7a.12xlarge"),
		"prices":          cty.MapVal(map[string]cty.Value{"hpc7a.12xlarge": cty.NumberFloatVal(1.44)}),
		"spot":            cty.True,
		"max_hourly_cost": cty.NumberIntVal(5),
		"max_instances":   cty.NumberIntVal(4),
	})
	resp := plan(t, p, "glidein.a", map[string]cty.Value{"nodes": cty.NumberIntVal(2)})
	if err := providers.Err(resp.Diagnostics); err != nil {
		t.Fatal(err)
	}
	c := resp.Cost
	if c == nil || c.Instances != 2 || c.HourlyCost != 2.88 || c.Starts != 2 || c.MaxHourlyCost != 5 || c.MaxInstances != 4 || !c.Complete {
		t.Fatalf("cost %+v", c)
	}
	if len(c.Offers) != 2 || c.Offers[0] != (providers.OfferPrice{Name: "t3.micro", HourlyCost: 0.00001, Known: true, Spot: true, Source: ec2site.SourceSpot}) ||
		c.Offers[1] != (providers.OfferPrice{Name: "hpc7a.12xlarge", HourlyCost: 1.44, Known: true, Source: ec2site.SourceOverride}) {
		t.Errorf("offers %+v", c.Offers)
	}
	warned := false
	for _, d := range resp.Diagnostics {
		warned = warned || d.Severity == hcl.DiagWarning && strings.Contains(d.Detail, "no price of hpc7a.12xlarge in us-east-1: its on-demand price stands in")
	}
	if !warned {
		t.Errorf("no warning that the on-demand price stands in for the spot price: %v", resp.Diagnostics)
	}

	over := plan(t, p, "glidein.b", map[string]cty.Value{"nodes": cty.NumberIntVal(2), "max_hourly_cost": cty.NumberIntVal(2)})
	if err := providers.Err(over.Diagnostics); err == nil || !strings.Contains(err.Error(), "glidein.b: 2 instances at up to $1.44 an hour each (hpc7a.12xlarge) would cost up to $2.88 an hour, more than its max_hourly_cost = $2") {
		t.Errorf("plan over the resource's cap: %v", err)
	}

	pc := p.(providers.PlanChecker)
	sc := p.Schema().Resources["glidein"]
	inst := func(addr string, nodes int64) providers.PlannedInstance {
		v, err := providertest.Object(sc, map[string]cty.Value{"pool": cty.StringVal("127.0.0.1:9618"), "nodes": cty.NumberIntVal(nodes)})
		if err != nil {
			t.Fatal(err)
		}
		return providers.PlannedInstance{TypeName: "glidein", Address: addr, Prior: cty.NullVal(sc.ImpliedType()), Planned: v}
	}
	if err := providers.Err(pc.CheckPlan(context.Background(), providers.CheckPlanRequest{Instances: []providers.PlannedInstance{inst("glidein.a", 2), inst("glidein.b", 1)}}).Diagnostics); err != nil {
		t.Errorf("3 instances, $4.32 an hour: %v", err)
	}
	err := providers.Err(pc.CheckPlan(context.Background(), providers.CheckPlanRequest{Instances: []providers.PlannedInstance{inst("glidein.a", 2), inst("glidein.b", 2)}}).Diagnostics)
	if err == nil || !strings.Contains(err.Error(), "up to $5.76 an hour, more than its max_hourly_cost = $5") {
		t.Errorf("4 instances, $5.76 an hour: %v", err)
	}
	err = providers.Err(pc.CheckPlan(context.Background(), providers.CheckPlanRequest{Instances: []providers.PlannedInstance{inst("glidein.a", 3), inst("glidein.b", 2)}}).Diagnostics)
	if err == nil || !strings.Contains(err.Error(), "would keep 5 instances in all (glidein.a 3, glidein.b 2), more than its max_instances = 4") {
		t.Errorf("5 instances: %v", err)
	}
}

// TestSiteLaunchSettings: the site a provider "aws" block makes launches
// from its launch_template with its block_device volumes: moto shows the
// template's tag on the instance and the volumes in its mapping, the one
// that leaves delete_on_termination out deleted with the instance.
func TestSiteLaunchSettings(t *testing.T) {
	endpoint := ec2test.StartMoto(t)
	ctx := context.Background()
	ac, err := ec2site.LoadAWS(ctx, ec2test.Region, "", endpoint)
	if err != nil {
		t.Fatal(err)
	}
	client := ec2.NewFromConfig(ac)
	ami := motoImage(t, endpoint)
	lt, err := client.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("burst"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(ami)}})
	if err != nil {
		t.Fatal(err)
	}
	dev := func(name string, size int64, del cty.Value) cty.Value {
		return cty.ObjectVal(map[string]cty.Value{"device_name": cty.StringVal(name), "volume_size": cty.NumberIntVal(size),
			"volume_type": cty.StringVal("gp3"), "delete_on_termination": del, "encrypted": cty.True})
	}
	cfg, err := providertest.Object(New().Schema().Provider, map[string]cty.Value{
		"endpoint": cty.StringVal(endpoint), "region": cty.StringVal(ec2test.Region), "ami": cty.StringVal(ami),
		"instance_types":  types("t3.micro"),
		"launch_template": cty.ObjectVal(map[string]cty.Value{"id": cty.NullVal(cty.String), "name": cty.StringVal("burst"), "version": cty.StringVal("$Default")}),
		"block_device":    cty.ListVal([]cty.Value{dev("/dev/xvda", 30, cty.NullVal(cty.Bool)), dev("/dev/sdf", 100, cty.False)}),
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Site(cfg)
	if err != nil {
		t.Fatal(err)
	}
	id := glidein.IDPrefix + "test-lt-0-aaaa"
	g, err := s.Submit(ctx, glidein.Request{ID: id, Args: []string{"agent"}, Files: map[string][]byte{"node.token": []byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Cancel(context.Background(), id) })
	out, err := client.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{g.SiteID}})
	if err != nil || len(out.Reservations) != 1 {
		t.Fatalf("DescribeInstances: %v", err)
	}
	in := out.Reservations[0].Instances[0]
	tagged := false
	for _, tg := range in.Tags {
		tagged = tagged || aws.ToString(tg.Key) == "aws:ec2launchtemplate:id" && aws.ToString(tg.Value) == aws.ToString(lt.LaunchTemplate.LaunchTemplateId)
	}
	if !tagged {
		t.Errorf("instance %s has no aws:ec2launchtemplate:id tag of %s: %v", g.SiteID, aws.ToString(lt.LaunchTemplate.LaunchTemplateId), in.Tags)
	}
	got := map[string]bool{}
	for _, m := range in.BlockDeviceMappings {
		got[aws.ToString(m.DeviceName)] = aws.ToBool(m.Ebs.DeleteOnTermination)
	}
	if len(got) != 2 || !got["/dev/xvda"] || got["/dev/sdf"] {
		t.Errorf("block devices (delete on termination) %v, want /dev/xvda true, /dev/sdf false", got)
	}
}
