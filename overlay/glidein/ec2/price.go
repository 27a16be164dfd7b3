package ec2

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
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

// Defaults of NewSpotPrices.
const (
	// DefaultSpotTTL is how long an answer of the spot price history
	// stands: EC2 moves spot prices gradually, seldom more than a few
	// times a day, and a factory asks for them every cycle (seconds).
	DefaultSpotTTL = 10 * time.Minute
	// DefaultSpotRetry is how long a failed call stands (throttled,
	// refused) before it is tried again; meanwhile the on-demand price
	// stands in.
	DefaultSpotRetry = time.Minute
)

// SpotPrices caches what EC2's spot price history answers, for every Site
// that shares it (WithSpotPrices): one answer per endpoint, region,
// profile and list of instance types, used for TTL, a failed call for
// Retry. A central manager's factory shares one between all its EC2
// entries, so that it calls DescribeSpotPriceHistory once per TTL and not
// once per entry and cycle; a Site without one has its own. Create it
// with NewSpotPrices; its methods may be called concurrently.
type SpotPrices struct {
	ttl, retry time.Duration
	now        func() time.Time

	mu      sync.Mutex
	answers map[string]*spotAnswer
	calls   int
}

// spotAnswer is one cached answer; mu is held while it is asked for, so
// that concurrent Sites wait for one call.
type spotAnswer struct {
	mu   sync.Mutex
	have bool
	// at is when the answer was taken (moved on when a failed refresh
	// keeps it), good when the last call that did not fail was.
	at, good time.Time
	prices   map[string]float64
	err      error
}

// NewSpotPrices returns a cache whose answers stand for ttl and whose
// failed calls stand for retry (DefaultSpotTTL and DefaultSpotRetry when
// zero or less).
func NewSpotPrices(ttl, retry time.Duration) *SpotPrices {
	if ttl <= 0 {
		ttl = DefaultSpotTTL
	}
	if retry <= 0 {
		retry = DefaultSpotRetry
	}
	return &SpotPrices{ttl: ttl, retry: retry, now: time.Now, answers: map[string]*spotAnswer{}}
}

// Calls returns how many times the cache asked EC2 (each call may read
// several pages), for metrics and tests.
func (c *SpotPrices) Calls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// get returns the answer cached under key, asking fetch when there is none
// or it is older than its TTL.
func (c *SpotPrices) get(ctx context.Context, key string, fetch func(context.Context) (map[string]float64, error)) (map[string]float64, error) {
	c.mu.Lock()
	a := c.answers[key]
	if a == nil {
		a = &spotAnswer{}
		c.answers[key] = a
	}
	c.mu.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	stands := c.ttl
	if a.err != nil {
		stands = c.retry
	}
	if a.have && c.now().Sub(a.at) < stands {
		return a.prices, a.err
	}
	prices, err := fetch(ctx)
	c.count()
	now := c.now()
	if err != nil && a.have && a.err == nil && now.Sub(a.good) < 2*c.ttl {
		// A failed refresh keeps the last good answer until it is twice
		// the TTL old, asking again after retry: a spot price of minutes
		// ago is closer than the on-demand one.
		a.at = now.Add(c.retry - c.ttl)
		return a.prices, nil
	}
	a.have, a.at, a.prices, a.err = true, now, prices, err
	if err == nil {
		a.good = now
	}
	return prices, err
}

func (c *SpotPrices) count() {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
}

// spotKey names what the spot price history of s answers for.
func (s *Site) spotKey() string {
	types := slices.Clone(s.cfg.InstanceTypes)
	slices.Sort(types)
	return strings.Join([]string{s.cfg.Endpoint, s.region(), s.cfg.Profile, strings.Join(types, ",")}, "\x00")
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
// The spot price history's answer is cached (SpotPrices): Prices may be
// called every cycle.
func (s *Site) Prices(ctx context.Context) ([]glidein.Price, error) {
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
	var spot map[string]float64
	var err error
	if s.spot != nil {
		spot, err = s.spot.get(ctx, s.spotKey(), s.spotPrices)
	} else {
		spot, err = s.spotPrices(ctx)
	}
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
