package ec2

import (
	"encoding/json"
	"strings"

	"github.com/pond-htc/pond/overlay/glidein"
)

// The shape table: what an instance of each type of the price table
// (pricetable.go) has, as EC2's documentation of instance types gives it
// (https://docs.aws.amazon.com/ec2/latest/instancetypes/): vCPUs, memory
// and GPUs. Within the general-purpose, compute- and memory-optimized
// families here, a size's vCPUs are half its normalization factor from
// large up, and its memory a fixed number of GiB per vCPU; t3 and the GPU
// types are listed one by one.

// gibPerVCPU is the memory of each vCPU of a family, in GiB.
var gibPerVCPU = map[string]int{
	"m5": 4, "m6i": 4, "m7i": 4,
	"c5": 2, "c6i": 2, "c7i": 2,
	"r5": 8, "r6i": 8,
}

// shape is an instance type's vCPUs, memory in GiB and GPUs.
type shape struct {
	vcpus, gib, gpus int
}

// listedShapes are the types whose shape follows no family rule.
var listedShapes = map[string]shape{
	// t3: two vCPUs up to large; memory doubles with each size (nano 0.5
	// GiB is rounded up to 1 below).
	"t3.micro": {2, 1, 0}, "t3.small": {2, 2, 0}, "t3.medium": {2, 4, 0},
	"t3.large": {2, 8, 0}, "t3.xlarge": {4, 16, 0}, "t3.2xlarge": {8, 32, 0},
	"p3.2xlarge": {8, 61, 1}, "p3.8xlarge": {32, 244, 4}, "p3.16xlarge": {64, 488, 8},
	"g4dn.xlarge": {4, 16, 1}, "g4dn.2xlarge": {8, 32, 1}, "g4dn.4xlarge": {16, 64, 1},
	"g4dn.8xlarge": {32, 128, 1}, "g4dn.12xlarge": {48, 192, 4}, "g4dn.16xlarge": {64, 256, 1},
}

// InstanceShape returns the vCPUs, memory in MiB and GPUs of an instance
// of instanceType, from the table shipped with pond; ok is false when the
// table does not have the type.
func InstanceShape(instanceType string) (vcpus, memoryMB, gpus int, ok bool) {
	if instanceType == "t3.nano" {
		return 2, 512, 0, true
	}
	if s, found := listedShapes[instanceType]; found {
		return s.vcpus, s.gib * 1024, s.gpus, true
	}
	fam, size, found := strings.Cut(instanceType, ".")
	if !found {
		return 0, 0, 0, false
	}
	per, found := gibPerVCPU[fam]
	if !found {
		return 0, 0, 0, false
	}
	for _, s := range families[fam].sizes {
		if s == size && normalization[size] >= 4 {
			v := int(normalization[size] / 2)
			return v, v * per * 1024, 0, true
		}
	}
	return 0, 0, 0, false
}

var _ glidein.Offerer = (*Site)(nil)

// Offers implements glidein.Offerer: the site's instance types, in their
// order, with their shapes from the table (InstanceShape).
func (s *Site) Offers() []glidein.Offer {
	out := make([]glidein.Offer, len(s.cfg.InstanceTypes))
	for i, t := range s.cfg.InstanceTypes {
		o := glidein.Offer{Name: t}
		o.CPUs, o.MemoryMB, o.GPUs, o.Known = InstanceShape(t)
		out[i] = o
	}
	return out
}

var _ glidein.Describer = (*Site)(nil)

// Describe implements glidein.Describer: the site's Config as JSON, which
// holds no credential (the SDK's default chain gives them to whoever
// makes the site again, such as a pilot factory's central manager).
func (s *Site) Describe() (json.RawMessage, error) { return json.Marshal(s.cfg) }

// instanceTypes returns the types Submit tries for req: req.Offers that
// are the site's, in their order, or all of the site's.
func (s *Site) instanceTypes(req glidein.Request) ([]string, error) {
	if len(req.Offers) == 0 {
		return s.cfg.InstanceTypes, nil
	}
	mine := map[string]bool{}
	for _, t := range s.cfg.InstanceTypes {
		mine[t] = true
	}
	for _, t := range req.Offers {
		if !mine[t] {
			return nil, &offerError{t}
		}
	}
	return req.Offers, nil
}

type offerError struct{ t string }

func (e *offerError) Error() string {
	return "instance type " + e.t + " is not one of the site's instance_types"
}
