package providers

// CostEstimate is what a provider estimates a planned instance costs to
// run, for the plan to show (PlanResponse.Cost): the worst case over what
// the instance may run on.
type CostEstimate struct {
	// Currency of the amounts, such as "USD".
	Currency string
	// Instances is how many machines the instance runs after the change,
	// and HourlyCost what they cost by the hour at most.
	Instances  int
	HourlyCost float64
	// Starts is how many machines the change starts, and StartHourlyCost
	// what they cost by the hour at most.
	Starts          int
	StartHourlyCost float64
	// Offers are what the machines may run on (EC2 instance types), in
	// order of preference, each with its price.
	Offers []OfferPrice
	// Complete is false when an offer has no price: the costs count only
	// the priced ones.
	Complete bool
	// MaxHourlyCost and MaxInstances are the caps that apply to the
	// instance (0: none).
	MaxHourlyCost float64
	MaxInstances  int
}

// OfferPrice is the price of one machine of an offer, by the hour.
type OfferPrice struct {
	Name       string
	HourlyCost float64
	// Known is false when the provider has no price for it.
	Known bool
	// Spot marks a spot (market) price.
	Spot bool
	// Source says where the price comes from.
	Source string
}
