package providers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/overlay/api"
)

// SeaProbeTimeout bounds ProbeSea.
const SeaProbeTimeout = 5 * time.Second

// ProbeSea asks the agent at the sea address addr who it is, with the TLS
// pondctl's commands and the providers call agents with (the sea's CA the
// working directory workDir finds: its .pond/auth, POND_AUTHORITY or
// POND_TLS_CA), for at most SeaProbeTimeout. It returns an error only when
// nothing answers there: the address does not resolve, nothing listens, or
// no answer came in time. An agent that answers but refuses the working
// directory (another sea's authority) has answered: the provider that
// joins it says what to do about that.
func ProbeSea(ctx context.Context, workDir, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, SeaProbeTimeout)
	defer cancel()
	c := api.NewClient(addr)
	tlsCfg, err := auth.FindClientTLS(os.Getenv, workDir)
	if err != nil {
		// The sea's CA cannot be read: try the address all the same, since
		// whatever answers there answers the question asked here.
		tlsCfg = nil
	}
	// No token: an agent that refuses the call has answered all the same,
	// and a probe has no need to send a credential anywhere.
	_, err = c.WithTLS(tlsCfg).Self(ctx)
	if err == nil || !NoAnswer(err) {
		return nil
	}
	how := "over plain HTTP, the working directory having no sea CA"
	if tlsCfg != nil {
		how = "over TLS with the working directory's sea CA"
	}
	return fmt.Errorf("nothing answered there: pondctl asked the agent at %s who it is (GET %s, %s, for up to %v): %w", addr, api.PathSelf, how, SeaProbeTimeout, err)
}

// NoAnswer reports whether err, of a call to an agent, shows that nothing
// answered at its address: a name that does not resolve, a failed dial, or
// a call that timed out. Any other error (a refusal, a TLS handshake with
// another sea's certificate) came from something that answered.
func NoAnswer(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var dnsErr *net.DNSError
	var addrErr *net.AddrError
	if errors.As(err, &dnsErr) || errors.As(err, &addrErr) {
		return true
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
