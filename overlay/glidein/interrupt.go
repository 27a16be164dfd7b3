package glidein

// Reasons a glidein drains at once when its machine is about to be taken
// away (see Runtime.Interrupt).
const (
	// ReasonSpotInterruption: the cloud said the instance is interrupted
	// (an EC2 spot interruption notice).
	ReasonSpotInterruption = "spot-interruption"
	// ReasonRebalance: the cloud recommended moving off the instance
	// before it is interrupted (an EC2 rebalance recommendation).
	ReasonRebalance = "rebalance-recommendation"
)

// Interrupt asks a running glidein to drain at once and end, for reason
// (such as ReasonSpotInterruption) with message saying more: it takes no
// new job, and its running jobs are evicted, back to their schedds'
// queues. Run returns the Ending once drained. Only the first interrupt
// counts; one that comes before Run waits for it.
func (r *Runtime) Interrupt(reason, message string) {
	select {
	case r.interrupts <- Ending{Reason: reason, Message: message}:
	default:
	}
}
