package wire

// PathReschedule asks the negotiator for a cycle (condor_reschedule); the
// request and answer are empty JSON objects.
const PathReschedule = "negotiator/reschedule"

// Match is one job matched to a slot by the negotiator.
type Match struct {
	JobID    string `json:"job_id"`
	SlotName string `json:"slot_name"`
	Startd   string `json:"startd"` // the startd's API address
	ClaimID  string `json:"claim_id"`
	Slot     Ad     `json:"slot"`
}
