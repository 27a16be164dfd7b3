package glidein

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/hashicorp/hcl/v2"
	site "github.com/pond-htc/pond/overlay/glidein"
	ec2site "github.com/pond-htc/pond/overlay/glidein/ec2"
	"github.com/pond-htc/pond/overlay/glidein/ec2/ec2test"
	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/providers/providertest"
	"github.com/zclconf/go-cty/cty"
)

// awsProvider makes an unconfigured provider "aws".
func awsProvider() providers.Provider { return Factory(ec2site.Kind())() }

// awsSite makes the EC2 site of the provider "aws" block cfg, as the
// provider does.
func awsSite(t *testing.T, cfg cty.Value) (site.Site, error) {
	t.Helper()
	k := ec2site.Kind()
	settings, err := kindSettings(k.Provider, cfg)
	if err != nil {
		return nil, err
	}
	return k.New(t.Context(), settings, site.KindEnv{})
}

// TestConfigure: the provider "aws" takes the EC2 arguments in its block,
// manages the glidein resource, and refuses a block that cannot launch
// anything, saying which argument is wrong.
func TestAWSConfigure(t *testing.T) {
	p := awsProvider()
	sc := p.Schema()
	for _, a := range []string{"region", "profile", "endpoint", "ami", "instance_types", "subnets", "security_groups", "iam_instance_profile", "tags", "spot",
		"max_hourly_cost", "max_instances", "prices"} {
		if sc.Provider.Attributes[a] == nil {
			t.Errorf("provider aws has no argument %s", a)
		}
	}
	if sc.Resources["glidein"] == nil {
		t.Fatal("provider aws does not manage the glidein resource")
	}
	for _, b := range []string{"launch_template", "block_device"} {
		if sc.Provider.BlockTypes[b] == nil {
			t.Errorf("provider aws has no block %s", b)
		}
	}
	for _, a := range []string{"max_hourly_cost", "max_instances"} {
		if sc.Resources["glidein"].Attributes[a] == nil {
			t.Errorf("the glidein resource has no argument %s", a)
		}
	}
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	for _, tc := range []struct {
		name  string
		attrs map[string]cty.Value
		want  string
	}{
		{"good", map[string]cty.Value{}, ""},
		{"no instance types", map[string]cty.Value{"instance_types": cty.ListValEmpty(cty.String)}, "instance_types"},
		{"reserved tag", map[string]cty.Value{"tags": cty.MapVal(map[string]cty.Value{"pond:id": cty.StringVal("x")})}, "reserved"},
		{"relative agent binary", map[string]cty.Value{"agent_binary": cty.StringVal("pondctl")}, "absolute"},
		{"negative cap", map[string]cty.Value{"max_hourly_cost": cty.NumberIntVal(-2)}, "max_hourly_cost: -2: want a positive amount"},
		{"zero max_instances", map[string]cty.Value{"max_instances": cty.NumberIntVal(0)}, "max_instances: 0 is out of range"},
		{"bad volume type", map[string]cty.Value{"block_device": cty.ListVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{
			"device_name": cty.StringVal("/dev/sdf"), "volume_size": cty.NullVal(cty.Number), "volume_type": cty.StringVal("ssd"),
			"delete_on_termination": cty.NullVal(cty.Bool), "encrypted": cty.NullVal(cty.Bool)})})}, "volume_type \"ssd\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attrs := map[string]cty.Value{
				"ami":            cty.StringVal("ami-12345678"),
				"instance_types": cty.ListVal([]cty.Value{cty.StringVal("t3.micro")}),
				"endpoint":       cty.StringVal("http://127.0.0.1:1"),
				"bind_address":   cty.StringVal("127.0.0.1"),
			}
			for k, v := range tc.attrs {
				attrs[k] = v
			}
			cfg, err := providertest.Object(sc.Provider, attrs)
			if err != nil {
				t.Fatal(err)
			}
			err = providers.Err(awsProvider().Configure(context.Background(), providers.ConfigureRequest{Config: cfg, WorkDir: t.TempDir()}).Diagnostics)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Configure = %v, want an error about %s", err, tc.want)
			}
		})
	}
}

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
func awsConfigured(t *testing.T, endpoint string, attrs map[string]cty.Value) providers.Provider {
	t.Helper()
	p := awsProvider()
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

func awsPlan(t *testing.T, p providers.Provider, address string, attrs map[string]cty.Value) providers.PlanResponse {
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

func instanceTypes(ts ...string) cty.Value {
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
	t.Parallel()
	endpoint := ec2test.Shared(t)
	p := awsConfigured(t, endpoint, map[string]cty.Value{
		"instance_types":  instanceTypes("t3.micro", "hpc7a.12xlarge"),
		"prices":          cty.MapVal(map[string]cty.Value{"hpc7a.12xlarge": cty.NumberFloatVal(1.44)}),
		"spot":            cty.True,
		"max_hourly_cost": cty.NumberIntVal(5),
		"max_instances":   cty.NumberIntVal(4),
	})
	resp := awsPlan(t, p, "site.a", map[string]cty.Value{"nodes": cty.NumberIntVal(2)})
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

	over := awsPlan(t, p, "site.b", map[string]cty.Value{"nodes": cty.NumberIntVal(2), "max_hourly_cost": cty.NumberIntVal(2)})
	if err := providers.Err(over.Diagnostics); err == nil || !strings.Contains(err.Error(), "site.b: 2 instances at up to $1.44 an hour each (hpc7a.12xlarge) would cost up to $2.88 an hour, more than its max_hourly_cost = $2") {
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
	if err := providers.Err(pc.CheckPlan(context.Background(), providers.CheckPlanRequest{Instances: []providers.PlannedInstance{inst("site.a", 2), inst("site.b", 1)}}).Diagnostics); err != nil {
		t.Errorf("3 instances, $4.32 an hour: %v", err)
	}
	err := providers.Err(pc.CheckPlan(context.Background(), providers.CheckPlanRequest{Instances: []providers.PlannedInstance{inst("site.a", 2), inst("site.b", 2)}}).Diagnostics)
	if err == nil || !strings.Contains(err.Error(), "up to $5.76 an hour, more than its max_hourly_cost = $5") {
		t.Errorf("4 instances, $5.76 an hour: %v", err)
	}
	err = providers.Err(pc.CheckPlan(context.Background(), providers.CheckPlanRequest{Instances: []providers.PlannedInstance{inst("site.a", 3), inst("site.b", 2)}}).Diagnostics)
	if err == nil || !strings.Contains(err.Error(), "would keep 5 instances in all (site.a 3, site.b 2), more than its max_instances = 4") {
		t.Errorf("5 instances: %v", err)
	}
}

// TestSiteLaunchSettings: the site a provider "aws" block makes launches
// from its launch_template with its block_device volumes: moto shows the
// template's tag on the instance and the volumes in its mapping, the one
// that leaves delete_on_termination out deleted with the instance.
func TestSiteLaunchSettings(t *testing.T) {
	t.Parallel()
	endpoint := ec2test.Shared(t)
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
	cfg, err := providertest.Object(awsProvider().Schema().Provider, map[string]cty.Value{
		"endpoint": cty.StringVal(endpoint), "region": cty.StringVal(ec2test.Region), "ami": cty.StringVal(ami),
		"instance_types":  instanceTypes("t3.micro"),
		"launch_template": cty.ObjectVal(map[string]cty.Value{"id": cty.NullVal(cty.String), "name": cty.StringVal("burst"), "version": cty.StringVal("$Default")}),
		"block_device":    cty.ListVal([]cty.Value{dev("/dev/xvda", 30, cty.NullVal(cty.Bool)), dev("/dev/sdf", 100, cty.False)}),
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := awsSite(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	id := site.IDPrefix + "test-lt-0-aaaa"
	g, err := s.Submit(ctx, site.Request{ID: id, Args: []string{"agent"}, Files: map[string][]byte{"node.token": []byte("x")}})
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

// syncBuffer is a bytes.Buffer safe for the logger's and the test's use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSDKLogsGoToPondLogger: off EC2, with no credentials of its own, the
// SDK asks the metadata service for them, whose refusal of IMDSv2 makes
// it warn that it falls back to IMDSv1. The warning goes to the logger
// pondctl gives the provider (POND_LOG's), at WARN, and only there: never
// to the terminal, and nowhere when the logger's level is above it.
func TestSDKLogsGoToPondLogger(t *testing.T) {
	// A metadata service that refuses IMDSv2's token and knows no role.
	imds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "forbidden", http.StatusForbidden)
	}))
	defer imds.Close()
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.URL)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "false")
	for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
		"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	none := filepath.Join(t.TempDir(), "none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", none)
	t.Setenv("AWS_CONFIG_FILE", none)
	t.Setenv("AWS_REGION", "us-east-1")

	for _, tc := range []struct {
		name  string
		level slog.Level
		want  bool
	}{
		{"POND_LOG=warn", slog.LevelWarn, true},
		{"POND_LOG=error", slog.LevelError, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// What the process writes to its stderr meanwhile: the
			// terminal.
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			stderr := os.Stderr
			os.Stderr = w
			var term bytes.Buffer
			copied := make(chan struct{})
			go func() { io.Copy(&term, r); close(copied) }()
			restore := func() {
				if os.Stderr == w {
					os.Stderr = stderr
					w.Close()
					<-copied
				}
			}
			defer restore()

			var logs syncBuffer
			logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: tc.level}))
			p := awsProvider()
			cfg, err := providertest.Object(p.Schema().Provider, map[string]cty.Value{
				"ami":            cty.StringVal("ami-12345678"),
				"instance_types": cty.ListVal([]cty.Value{cty.StringVal("t3.micro")}),
				// Nothing listens there: no request gets that far.
				"endpoint":     cty.StringVal("http://127.0.0.1:1"),
				"bind_address": cty.StringVal("127.0.0.1"),
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := providers.Err(p.Configure(ctx, providers.ConfigureRequest{Config: cfg, WorkDir: t.TempDir(), Logger: logger}).Diagnostics); err != nil {
				t.Fatal(err)
			}
			rs := p.Schema().Resources["glidein"]
			gc, err := providertest.Object(rs, map[string]cty.Value{"pool": cty.StringVal("127.0.0.1:1"), "nodes": cty.NumberIntVal(1)})
			if err != nil {
				t.Fatal(err)
			}
			plan := p.PlanResourceChange(ctx, providers.PlanRequest{TypeName: "glidein", Address: "site.burst",
				Prior: cty.NullVal(rs.ImpliedType()), Config: gc, ProposedNew: gc})
			if providers.Err(plan.Diagnostics) == nil {
				t.Fatal("plan without credentials succeeded")
			}
			restore()
			if strings.Contains(term.String(), "IMDSv1") {
				t.Errorf("the SDK wrote to the terminal:\n%s", term.String())
			}
			got := logs.String()
			if has := strings.Contains(got, "level=WARN") && strings.Contains(got, "falling back to IMDSv1") && strings.Contains(got, "source=aws-sdk"); has != tc.want {
				t.Errorf("pond's log at %s has the SDK's IMDSv1 warning: %v, want %v:\n%s", tc.level, has, tc.want, got)
			}
		})
	}
}

// TestKindSettingErrorAtArgument: an argument a kind's site refuses (a
// *site.SettingError of its New) is shown at that argument of the
// provider block, a nested block's as TYPE[i].NAME.
func TestKindSettingErrorAtArgument(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	dev := func(name string) cty.Value {
		return cty.ObjectVal(map[string]cty.Value{"device_name": cty.StringVal(name), "volume_size": cty.NullVal(cty.Number),
			"volume_type": cty.NullVal(cty.String), "delete_on_termination": cty.NullVal(cty.Bool), "encrypted": cty.NullVal(cty.Bool)})
	}
	for _, tc := range []struct {
		name  string
		attrs map[string]cty.Value
		ref   string
	}{
		{"no instance types", map[string]cty.Value{"instance_types": cty.ListValEmpty(cty.String)}, "instance_types"},
		{"negative price", map[string]cty.Value{"prices": cty.MapVal(map[string]cty.Value{"c7i.large": cty.NumberIntVal(-1)})}, "prices"},
		{"device twice", map[string]cty.Value{"block_device": cty.ListVal([]cty.Value{dev("/dev/sdf"), dev("/dev/sdf")})}, "block_device[1].device_name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attrs := map[string]cty.Value{"ami": cty.StringVal("ami-12345678"), "region": cty.StringVal("us-east-1"),
				"instance_types": instanceTypes("t3.micro"), "endpoint": cty.StringVal("http://127.0.0.1:1")}
			for k, v := range tc.attrs {
				attrs[k] = v
			}
			cfg, err := providertest.Object(awsProvider().Schema().Provider, attrs)
			if err != nil {
				t.Fatal(err)
			}
			diags := awsProvider().Configure(context.Background(), providers.ConfigureRequest{Config: cfg, WorkDir: t.TempDir()}).Diagnostics
			if len(diags) != 1 || diags[0].Extra != providers.AttributeRef(tc.ref) {
				t.Fatalf("diagnostics %v, want one at %s", diags, tc.ref)
			}
		})
	}
}
