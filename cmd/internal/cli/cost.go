package cli

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/pond-htc/pond/providers"
)

// jsonCost is a provider's cost estimate of a planned instance in plan
// -json (resource_changes[].cost).
type jsonCost struct {
	Currency        string          `json:"currency"`
	Instances       int             `json:"instances"`
	HourlyCost      float64         `json:"hourly_cost"`
	Starts          int             `json:"starts"`
	StartHourlyCost float64         `json:"start_hourly_cost"`
	InstanceTypes   []jsonOfferCost `json:"instance_types"`
	Complete        bool            `json:"complete"`
	MaxHourlyCost   float64         `json:"max_hourly_cost,omitempty"`
	MaxInstances    int             `json:"max_instances,omitempty"`
}

type jsonOfferCost struct {
	Name       string   `json:"name"`
	HourlyCost *float64 `json:"hourly_cost"`
	Spot       bool     `json:"spot,omitempty"`
	Source     string   `json:"source,omitempty"`
}

func costJSON(c *providers.CostEstimate) *jsonCost {
	if c == nil {
		return nil
	}
	out := &jsonCost{Currency: c.Currency, Instances: c.Instances, HourlyCost: roundMoney(c.HourlyCost),
		Starts: c.Starts, StartHourlyCost: roundMoney(c.StartHourlyCost), Complete: c.Complete,
		MaxHourlyCost: c.MaxHourlyCost, MaxInstances: c.MaxInstances, InstanceTypes: []jsonOfferCost{}}
	for _, o := range c.Offers {
		j := jsonOfferCost{Name: o.Name, Spot: o.Spot, Source: o.Source}
		if o.Known {
			v := o.HourlyCost
			j.HourlyCost = &v
		}
		out.InstanceTypes = append(out.InstanceTypes, j)
	}
	return out
}

// roundMoney rounds an amount to a thousandth of a cent.
func roundMoney(v float64) float64 { return math.Round(v*1e5) / 1e5 }

// money formats an amount in currency, such as $0.357.
func money(v float64, currency string) string {
	s := strconv.FormatFloat(roundMoney(v), 'f', -1, 64)
	if currency == "" || currency == "USD" {
		return "$" + s
	}
	return s + " " + currency
}

func instances(n int) string {
	if n == 1 {
		return "1 instance"
	}
	return strconv.Itoa(n) + " instances"
}

// costLines are the lines the text plan shows under an instance with a
// cost estimate: what it may run on, and what it costs by the hour.
func costLines(c *providers.CostEstimate) []string {
	if c == nil {
		return nil
	}
	var offers []string
	for _, o := range c.Offers {
		switch {
		case !o.Known:
			offers = append(offers, o.Name+" (no price)")
		case o.Spot:
			offers = append(offers, fmt.Sprintf("%s at %s/hour (spot)", o.Name, money(o.HourlyCost, c.Currency)))
		default:
			offers = append(offers, fmt.Sprintf("%s at %s/hour", o.Name, money(o.HourlyCost, c.Currency)))
		}
	}
	lines := []string{"may launch " + strings.Join(offers, ", ")}
	est := fmt.Sprintf("estimated cost: up to %s/hour for what it starts (%s), up to %s/hour in all (%s)",
		money(c.StartHourlyCost, c.Currency), instances(c.Starts), money(c.HourlyCost, c.Currency), instances(c.Instances))
	if !c.Complete {
		est += " (instance types without a price not counted)"
	}
	var caps []string
	if c.MaxHourlyCost > 0 {
		caps = append(caps, "max_hourly_cost "+money(c.MaxHourlyCost, c.Currency))
	}
	if c.MaxInstances > 0 {
		caps = append(caps, fmt.Sprintf("max_instances %d", c.MaxInstances))
	}
	if len(caps) > 0 {
		est += "; " + strings.Join(caps, ", ")
	}
	return append(lines, est)
}
