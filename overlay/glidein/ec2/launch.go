package ec2

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// LaunchTemplate names an EC2 launch template the instances are launched
// from. What RunInstances says besides (the image, instance type, subnet,
// tags, user data, block devices) overrides the template.
type LaunchTemplate struct {
	// ID (lt-...) or Name, not both.
	ID   string
	Name string
	// Version is a version number, "$Latest" or "$Default" (EC2's default
	// when empty: the template's default version).
	Version string
}

// BlockDevice is one volume of the instances' block device mapping.
type BlockDevice struct {
	// DeviceName is the device, such as /dev/xvda (the root volume of most
	// Linux images) or /dev/sdf.
	DeviceName string
	// VolumeSize is in GiB; 0 keeps the image's (or snapshot's) size.
	VolumeSize int32
	// VolumeType is gp3, gp2, io1, io2, st1, sc1 or standard; empty keeps
	// EC2's default.
	VolumeType string
	// DeleteOnTermination deletes the volume with the instance.
	DeleteOnTermination bool
	// Encrypted encrypts the volume (with the account's default EBS key).
	Encrypted bool
}

var volumeTypes = map[string]bool{"gp2": true, "gp3": true, "io1": true, "io2": true, "st1": true, "sc1": true, "standard": true}

// Validate reports what is wrong with the launch template's reference.
func (lt *LaunchTemplate) Validate() error {
	switch {
	case lt.ID == "" && lt.Name == "":
		return errors.New("want id or name")
	case lt.ID != "" && lt.Name != "":
		return errors.New("want id or name, not both")
	case lt.ID != "" && !strings.HasPrefix(lt.ID, "lt-"):
		return fmt.Errorf("id %q: want a launch template ID, such as lt-0123456789abcdef0", lt.ID)
	}
	if v := lt.Version; v != "" && v != "$Latest" && v != "$Default" {
		for _, r := range v {
			if r < '0' || r > '9' {
				return fmt.Errorf("version %q: want a version number, \"$Latest\" or \"$Default\"", v)
			}
		}
	}
	return nil
}

// Validate reports what is wrong with the block device.
func (b *BlockDevice) Validate() error {
	if b.DeviceName == "" || strings.ContainsAny(b.DeviceName, " \t\n") {
		return fmt.Errorf("device_name %q: want a device, such as /dev/xvda or /dev/sdf", b.DeviceName)
	}
	if b.VolumeSize < 0 || b.VolumeSize > 65536 {
		return fmt.Errorf("volume_size %d: want 1 to 65536 GiB", b.VolumeSize)
	}
	if b.VolumeType != "" && !volumeTypes[b.VolumeType] {
		return fmt.Errorf("volume_type %q: want gp3, gp2, io1, io2, st1, sc1 or standard", b.VolumeType)
	}
	return nil
}

// validateLaunch checks the launch template, block devices and prices of
// cfg.
func validateLaunch(cfg *Config) error {
	if cfg.LaunchTemplate != nil {
		if err := cfg.LaunchTemplate.Validate(); err != nil {
			return fmt.Errorf("launch_template: %w", err)
		}
	}
	seen := map[string]bool{}
	for i := range cfg.BlockDevices {
		b := &cfg.BlockDevices[i]
		if err := b.Validate(); err != nil {
			return fmt.Errorf("block_device %d: %w", i+1, err)
		}
		if seen[b.DeviceName] {
			return fmt.Errorf("block_device %d: %s is mapped twice", i+1, b.DeviceName)
		}
		seen[b.DeviceName] = true
	}
	for t, p := range cfg.Prices {
		if p < 0 {
			return fmt.Errorf("prices: %s: %v is negative", t, p)
		}
	}
	return nil
}

// addLaunch adds the launch template and the block device mapping to in.
func (s *Site) addLaunch(in *ec2.RunInstancesInput) {
	if lt := s.cfg.LaunchTemplate; lt != nil {
		spec := &types.LaunchTemplateSpecification{}
		if lt.ID != "" {
			spec.LaunchTemplateId = aws.String(lt.ID)
		} else {
			spec.LaunchTemplateName = aws.String(lt.Name)
		}
		if lt.Version != "" {
			spec.Version = aws.String(lt.Version)
		}
		in.LaunchTemplate = spec
	}
	for _, b := range s.cfg.BlockDevices {
		ebs := &types.EbsBlockDevice{DeleteOnTermination: aws.Bool(b.DeleteOnTermination)}
		if b.VolumeSize > 0 {
			ebs.VolumeSize = aws.Int32(b.VolumeSize)
		}
		if b.VolumeType != "" {
			ebs.VolumeType = types.VolumeType(b.VolumeType)
		}
		if b.Encrypted {
			ebs.Encrypted = aws.Bool(true)
		}
		in.BlockDeviceMappings = append(in.BlockDeviceMappings, types.BlockDeviceMapping{
			DeviceName: aws.String(b.DeviceName), Ebs: ebs})
	}
}
