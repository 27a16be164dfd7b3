package ec2

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/pond-htc/pond/overlay/glidein"
)

// Sources of a price.
const (
	SourceOverride = "prices argument"
	SourceTable    = "on-demand table"
	SourceSpot     = "spot price history"
)

// priceCache holds the prices of a site, asked of EC2 once per process:
// a plan asks for them for each of its glidein resources.
type priceCache struct {
	once   sync.Once
	prices []glidein.Price
	err    error
}

var _ glidein.Pricer = (*Site)(nil)

// Prices implements glidein.Pricer: the price of one instance of each of
// the site's instance types, in their order. The on-demand price comes
// from Config.Prices, else from the table shipped with pond
// (OnDemandPrice). With Config.Spot, the price is the highest spot price
// EC2's spot price history gives now for the type in any availability zone
// of the region (the worst the launch may pay); where EC2 gives none (a
// type it does not sell as spot there, or the call failed), the on-demand
// price stands in, with a Note saying so, since a spot instance never
// costs more than on demand. A type with no price at all has Known false.
func (s *Site) Prices(ctx context.Context) ([]glidein.Price, error) {
	s.priceCache.once.Do(func() { s.priceCache.prices, s.priceCache.err = s.prices(ctx) })
	return s.priceCache.prices, s.priceCache.err
}

func (s *Site) prices(ctx context.Context) ([]glidein.Price, error) {
	region := s.region()
	out := make([]glidein.Price, len(s.cfg.InstanceTypes))
	for i, t := range s.cfg.InstanceTypes {
		p := glidein.Price{Offer: t}
		if v, ok := s.cfg.Prices[t]; ok {
			p.USDPerHour, p.Known, p.Source = v, true, SourceOverride
		} else if v, ok := OnDemandPrice(region, t); ok {
			p.USDPerHour, p.Known, p.Source = v, true, SourceTable
		}
		out[i] = p
	}
	if !s.cfg.Spot {
		return out, nil
	}
	spot, err := s.spotPrices(ctx)
	for i := range out {
		p := &out[i]
		if v, ok := spot[p.Offer]; ok {
			p.USDPerHour, p.Known, p.Spot, p.Source = v, true, true, SourceSpot
			continue
		}
		why := fmt.Sprintf("EC2's spot price history has no price of %s in %s", p.Offer, region)
		if err != nil {
			why = fmt.Sprintf("EC2's spot price history could not be read (%v)", err)
		}
		if p.Known {
			p.Note = why + ": its on-demand price stands in (a spot instance never costs more)"
		} else {
			p.Note = why + ", and the on-demand table has none"
		}
	}
	return out, nil
}

// spotPrices returns the highest current spot price of each instance type
// over the region's availability zones, for Linux.
func (s *Site) spotPrices(ctx context.Context) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	p := ec2.NewDescribeSpotPriceHistoryPaginator(s.ec2, &ec2.DescribeSpotPriceHistoryInput{
		InstanceTypes:       toTypes(s.cfg.InstanceTypes),
		ProductDescriptions: []string{"Linux/UNIX", "Linux/UNIX (Amazon VPC)"},
		StartTime:           aws.Time(time.Now()),
	})
	out := map[string]float64{}
	for pages := 0; p.HasMorePages() && pages < 20; pages++ {
		page, err := p.NextPage(ctx)
		if err != nil {
			return out, fmt.Errorf("DescribeSpotPriceHistory: %w", err)
		}
		for _, h := range page.SpotPriceHistory {
			v, err := strconv.ParseFloat(aws.ToString(h.SpotPrice), 64)
			if err != nil || v < 0 {
				continue
			}
			t := string(h.InstanceType)
			if v > out[t] {
				out[t] = v
			} else if _, ok := out[t]; !ok {
				out[t] = v
			}
		}
	}
	return out, nil
}
