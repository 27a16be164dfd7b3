package member

import (
	"strconv"
	"strings"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/overlay/api"
)

// Stamps returns the attributes a membership stamps on the node's ads,
// as ClassAd expression text.
func Stamps(m *api.Membership) map[string]string {
	if m == nil {
		return nil
	}
	out := map[string]string{"PondName": strconv.Quote(m.Pond), "PondID": strconv.Quote(m.PondID)}
	if len(m.JobIDs) > 0 {
		out["PondJobIds"] = strconv.Quote(strings.Join(m.JobIDs, ","))
	}
	for k, v := range m.Attributes {
		if !api.ValidAttrName(k) {
			continue
		}
		if _, err := classad.ParseExpr(v); err != nil || strings.ContainsAny(v, "\r\n") {
			v = strconv.Quote(v)
		}
		out[k] = v
	}
	return out
}
