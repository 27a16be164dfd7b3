package ec2

import "strings"

// The on-demand price table: what an instance of a type costs by the hour
// in a region, in US dollars, for Linux, shared tenancy, no licensed
// software, as in AWS's public price list (the EC2 on-demand pricing page,
// https://aws.amazon.com/ec2/pricing/on-demand/, and the bulk price list
// https://pricing.us-east-1.amazonaws.com/offers/v1.0/aws/AmazonEC2/current/REGION/index.json),
// copied in 2024. AWS changes prices seldom, and only down; a type or
// region missing here has no price (the provider's prices argument gives
// one). Within a family but g4dn, AWS prices every size in proportion to
// its normalization factor (large 4, xlarge 8, 2xlarge 16, ...; see the
// EC2 documentation on instance size flexibility), so the table holds each
// family's price per normalized unit ("large" / 4) and the sizes it has.

// normalization is AWS's normalization factor of each instance size.
var normalization = map[string]float64{
	"nano": 0.25, "micro": 0.5, "small": 1, "medium": 2, "large": 4, "xlarge": 8,
	"2xlarge": 16, "3xlarge": 24, "4xlarge": 32, "6xlarge": 48, "8xlarge": 64, "9xlarge": 72,
	"12xlarge": 96, "16xlarge": 128, "18xlarge": 144, "24xlarge": 192, "32xlarge": 256, "48xlarge": 384,
}

// family is an instance family's sizes and the hourly price of its large
// size (four normalized units) in each region.
type family struct {
	sizes []string
	large map[string]float64
}

// Regions priced as us-east-1 for every family here.
var sameAsUSEast1 = []string{"us-east-1", "us-east-2", "us-west-2"}

func usEast(large, euWest1 float64) map[string]float64 {
	m := map[string]float64{"eu-west-1": euWest1}
	for _, r := range sameAsUSEast1 {
		m[r] = large
	}
	return m
}

var families = map[string]family{
	"t3":  {[]string{"nano", "micro", "small", "medium", "large", "xlarge", "2xlarge"}, usEast(0.0832, 0.0912)},
	"m5":  {[]string{"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge"}, usEast(0.096, 0.107)},
	"m6i": {[]string{"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "32xlarge"}, usEast(0.096, 0.107)},
	"m7i": {[]string{"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge"}, usEast(0.1008, 0.1124)},
	"c5":  {[]string{"large", "xlarge", "2xlarge", "4xlarge", "9xlarge", "12xlarge", "18xlarge", "24xlarge"}, usEast(0.085, 0.096)},
	"c6i": {[]string{"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "32xlarge"}, usEast(0.085, 0.096)},
	"c7i": {[]string{"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge"}, usEast(0.08925, 0.1008)},
	"r5":  {[]string{"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge"}, usEast(0.126, 0.141)},
	"r6i": {[]string{"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "32xlarge"}, usEast(0.126, 0.141)},
	// p3 starts at 2xlarge: its price per 2xlarge, as "large" would be a
	// quarter of it.
	"p3": {[]string{"2xlarge", "8xlarge", "16xlarge"}, usEast(3.06/4, 3.305/4)},
}

// gpuPrices are the types whose price is not in proportion to their size
// (g4dn: the GPUs), by type and region.
var gpuPrices = map[string]map[string]float64{
	"g4dn.xlarge":   usEast(0.526, 0.587),
	"g4dn.2xlarge":  usEastOnly(0.752),
	"g4dn.4xlarge":  usEastOnly(1.204),
	"g4dn.8xlarge":  usEastOnly(2.176),
	"g4dn.12xlarge": usEastOnly(3.912),
	"g4dn.16xlarge": usEastOnly(4.352),
}

func usEastOnly(p float64) map[string]float64 {
	m := usEast(p, 0)
	delete(m, "eu-west-1")
	return m
}

// OnDemandPrice returns the on-demand price of one instance of
// instanceType in region, in US dollars per hour, from the table shipped
// with pond; ok is false when the table has none.
func OnDemandPrice(region, instanceType string) (usdPerHour float64, ok bool) {
	if m, found := gpuPrices[instanceType]; found {
		p, ok := m[region]
		return p, ok
	}
	fam, size, found := strings.Cut(instanceType, ".")
	if !found {
		return 0, false
	}
	f, found := families[fam]
	if !found {
		return 0, false
	}
	large, found := f.large[region]
	if !found {
		return 0, false
	}
	for _, s := range f.sizes {
		if s == size {
			// Rounded to a hundredth of a cent, as the price list is.
			return roundPrice(large * normalization[size] / 4), true
		}
	}
	return 0, false
}

func roundPrice(p float64) float64 {
	const unit = 1e6
	return float64(int64(p*unit+0.5)) / unit
}
