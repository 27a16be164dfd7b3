package sea

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/zclconf/go-cty/cty"
)

// maxJobIDs bounds a pond's job_ids: they are stamped on every member's
// machine ad.
const maxJobIDs = 1000

// jobIDPattern is a job id, CLUSTER.PROC.
var jobIDPattern = regexp.MustCompile(`^[0-9]{1,9}\.[0-9]{1,9}$`)

// jobIDsOf reads a pond's job_ids: each a CLUSTER.PROC job id, at most
// maxJobIDs of them.
func jobIDsOf(v cty.Value) ([]string, error) {
	if v.IsNull() || !v.IsWhollyKnown() {
		return nil, nil
	}
	if v.LengthInt() > maxJobIDs {
		return nil, fmt.Errorf("%d job ids: at most %d", v.LengthInt(), maxJobIDs)
	}
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, e := it.Element()
		if e.IsNull() {
			return nil, errors.New("a null job id")
		}
		id := e.AsString()
		if !jobIDPattern.MatchString(id) {
			return nil, fmt.Errorf("%q is not a job id such as \"12.0\" (CLUSTER.PROC)", id)
		}
		out = append(out, id)
	}
	return out, nil
}
