package classad

import "sort"

// References returns the attribute names e refers to, split into those it
// reads from its own ad (bare names and MY.x) and those it reads from the
// match target (TARGET.x). Names are lower-cased, sorted and unique. The
// negotiator uses them to group jobs by the attributes that matter.
func References(e Expr) (my, target []string) {
	ms := map[string]bool{}
	ts := map[string]bool{}
	collectRefs(e, ms, ts)
	return sortedKeys(ms), sortedKeys(ts)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func collectRefs(e Expr, my, target map[string]bool) {
	switch n := e.(type) {
	case *attrNode:
		switch {
		case n.base == nil && !n.absolute:
			switch n.lname {
			case "my", "target", "parent":
			default:
				my[n.lname] = true
			}
		case n.scope == scopeMy:
			my[n.lname] = true
		case n.scope == scopeTarget:
			target[n.lname] = true
		case n.base != nil:
			collectRefs(n.base, my, target)
		}
	case *indexNode:
		collectRefs(n.base, my, target)
		collectRefs(n.idx, my, target)
	case *unaryNode:
		collectRefs(n.x, my, target)
	case *binaryNode:
		collectRefs(n.x, my, target)
		collectRefs(n.y, my, target)
	case *condNode:
		collectRefs(n.c, my, target)
		collectRefs(n.t, my, target)
		collectRefs(n.e, my, target)
	case *elvisNode:
		collectRefs(n.x, my, target)
		collectRefs(n.y, my, target)
	case *parenNode:
		collectRefs(n.x, my, target)
	case *callNode:
		for _, a := range n.args {
			collectRefs(a, my, target)
		}
	case *listNode:
		for _, x := range n.elems {
			collectRefs(x, my, target)
		}
	}
}
