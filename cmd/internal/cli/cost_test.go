package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/pond-htc/pond/overlay/glidein/ec2"
	"github.com/pond-htc/pond/overlay/glidein/ec2/ec2test"
	"github.com/pond-htc/pond/providers"
)

// awsConfig is a configuration of one glidein resource on the aws
// provider, pointed at moto's endpoint with one of its images; provider
// and glidein are added to the blocks' arguments.
func awsConfig(t *testing.T, endpoint, provider, glidein string) string {
	t.Helper()
	ctx := context.Background()
	ac, err := ec2.LoadAWS(ctx, ec2test.Region, "", endpoint)
	if err != nil {
		t.Fatal(err)
	}
	im, err := awsec2.NewFromConfig(ac).DescribeImages(ctx, &awsec2.DescribeImagesInput{})
	if err != nil || len(im.Images) == 0 {
		t.Fatalf("moto's images: %v", err)
	}
	return `provider "aws" {
  endpoint     = "` + endpoint + `"
  region       = "us-east-1"
  ami          = "` + aws.ToString(im.Images[0].ImageId) + `"
  bind_address = "127.0.0.1"
` + provider + `}

glidein "burst" {
  provider = provider.aws
  pool     = "127.0.0.1:9618"
` + glidein + `}
`
}

// TestPlanShowsCost: pondctl plan shows, under a glidein resource on EC2
// (moto), the instance types it may launch with their prices (moto's spot
// price for t3.micro; hpc7a.12xlarge, which moto does not sell as spot in
// us-east-1, at its on-demand price from prices, with a warning) and the cost per
// hour of what it starts, worst case; show -json of the saved plan has the same under the
// resource change, whose address and actions stay as they are.
func TestPlanShowsCost(t *testing.T) {
	endpoint := ec2test.StartMoto(t)
	dir := configDir(t, awsConfig(t, endpoint, `  instance_types  = ["t3.micro", "hpc7a.12xlarge"]
  prices          = { "hpc7a.12xlarge" = 1.44 }
  spot            = true
  max_hourly_cost = 10
`, `  nodes    = 3
`))
	code, stdout, stderr := pondctl(t, dir, nil, "plan", "-input=false", "-no-color")
	if code != 0 {
		t.Fatalf("plan: exit code %d\n%s%s", code, stdout, stderr)
	}
	out := stdout + stderr
	last := 0
	for _, want := range []string{
		"# glidein.burst will be created",
		"# (may launch t3.micro at $0.00001/hour (spot), hpc7a.12xlarge at $1.44/hour)",
		"# (estimated cost: up to $4.32/hour for what it starts (3 instances), up to $4.32/hour in all (3 instances); max_hourly_cost $10)",
		`+ glidein "burst" {`,
		"Plan: 1 to add, 0 to change, 0 to destroy.",
		"Warning: Price of hpc7a.12xlarge for glidein.burst",
		"EC2's spot price history has no price of hpc7a.12xlarge in us-east-1: its on-demand price stands in",
	} {
		i := strings.Index(out[last:], want)
		if i < 0 {
			t.Fatalf("plan output lacks %q after byte %d:\n%s", want, last, out)
		}
		last += i
	}

	// The plan document is show -json of the saved plan (plan -json
	// prints the machine-readable UI).
	code, stdout, stderr = pondctl(t, dir, nil, "plan", "-input=false", "-out", filepath.Join(dir, "tfplan"))
	if code != 0 {
		t.Fatalf("plan -out: exit code %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = pondctl(t, dir, nil, "show", "-json", filepath.Join(dir, "tfplan"))
	if code != 0 {
		t.Fatalf("show -json tfplan: exit code %d\n%s%s", code, stdout, stderr)
	}
	var plan struct {
		ResourceChanges []struct {
			Address string
			Change  struct{ Actions []string }
			Cost    *struct {
				Currency        string  `json:"currency"`
				Instances       int     `json:"instances"`
				HourlyCost      float64 `json:"hourly_cost"`
				Starts          int     `json:"starts"`
				StartHourlyCost float64 `json:"start_hourly_cost"`
				MaxHourlyCost   float64 `json:"max_hourly_cost"`
				Complete        bool    `json:"complete"`
				InstanceTypes   []struct {
					Name       string   `json:"name"`
					HourlyCost *float64 `json:"hourly_cost"`
					Spot       bool     `json:"spot"`
					Source     string   `json:"source"`
				} `json:"instance_types"`
			} `json:"cost"`
		} `json:"resource_changes"`
	}
	if err := json.Unmarshal([]byte(stdout), &plan); err != nil {
		t.Fatalf("%v:\n%s", err, stdout)
	}
	if len(plan.ResourceChanges) != 1 {
		t.Fatalf("resource changes %+v", plan.ResourceChanges)
	}
	rc := plan.ResourceChanges[0]
	if rc.Address != "glidein.burst" || len(rc.Change.Actions) != 1 || rc.Change.Actions[0] != "create" {
		t.Errorf("resource change %s %v, want glidein.burst [create]", rc.Address, rc.Change.Actions)
	}
	c := rc.Cost
	if c == nil {
		t.Fatalf("no cost in the resource change:\n%s", stdout)
	}
	if c.Currency != "USD" || c.Instances != 3 || c.HourlyCost != 4.32 || c.Starts != 3 || c.StartHourlyCost != 4.32 || c.MaxHourlyCost != 10 || !c.Complete {
		t.Errorf("cost %+v", c)
	}
	if len(c.InstanceTypes) != 2 || c.InstanceTypes[0].Name != "t3.micro" || !c.InstanceTypes[0].Spot || c.InstanceTypes[0].HourlyCost == nil ||
		*c.InstanceTypes[0].HourlyCost != 0.00001 || c.InstanceTypes[1].Name != "hpc7a.12xlarge" || c.InstanceTypes[1].Spot ||
		c.InstanceTypes[1].HourlyCost == nil || *c.InstanceTypes[1].HourlyCost != 1.44 || c.InstanceTypes[1].Source != "prices argument" {
		t.Errorf("instance types %+v", c.InstanceTypes)
	}
}

// TestPlanRefusesOverBudget: plan refuses, with exit code 1 and an error
// at the file, line and column of the argument, a glidein resource that
// would cost more than the provider's or its own max_hourly_cost, more
// instances than max_instances, an instance type without a price when a
// cap is set, and a negative cap.
func TestPlanRefusesOverBudget(t *testing.T) {
	endpoint := ec2test.StartMoto(t)
	for _, tc := range []struct {
		name              string
		provider, glidein string
		want              []string
	}{
		{"provider cap", `  instance_types  = ["t3.micro", "hpc7a.12xlarge"]
  prices          = { "hpc7a.12xlarge" = 1.44 }
  spot            = true
  max_hourly_cost = 10
`, `  nodes    = 7
`, []string{"Error: Over the hourly budget", "main.pond.hcl line 15", "15:   nodes    = 7",
			"The aws provider's glideins would keep 7 instances (glidein.burst 7) at up to $1.44 an hour each (hpc7a.12xlarge): up to $10.08 an hour, more than its max_hourly_cost = $10"}},
		{"own cap", `  instance_types  = ["c7i.large", "c6i.large"]
`, `  nodes           = 12
  max_hourly_cost = 1
`, []string{"Error: Over the hourly budget", "main.pond.hcl line 12", "12:   nodes           = 12",
			"glidein.burst: 12 instances at up to $0.08925 an hour each (c7i.large) would cost up to $1.071 an hour, more than its max_hourly_cost = $1"}},
		{"provider max_instances", `  instance_types = ["c7i.large"]
  max_instances  = 2
`, `  nodes    = 3
`, []string{"Error: Too many instances", "main.pond.hcl line 13", "13:   nodes    = 3", "would keep 3 instances in all (glidein.burst 3), more than its max_instances = 2"}},
		{"no price", `  instance_types  = ["c7i.large", "hpc7a.12xlarge"]
  max_hourly_cost = 10
`, `  nodes    = 1
`, []string{"Error: Instance type without a price", "main.pond.hcl line 10", `10: glidein "burst" {`,
			"glidein.burst may launch hpc7a.12xlarge, which has no price", "the aws provider's max_hourly_cost ($10) cannot be checked", "prices argument"}},
		{"negative provider cap", `  instance_types  = ["c7i.large"]
  max_hourly_cost = -5
`, `  nodes    = 1
`, []string{"main.pond.hcl line 7", "7:   max_hourly_cost = -5", "max_hourly_cost: -5: want a positive amount"}},
		{"negative own cap", `  instance_types  = ["c7i.large"]
`, `  nodes           = 1
  max_hourly_cost = -1
`, []string{"main.pond.hcl line 13", "13:   max_hourly_cost = -1", "max_hourly_cost: -1: want a positive amount"}},
		{"bad block device", `  instance_types  = ["c7i.large"]
  block_device {
    device_name = "/dev/xvda"
  }
  block_device {
    device_name = "/dev/sdf"
    volume_size = -1
  }
`, `  nodes    = 1
`, []string{"Error: Invalid provider argument", "main.pond.hcl line 12", "12:     volume_size = -1", "block_device[1].volume_size: -1: want 1 to 65536 GiB"}},
		{"bad volume type", `  instance_types  = ["c7i.large"]
  block_device {
    device_name = "/dev/xvda"
    volume_type = "ssd"
  }
`, `  nodes    = 1
`, []string{"Error: Invalid provider argument", "main.pond.hcl line 7", `7:   block_device {`, `block_device[0]: volume_type "ssd": want gp3, gp2`}},
		{"bad launch template", `  instance_types  = ["c7i.large"]
  launch_template {
    id = "template-1"
  }
`, `  nodes    = 1
`, []string{"Error: Invalid provider argument", "main.pond.hcl line 7", `7:   launch_template {`, `launch_template: id "template-1": want a launch template ID`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each plan has a directory of its own; they share the
			// emulator, which answers them at once.
			t.Parallel()
			dir := configDir(t, awsConfig(t, endpoint, tc.provider, tc.glidein))
			code, stdout, stderr := pondctl(t, dir, nil, "plan", "-input=false", "-no-color")
			if code != 1 {
				t.Fatalf("exit code %d, want 1\n%s%s", code, stdout, stderr)
			}
			for _, want := range tc.want {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
		})
	}
}

func TestCostLines(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    *providers.CostEstimate
		want []string
	}{
		{"none", nil, nil},
		{"one, unchanged", &providers.CostEstimate{Currency: "USD", Instances: 1, HourlyCost: 0.0832, Complete: true,
			Offers: []providers.OfferPrice{{Name: "t3.large", HourlyCost: 0.0832, Known: true}}},
			[]string{"may launch t3.large at $0.0832/hour",
				"estimated cost: up to $0/hour for what it starts (0 instances), up to $0.0832/hour in all (1 instance)"}},
		{"spot, unpriced, caps", &providers.CostEstimate{Currency: "USD", Instances: 3, HourlyCost: 0.3, Starts: 1, StartHourlyCost: 0.1,
			MaxHourlyCost: 2.5, MaxInstances: 4,
			Offers: []providers.OfferPrice{{Name: "c7i.large", HourlyCost: 0.1, Known: true, Spot: true}, {Name: "x9.large"}}},
			[]string{"may launch c7i.large at $0.1/hour (spot), x9.large (no price)",
				"estimated cost: up to $0.1/hour for what it starts (1 instance), up to $0.3/hour in all (3 instances) (instance types without a price not counted); max_hourly_cost $2.5, max_instances 4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := costLines(tc.c)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("costLines =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
