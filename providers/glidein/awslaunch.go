package glidein

import (
	"errors"
	"fmt"
	"math/big"

	"github.com/pond-htc/pond/providers"
	"github.com/zclconf/go-cty/cty"
)

// AWSLaunchTemplate is the launch_template block of a provider "aws".
type AWSLaunchTemplate struct {
	ID, Name, Version string
}

// AWSBlockDevice is a block_device block of a provider "aws".
type AWSBlockDevice struct {
	DeviceName          string
	VolumeSize          int32 // GiB; 0: the image's
	VolumeType          string
	DeleteOnTermination bool
	Encrypted           bool
}

// ArgumentError is an error about the argument ref of a provider block,
// which the planner shows at that argument: a name, or a nested block as
// TYPE[i] or TYPE[i].NAME (see providers.AttributeRef). A SiteFunc returns
// it for an argument its site refuses.
func ArgumentError(ref string, err error) error {
	return &attrError{attr: ref, err: err}
}

// awsLaunchAttrs are the provider "aws" arguments of its budget and
// prices.
func awsLaunchAttrs() map[string]*providers.Attribute {
	attrs := budgetAttrs("the provider's glideins together")
	attrs["prices"] = &providers.Attribute{Type: cty.Map(cty.Number), Optional: true,
		Description: "On-demand price of instance types in US dollars an hour, by type, for those pond's table lacks or prices otherwise (a discount)."}
	return attrs
}

// awsLaunchBlocks are the provider "aws" blocks launch_template and
// block_device.
func awsLaunchBlocks() map[string]*providers.NestedBlock {
	return map[string]*providers.NestedBlock{
		"launch_template": {Nesting: providers.NestingSingle, MaxItems: 1, Block: providers.Schema{
			Description: "EC2 launch template the instances are launched from; the provider's own arguments override it.",
			Attributes: map[string]*providers.Attribute{
				"id":      {Type: cty.String, Optional: true, Description: "Launch template ID (lt-...); id or name."},
				"name":    {Type: cty.String, Optional: true, Description: "Launch template name; id or name."},
				"version": {Type: cty.String, Optional: true, Description: "Version number, \"$Latest\" or \"$Default\" (default: the template's default version)."},
			},
		}},
		"block_device": {Nesting: providers.NestingList, Block: providers.Schema{
			Description: "A volume of each instance (its block device mapping).",
			Attributes: map[string]*providers.Attribute{
				"device_name":           {Type: cty.String, Required: true, Description: "Device, such as /dev/xvda (the root volume of most Linux images) or /dev/sdf."},
				"volume_size":           {Type: cty.Number, Optional: true, Description: "Size in GiB (default: the image's)."},
				"volume_type":           {Type: cty.String, Optional: true, Description: "gp3, gp2, io1, io2, st1, sc1 or standard (default: EC2's)."},
				"delete_on_termination": {Type: cty.Bool, Optional: true, Description: "Delete the volume with the instance (default true)."},
				"encrypted":             {Type: cty.Bool, Optional: true, Description: "Encrypt the volume with the account's default EBS key (default false)."},
			},
		}},
	}
}

// launchSettingsOf reads the prices, launch_template and block_device of
// a provider "aws" block into s. Its errors are attrErrors at the
// argument or block.
func launchSettingsOf(c cty.Value, s *AWSSettings) error {
	var errs []error
	if m := getAttr(c, "prices"); !m.IsNull() && m.IsWhollyKnown() {
		s.Prices = map[string]float64{}
		for k, v := range m.AsValueMap() {
			if v.IsNull() {
				continue
			}
			f, _ := v.AsBigFloat().Float64()
			if f < 0 {
				errs = append(errs, attrErr("prices", "%s: %s is negative", k, v.AsBigFloat().Text('g', -1)))
				continue
			}
			s.Prices[k] = f
		}
	}
	if lt := getAttr(c, "launch_template"); !lt.IsNull() && lt.IsWhollyKnown() {
		t := &AWSLaunchTemplate{ID: getString(lt, "id"), Name: getString(lt, "name"), Version: getString(lt, "version")}
		if (t.ID == "") == (t.Name == "") {
			errs = append(errs, attrErr("launch_template", "want id or name (one of them)"))
		}
		s.LaunchTemplate = t
	}
	if bl := getAttr(c, "block_device"); !bl.IsNull() && bl.IsWhollyKnown() {
		for i, b := range bl.AsValueSlice() {
			ref := fmt.Sprintf("block_device[%d]", i)
			d := AWSBlockDevice{DeviceName: getString(b, "device_name"), VolumeType: getString(b, "volume_type"), DeleteOnTermination: true}
			if v := getAttr(b, "volume_size"); !v.IsNull() {
				n, acc := v.AsBigFloat().Int64()
				if acc != big.Exact || n < 1 || n > 65536 {
					errs = append(errs, attrErr(ref+".volume_size", "%s: want 1 to 65536 GiB", v.AsBigFloat().Text('g', -1)))
				}
				d.VolumeSize = int32(min(max(n, 0), 65536))
			}
			if v := getAttr(b, "delete_on_termination"); !v.IsNull() {
				d.DeleteOnTermination = v.True()
			}
			if v := getAttr(b, "encrypted"); !v.IsNull() {
				d.Encrypted = v.True()
			}
			if d.DeviceName == "" {
				errs = append(errs, attrErr(ref+".device_name", "empty: want a device, such as /dev/xvda"))
			}
			s.BlockDevices = append(s.BlockDevices, d)
		}
	}
	return errors.Join(errs...)
}
