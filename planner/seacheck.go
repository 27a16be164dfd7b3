package planner

import (
	"context"
	"fmt"

	"github.com/hashicorp/hcl/v2"

	"github.com/pond-htc/pond/providers"
)

// checkSea makes sure that something answers at the sea address the
// providers are given (pond { sea { address } }, -sea or POND_SEA_ADDR)
// before a plan proposes to start anything there: the pools would
// otherwise be started, wait for the sea in vain and fail the apply. The
// error is at the address argument when it comes from the configuration.
func (e *Engine) checkSea(ctx context.Context) hcl.Diagnostics {
	addr := e.opts.SeaAddr
	if addr == "" {
		return nil
	}
	e.logger.Debug("probing the sea", "sea", addr)
	err := providers.ProbeSea(ctx, e.cfg.Dir, addr)
	if err == nil {
		return nil
	}
	var subject *hcl.Range
	from := "the -sea option or POND_SEA_ADDR"
	if p := e.cfg.Pond; p != nil && p.Sea != nil && p.Sea.Address == addr {
		subject = p.Sea.AddressRange.Ptr()
		from = "pond { sea { address } }"
	}
	return hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Sea unreachable",
		Detail: fmt.Sprintf("The sea address %s (from %s) is where pools join the sea and where ponds, flocks and queries look for its members, and %v.\n\n"+
			"Start an agent of the sea there first (apply the working directory that runs it), or correct the address.", addr, from, err),
		Subject: subject,
	}}
}
