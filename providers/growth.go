package providers

import (
	"fmt"
	"slices"
	"strings"
)

// Growth is one resource's part in a plan-wide count that a provider caps
// (its nodes, its instances): how many it will keep, and how many more
// than it has now.
type Growth struct {
	Address string
	Count   int
	Grows   int
}

// OverCap describes resources whose counts together go over a cap: the
// resource that grows the most (where the error belongs: the one whose
// change tipped the count, ties broken by address) and the counts of all
// as "ADDRESS N" in address order, for the diagnostic's detail. It
// returns "" and nil for no resources.
func OverCap(rs []Growth) (worst string, parts []string) {
	if len(rs) == 0 {
		return "", nil
	}
	byAddr := slices.SortedFunc(slices.Values(rs), func(a, b Growth) int { return strings.Compare(a.Address, b.Address) })
	top := byAddr[0]
	for _, r := range byAddr {
		parts = append(parts, fmt.Sprintf("%s %d", r.Address, r.Count))
		if r.Grows > top.Grows {
			top = r
		}
	}
	return top.Address, parts
}
