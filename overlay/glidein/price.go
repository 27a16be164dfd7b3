package glidein

import "context"

// Price is what one glidein of a site costs by the hour on one of the
// offers it may be started on (an EC2 instance type).
type Price struct {
	// Offer names what the glidein runs on, such as "c7i.large".
	Offer string
	// USDPerHour is the price of one glidein for an hour, in US dollars;
	// meaningless when Known is false.
	USDPerHour float64
	// Known is false when the site has no price for Offer.
	Known bool
	// Spot says USDPerHour is a spot price (it changes with the market).
	Spot bool
	// Source says where USDPerHour comes from, such as "on-demand table"
	// or "spot price history".
	Source string
	// Note, when not empty, says why the price is not the one asked for,
	// such as a spot price the market did not give, replaced by the
	// on-demand one.
	Note string
}

// Pricer is implemented by a site whose glideins cost money by the hour
// (EC2). A site without it has no prices: nothing can be said of what its
// glideins cost, and a budget cannot be checked.
type Pricer interface {
	// Prices returns the price of one glidein on each offer the site may
	// start glideins on, in the site's order of preference. A price the
	// site cannot find has Known false; an error means the site could not
	// be asked at all.
	Prices(ctx context.Context) ([]Price, error)
}

// Offer is one kind of machine a site may start a glidein on (an EC2
// instance type), with what the machine has: what the glidein's startd
// offers when the glidein has the whole machine.
type Offer struct {
	// Name names it, such as "c7i.large": Request.Offers and Price.Offer
	// use that name.
	Name string
	// CPUs, MemoryMB and GPUs are the machine's; Known is false when the
	// site does not know them (an instance type missing from its table).
	CPUs     int
	MemoryMB int
	GPUs     int
	Known    bool
}

// Offerer is implemented by a site that starts glideins on machines of
// several kinds (EC2's instance types), so that a caller chooses the kind
// that fits the jobs (Request.Offers).
type Offerer interface {
	// Offers returns the site's offers, in its order of preference.
	Offers() []Offer
}
