package tools

import "time"

// SetCommitWait makes condor_submit stop asking after a lost commit
// answer once d has passed, with short waits between its questions,
// until the returned function restores the policy.
func SetCommitWait(d time.Duration) (restore func()) {
	old := submitCommit
	submitCommit = commitPolicy{Backoff: []time.Duration{50 * time.Millisecond, 100 * time.Millisecond}, Wait: d}
	return func() { submitCommit = old }
}

// Summary is condor q's summary of a query, as the tool gets it.
var Summary = summary
