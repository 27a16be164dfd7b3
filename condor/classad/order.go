package classad

import "slices"

// htcondorOrder returns attrs in the order HTCondor 25 keeps and prints an
// ad's attributes: shorter names first, names of one length compared
// case-insensitively (as lower case). Ads print in this order in new
// syntax, as classad_eval, unparse() and string() print them.
func htcondorOrder(attrs []*attr) []*attr {
	if len(attrs) < 2 {
		return attrs
	}
	out := slices.Clone(attrs)
	slices.SortStableFunc(out, func(x, y *attr) int { return compareAttrNames(x.name, y.name) })
	return out
}

func compareAttrNames(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	for i := 0; i < len(a); i++ {
		ca, cb := a[i], b[i]
		if ca >= 'A' && ca <= 'Z' {
			ca += 'a' - 'A'
		}
		if cb >= 'A' && cb <= 'Z' {
			cb += 'a' - 'A'
		}
		if ca != cb {
			return int(ca) - int(cb)
		}
	}
	return 0
}
