package aws

import (
	"github.com/pond-htc/pond/overlay/glidein/ec2"
	gprov "github.com/pond-htc/pond/providers/glidein"
)

// withLaunch adds the prices, launch template and block devices of s to
// cfg.
func withLaunch(cfg ec2.Config, s gprov.AWSSettings) ec2.Config {
	cfg.Prices = s.Prices
	if lt := s.LaunchTemplate; lt != nil {
		cfg.LaunchTemplate = &ec2.LaunchTemplate{ID: lt.ID, Name: lt.Name, Version: lt.Version}
	}
	for _, b := range s.BlockDevices {
		cfg.BlockDevices = append(cfg.BlockDevices, ec2.BlockDevice{DeviceName: b.DeviceName, VolumeSize: b.VolumeSize,
			VolumeType: b.VolumeType, DeleteOnTermination: b.DeleteOnTermination, Encrypted: b.Encrypted})
	}
	return cfg
}
