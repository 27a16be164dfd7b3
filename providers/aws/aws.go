// Package aws is the provider "aws": glideins on Amazon EC2. Its resource
// type is glidein, the same as the slurm and ssh providers', so that a
// burst to the cloud is written as any other:
//
//	provider "aws" {
//	  region         = "us-east-1"
//	  ami            = "ami-0123456789abcdef0"
//	  instance_types = ["c7i.large", "c6i.large"]
//	  subnets        = ["subnet-aaaa", "subnet-bbbb"]
//	  spot           = true
//	}
//	glidein "burst" {
//	  provider     = provider.aws
//	  pool         = pool.campus.central_manager
//	  nodes        = 10
//	  lifetime     = "4h"
//	  idle_timeout = "20m"
//	}
//
// Each glidein is one instance (overlay/glidein/ec2), launched exactly
// once by the glidein providers' journal and the instance's pond:id tag;
// its agent ends itself after its lifetime or idle timeout, and the
// instance then shuts down, which terminates it. See docs/aws.md.
package aws

import (
	"context"

	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/ec2"
	"github.com/pond-htc/pond/providers"
	gprov "github.com/pond-htc/pond/providers/glidein"
	"github.com/zclconf/go-cty/cty"
)

// Name is the provider's name.
const Name = gprov.KindAWS

// New makes an unconfigured provider "aws".
func New() providers.Provider {
	return gprov.Factory(gprov.KindAWS, Site)()
}

// Site makes the EC2 site a provider "aws" block describes.
func Site(c cty.Value) (glidein.Site, error) {
	s, err := gprov.AWSSettingsOf(c)
	if err != nil {
		return nil, err
	}
	cfg, err := withLaunch(ec2.Config{
		Region: s.Region, Profile: s.Profile, Endpoint: s.Endpoint,
		AMI: s.AMI, InstanceTypes: s.InstanceTypes, Subnets: s.Subnets,
		SecurityGroups: s.SecurityGroups, IAMInstanceProfile: s.IAMInstanceProfile,
		KeyName: s.KeyName, Tags: s.Tags, Spot: s.Spot,
		AgentBinary: s.AgentBinary, BaseDir: s.BaseDir,
		ParameterPrefix: s.ParameterPrefix, KMSKeyID: s.KMSKeyID,
	}, s)
	if err != nil {
		return nil, err
	}
	return ec2.New(context.Background(), cfg)
}
