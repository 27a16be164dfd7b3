package aws

import (
	"fmt"

	"github.com/pond-htc/pond/overlay/glidein/ec2"
	gprov "github.com/pond-htc/pond/providers/glidein"
)

// withLaunch adds the prices, launch template and block devices of s to
// cfg. What the site would refuse of them is an error at the block.
func withLaunch(cfg ec2.Config, s gprov.AWSSettings) (ec2.Config, error) {
	cfg.Prices = s.Prices
	if lt := s.LaunchTemplate; lt != nil {
		cfg.LaunchTemplate = &ec2.LaunchTemplate{ID: lt.ID, Name: lt.Name, Version: lt.Version}
		if err := cfg.LaunchTemplate.Validate(); err != nil {
			return cfg, gprov.ArgumentError("launch_template", fmt.Errorf("launch_template: %w", err))
		}
	}
	seen := map[string]bool{}
	for i, b := range s.BlockDevices {
		d := ec2.BlockDevice{DeviceName: b.DeviceName, VolumeSize: b.VolumeSize,
			VolumeType: b.VolumeType, DeleteOnTermination: b.DeleteOnTermination, Encrypted: b.Encrypted}
		ref := fmt.Sprintf("block_device[%d]", i)
		if err := d.Validate(); err != nil {
			return cfg, gprov.ArgumentError(ref, fmt.Errorf("%s: %w", ref, err))
		}
		if seen[d.DeviceName] {
			return cfg, gprov.ArgumentError(ref+".device_name", fmt.Errorf("%s: %s is mapped twice", ref, d.DeviceName))
		}
		seen[d.DeviceName] = true
		cfg.BlockDevices = append(cfg.BlockDevices, d)
	}
	return cfg, nil
}
