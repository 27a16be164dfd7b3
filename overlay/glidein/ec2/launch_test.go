package ec2

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// TestLaunchTemplateAndBlockDevices: a site with a launch template and
// two block devices sends them with RunInstances (seen through a proxy in
// front of moto), and moto's DescribeInstances shows the launch
// template's tag and the volumes as asked: size, type, encryption and
// delete-on-termination (true by default, false when asked).
func TestLaunchTemplateAndBlockDevices(t *testing.T) {
	t.Parallel()
	endpoint := startMoto(t)
	var run map[string]string
	proxy := recordingProxy(t, endpoint, func(form map[string]string) {
		if form["Action"] == "RunInstances" {
			run = form
		}
	})
	s := newSite(t, proxy)
	ctx := context.Background()
	lt, err := s.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String("pond-burst"),
		LaunchTemplateData: &types.RequestLaunchTemplateData{ImageId: aws.String(s.cfg.AMI)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ltID := aws.ToString(lt.LaunchTemplate.LaunchTemplateId)
	s.cfg.LaunchTemplate = &LaunchTemplate{ID: ltID, Version: "$Latest"}
	s.cfg.BlockDevices = []BlockDevice{
		{DeviceName: "/dev/xvda", VolumeSize: 50, VolumeType: "gp3", DeleteOnTermination: true, Encrypted: true},
		{DeviceName: "/dev/sdf", VolumeSize: 200, VolumeType: "st1"},
	}
	g, err := s.Submit(ctx, request("pond-test-lt-0-aaaa"))
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"LaunchTemplate.LaunchTemplateId":              ltID,
		"LaunchTemplate.Version":                       "$Latest",
		"BlockDeviceMapping.1.DeviceName":              "/dev/xvda",
		"BlockDeviceMapping.1.Ebs.VolumeSize":          "50",
		"BlockDeviceMapping.1.Ebs.VolumeType":          "gp3",
		"BlockDeviceMapping.1.Ebs.Encrypted":           "true",
		"BlockDeviceMapping.1.Ebs.DeleteOnTermination": "true",
		"BlockDeviceMapping.2.DeviceName":              "/dev/sdf",
		"BlockDeviceMapping.2.Ebs.VolumeSize":          "200",
		"BlockDeviceMapping.2.Ebs.DeleteOnTermination": "false",
	} {
		if run[k] != want {
			t.Errorf("RunInstances %s = %q, want %q", k, run[k], want)
		}
	}
	out, err := s.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{g.SiteID}})
	if err != nil || len(out.Reservations) != 1 || len(out.Reservations[0].Instances) != 1 {
		t.Fatalf("DescribeInstances %s: %v", g.SiteID, err)
	}
	in := out.Reservations[0].Instances[0]
	tags := map[string]string{}
	for _, tg := range in.Tags {
		tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
	}
	if tags["aws:ec2launchtemplate:id"] != ltID {
		t.Errorf("instance tags %v: no aws:ec2launchtemplate:id = %s", tags, ltID)
	}
	volumes := map[string]string{}
	for _, m := range in.BlockDeviceMappings {
		volumes[aws.ToString(m.DeviceName)] = aws.ToString(m.Ebs.VolumeId)
		want := aws.ToString(m.DeviceName) == "/dev/xvda"
		if got := aws.ToBool(m.Ebs.DeleteOnTermination); got != want {
			t.Errorf("%s: DeleteOnTermination %v, want %v", aws.ToString(m.DeviceName), got, want)
		}
	}
	if len(volumes) != 2 || volumes["/dev/xvda"] == "" || volumes["/dev/sdf"] == "" {
		t.Fatalf("block device mappings %v, want /dev/xvda and /dev/sdf", volumes)
	}
	vs, err := s.ec2.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: []string{volumes["/dev/xvda"], volumes["/dev/sdf"]}})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs.Volumes {
		got := [3]string{string(v.VolumeType), strconv.Itoa(int(aws.ToInt32(v.Size))), boolText(aws.ToBool(v.Encrypted))}
		want := [3]string{"gp3", "50", "true"}
		if aws.ToString(v.VolumeId) == volumes["/dev/sdf"] {
			want = [3]string{"st1", "200", "false"}
		}
		if got != want {
			t.Errorf("volume %s: type, size, encrypted = %v, want %v", aws.ToString(v.VolumeId), got, want)
		}
	}
}

func boolText(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// TestNewRefusesLaunch: bad launch templates, block devices and prices
// are refused by New, naming the argument.
func TestNewRefusesLaunch(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"template without id or name", func(c *Config) { c.LaunchTemplate = &LaunchTemplate{} }, "launch_template: want id or name"},
		{"template with both", func(c *Config) { c.LaunchTemplate = &LaunchTemplate{ID: "lt-1", Name: "x"} }, "not both"},
		{"template id", func(c *Config) { c.LaunchTemplate = &LaunchTemplate{ID: "x"} }, "lt-"},
		{"template version", func(c *Config) { c.LaunchTemplate = &LaunchTemplate{Name: "x", Version: "latest"} }, "version"},
		{"device name", func(c *Config) { c.BlockDevices = []BlockDevice{{}} }, "block_device 1: device_name"},
		{"volume size", func(c *Config) { c.BlockDevices = []BlockDevice{{DeviceName: "/dev/sdf", VolumeSize: -1}} }, "volume_size"},
		{"volume type", func(c *Config) { c.BlockDevices = []BlockDevice{{DeviceName: "/dev/sdf", VolumeType: "ssd"}} }, "volume_type"},
		{"device twice", func(c *Config) {
			c.BlockDevices = []BlockDevice{{DeviceName: "/dev/sdf"}, {DeviceName: "/dev/sdf"}}
		}, "block_device 2: /dev/sdf is mapped twice"},
		{"negative price", func(c *Config) { c.Prices = map[string]float64{"c7i.large": -1} }, "prices: c7i.large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{Region: "us-east-1", Endpoint: "http://127.0.0.1:1", AMI: "ami-12345678", InstanceTypes: []string{"t3.micro"}}
			tc.mod(&c)
			_, err := New(context.Background(), c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want an error with %q", err, tc.want)
			}
		})
	}
}
