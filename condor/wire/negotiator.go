package wire

import "context"

// pathReschedule asks the negotiator for a cycle (condor_reschedule); the
// request and answer are empty JSON objects.
const pathReschedule = "negotiator/reschedule"

// Match is one job matched to a slot by the negotiator.
type Match struct {
	JobID    string `json:"job_id"`
	SlotName string `json:"slot_name"`
	Startd   string `json:"startd"` // the startd's API address
	ClaimID  string `json:"claim_id"`
	Slot     Ad     `json:"slot"`
	// Epoch is the epoch of the central manager whose negotiator made the
	// match (EpochKnob); the schedd claims the slot with it, and a startd
	// refuses a claim of an epoch lower than the highest it has seen, so
	// that a replaced negotiator hands out no slot the new one may hand
	// out too. Zero for a pool without fail-over.
	Epoch int64 `json:"epoch,omitempty"`
	// Preempt says the slot is claimed and ClaimID its preempting claim:
	// the startd grants the claim once the job it runs has retired or
	// been vacated, which may take the job's retirement time.
	Preempt bool `json:"preempt,omitempty"`
	// Preempts, for a match to a partitionable slot (ClaimID its claim
	// id) with ALLOW_PSLOT_PREEMPTION, are the dynamic slots of it the
	// job preempts: the startd vacates their jobs and carves the job's
	// dynamic slot from their resources and the free ones.
	Preempts []PreemptedSlot `json:"preempts,omitempty"`
}

// PreemptedSlot is a dynamic slot a match preempts: its name and its
// preempting claim id (the one it advertises privately).
type PreemptedSlot struct {
	SlotName string `json:"slot_name"`
	ClaimID  string `json:"claim_id"`
}

// EpochKnob is the configuration knob that gives a pool's daemons the
// epoch of the central manager they follow: the negotiator stamps its
// matches with it, and the startd and schedd refuse claims and matches of
// a lower epoch. A pool without fail-over leaves it unset (epoch 0, no
// fencing).
const EpochKnob = "POND_CM_EPOCH"

// Negotiator is a client of a pool's negotiator.
type Negotiator struct{ c *Client }

// NewNegotiator returns a client of the negotiator served at addr (the
// central manager's API address) presenting token.
func NewNegotiator(addr, token string) *Negotiator { return NewClient(addr, token).Negotiator() }

// Negotiator returns a client of the negotiator of c's node.
func (c *Client) Negotiator() *Negotiator { return &Negotiator{c} }

// Addr returns the API address of the negotiator's node.
func (c *Negotiator) Addr() string { return c.c.Addr }

// Reschedule asks for a negotiation cycle soon (condor_reschedule).
func (c *Negotiator) Reschedule(ctx context.Context) error {
	return c.c.Call(ctx, pathReschedule, struct{}{}, nil)
}
