package aws

import (
	"context"
	"strings"
	"testing"

	"github.com/pond-htc/pond/providers"
	"github.com/pond-htc/pond/providers/providertest"
	"github.com/zclconf/go-cty/cty"
)

// TestConfigure: the provider "aws" takes the EC2 arguments in its block,
// manages the glidein resource, and refuses a block that cannot launch
// anything, saying which argument is wrong.
func TestConfigure(t *testing.T) {
	p := New()
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
			err = providers.Err(New().Configure(context.Background(), providers.ConfigureRequest{Config: cfg, WorkDir: t.TempDir()}).Diagnostics)
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
