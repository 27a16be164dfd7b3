package ec2

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/overlay/glidein"
)

// spotShared is the key of the spot price cache in a glidein.Shared.
const spotShared = "ec2.spot-prices"

// Kind is the kind "aws": the provider "aws" block, and a factory entry's
// EC2 site made again from its Config. An entry carries no AWS
// credential: the process's own come from the SDK's default chain on its
// machine (the environment, a shared profile named by the Config's
// Profile, its instance or container role). The sites of one process
// share one cache of the spot price history (glidein.KindEnv.Shared).
func Kind() glidein.Kind {
	return glidein.Kind{
		Name: "aws",
		Provider: glidein.Block{
			Description: "Starts glideins as EC2 instances, one each; their credential goes through SSM Parameter Store.",
			Settings:    settingsSchema(),
			Blocks:      launchBlocks(),
		},
		Budget:       true,
		Labels:       true,
		FetchesFiles: true,
		New:          newFromSettings,
		Open: func(ctx context.Context, config json.RawMessage, env glidein.KindEnv) (glidein.Site, error) {
			var c Config
			if err := glidein.DecodeConfig(config, &c); err != nil {
				return nil, err
			}
			return open(ctx, c, env)
		},
	}
}

// open makes the site of c with what env gives.
func open(ctx context.Context, c Config, env glidein.KindEnv) (glidein.Site, error) {
	spot, _ := env.Shared.Get(spotShared, func() any { return NewSpotPrices(0, 0) }).(*SpotPrices)
	s, err := New(context.WithoutCancel(ctx), c, WithSpotPrices(spot), WithLogger(env.Logger))
	if err != nil {
		return nil, err
	}
	return s, nil
}

func settingsSchema() map[string]glidein.Setting {
	return map[string]glidein.Setting{
		"binary": {Type: cty.String,
			Description: "Path of a local pondctl binary (default: $POND_BIN, else this executable); the instances run the one at agent_binary on their image."},
		"region":   {Type: cty.String, Description: "AWS region (default: AWS_REGION or the profile's)."},
		"profile":  {Type: cty.String, Description: "Shared configuration profile; credentials come from the SDK's default chain (environment, shared files, SSO, instance or container role)."},
		"endpoint": {Type: cty.String, Description: "Endpoint URL of every AWS service used (EC2, SSM), such as a moto server's http://127.0.0.1:5000."},
		"ami":      {Type: cty.String, Required: true, Description: "Image the instances boot: it has pondctl at agent_binary and runs user data as a shell script (cloud-init)."},
		"instance_types": {Type: cty.List(cty.String), Required: true,
			Description: "Instance types, in order of preference; the next is tried (in each subnet) when EC2 has no capacity for one."},
		"subnets": {Type: cty.List(cty.String),
			Description: "Subnets, in order of preference, tried for each instance type (default: the default VPC's)."},
		"security_groups":      {Type: cty.List(cty.String), Description: "Security group IDs of the instances."},
		"iam_instance_profile": {Type: cty.String, Description: "Name or ARN of the instance profile whose role may read (and delete) the SSM parameters under parameter_prefix."},
		"key_name":             {Type: cty.String, Description: "EC2 key pair of the instances, for SSH by hand."},
		"tags":                 {Type: cty.Map(cty.String), Description: "Tags of the instances and their volumes, beside pond:id, pond:managed-by, pond:lineage and pond:address."},
		"spot":                 {Type: cty.Bool, Description: "Launch spot instances (one-time, terminated on interruption; default false)."},
		"agent_binary":         {Type: cty.String, Description: "Path of pondctl on the image (default " + DefaultAgentBinary + ")."},
		"base_dir":             {Type: cty.String, Description: "Directory on the instance under which the glidein's own is made (default " + DefaultBaseDir + ")."},
		"parameter_prefix":     {Type: cty.String, Description: "SSM path under which each instance's credential is written, at PREFIX/ID/FILE (default " + DefaultParameterPrefix + ")."},
		"kms_key_id":           {Type: cty.String, Description: "KMS key of the SecureString parameters (default: the account's aws/ssm key)."},
		"prices": {Type: cty.Map(cty.Number),
			Description: "On-demand price of instance types in US dollars an hour, by type, for those pond's table lacks or prices otherwise (a discount)."},
	}
}

// launchBlocks are the provider "aws" blocks launch_template and
// block_device.
func launchBlocks() map[string]glidein.NestedBlock {
	return map[string]glidein.NestedBlock{
		"launch_template": {Block: glidein.Block{
			Description: "EC2 launch template the instances are launched from; the provider's own arguments override it.",
			Settings: map[string]glidein.Setting{
				"id":      {Type: cty.String, Description: "Launch template ID (lt-...); id or name."},
				"name":    {Type: cty.String, Description: "Launch template name; id or name."},
				"version": {Type: cty.String, Description: "Version number, \"$Latest\" or \"$Default\" (default: the template's default version)."},
			},
		}},
		"block_device": {List: true, Block: glidein.Block{
			Description: "A volume of each instance (its block device mapping).",
			Settings: map[string]glidein.Setting{
				"device_name":           {Type: cty.String, Required: true, Description: "Device, such as /dev/xvda (the root volume of most Linux images) or /dev/sdf."},
				"volume_size":           {Type: cty.Number, Description: "Size in GiB (default: the image's)."},
				"volume_type":           {Type: cty.String, Description: "gp3, gp2, io1, io2, st1, sc1 or standard (default: EC2's)."},
				"delete_on_termination": {Type: cty.Bool, Description: "Delete the volume with the instance (default true)."},
				"encrypted":             {Type: cty.Bool, Description: "Encrypt the volume with the account's default EBS key (default false)."},
			},
		}},
	}
}

// settings is a provider "aws" block's own arguments and blocks.
type settings struct {
	Binary             string             `json:"binary"` // the provider's; see glidein.KindEnv.Binary
	Region             string             `json:"region"`
	Profile            string             `json:"profile"`
	Endpoint           string             `json:"endpoint"`
	AMI                string             `json:"ami"`
	InstanceTypes      []string           `json:"instance_types"`
	Subnets            []string           `json:"subnets"`
	SecurityGroups     []string           `json:"security_groups"`
	IAMInstanceProfile string             `json:"iam_instance_profile"`
	KeyName            string             `json:"key_name"`
	Tags               map[string]string  `json:"tags"`
	Spot               bool               `json:"spot"`
	AgentBinary        string             `json:"agent_binary"`
	BaseDir            string             `json:"base_dir"`
	ParameterPrefix    string             `json:"parameter_prefix"`
	KMSKeyID           string             `json:"kms_key_id"`
	Prices             map[string]float64 `json:"prices"`
	LaunchTemplate     *struct {
		ID      string `json:"id"`
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"launch_template"`
	BlockDevices []struct {
		DeviceName          string       `json:"device_name"`
		VolumeSize          *json.Number `json:"volume_size"`
		VolumeType          string       `json:"volume_type"`
		DeleteOnTermination *bool        `json:"delete_on_termination"`
		Encrypted           bool         `json:"encrypted"`
	} `json:"block_device"`
}

// newFromSettings makes the site of a provider "aws" block.
func newFromSettings(ctx context.Context, raw json.RawMessage, env glidein.KindEnv) (glidein.Site, error) {
	var s settings
	if err := glidein.DecodeSettings(raw, &s); err != nil {
		return nil, err
	}
	tags := map[string]string{}
	for k, v := range s.Tags {
		tags[k] = v
	}
	if len(s.InstanceTypes) == 0 {
		return nil, glidein.SettingErrorf("instance_types", "want at least one instance type")
	}
	cfg := Config{
		Region: s.Region, Profile: s.Profile, Endpoint: s.Endpoint,
		AMI: s.AMI, InstanceTypes: s.InstanceTypes, Subnets: s.Subnets,
		SecurityGroups: s.SecurityGroups, IAMInstanceProfile: s.IAMInstanceProfile,
		KeyName: s.KeyName, Tags: tags, Spot: s.Spot,
		AgentBinary: s.AgentBinary, BaseDir: s.BaseDir,
		ParameterPrefix: s.ParameterPrefix, KMSKeyID: s.KMSKeyID,
	}
	if err := s.launch(&cfg); err != nil {
		return nil, err
	}
	return open(ctx, cfg, glidein.KindEnv{Logger: env.Logger, Shared: env.Shared})
}

// launch adds the prices, launch template and block devices of s to cfg.
// Each error is a glidein.SettingError at its argument or block.
func (s *settings) launch(cfg *Config) error {
	var errs []error
	if s.Prices != nil {
		cfg.Prices = map[string]float64{}
		for k, v := range s.Prices {
			if v < 0 {
				errs = append(errs, glidein.SettingErrorf("prices", "%s: %s is negative", k, strconv.FormatFloat(v, 'g', -1, 64)))
				continue
			}
			cfg.Prices[k] = v
		}
	}
	if lt := s.LaunchTemplate; lt != nil {
		cfg.LaunchTemplate = &LaunchTemplate{ID: lt.ID, Name: lt.Name, Version: lt.Version}
		if (lt.ID == "") == (lt.Name == "") {
			errs = append(errs, glidein.SettingErrorf("launch_template", "want id or name (one of them)"))
		}
	}
	for i, b := range s.BlockDevices {
		ref := fmt.Sprintf("block_device[%d]", i)
		d := BlockDevice{DeviceName: b.DeviceName, VolumeType: b.VolumeType, DeleteOnTermination: true, Encrypted: b.Encrypted}
		if b.DeleteOnTermination != nil {
			d.DeleteOnTermination = *b.DeleteOnTermination
		}
		if n := b.VolumeSize; n != nil {
			v, err := strconv.ParseInt(n.String(), 10, 32)
			if err != nil || v < 1 || v > 65536 {
				errs = append(errs, glidein.SettingErrorf(ref+".volume_size", "%s: want 1 to 65536 GiB", n))
			} else {
				d.VolumeSize = int32(v)
			}
		}
		if d.DeviceName == "" {
			errs = append(errs, glidein.SettingErrorf(ref+".device_name", "empty: want a device, such as /dev/xvda"))
		}
		cfg.BlockDevices = append(cfg.BlockDevices, d)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// What the site would refuse of them.
	if lt := cfg.LaunchTemplate; lt != nil {
		if err := lt.Validate(); err != nil {
			return &glidein.SettingError{Setting: "launch_template", Err: fmt.Errorf("launch_template: %w", err)}
		}
	}
	seen := map[string]bool{}
	for i, d := range cfg.BlockDevices {
		ref := fmt.Sprintf("block_device[%d]", i)
		if err := d.Validate(); err != nil {
			return &glidein.SettingError{Setting: ref, Err: fmt.Errorf("%s: %w", ref, err)}
		}
		if seen[d.DeviceName] {
			return &glidein.SettingError{Setting: ref + ".device_name", Err: fmt.Errorf("%s: %s is mapped twice", ref, d.DeviceName)}
		}
		seen[d.DeviceName] = true
	}
	return nil
}
