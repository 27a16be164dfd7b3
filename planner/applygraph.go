package planner

import (
	"sort"
)

// applyNode is one step of an apply: the create/update/read part or the
// delete part of one instance change.
type applyNode struct {
	id      string
	change  *ResourceChange
	destroy bool
	deps    []string
}

// buildApplyGraph turns changes into apply nodes with their ordering.
func buildApplyGraph(p *Plan, infos map[string]*resourceInfo) (map[string]*applyNode, []string, error) {
	nodes := map[string]*applyNode{}
	applyByRes := map[string][]string{}
	destroyByRes := map[string][]string{}
	g := newGraph()
	for _, c := range p.Changes {
		a := c.Addr.String()
		ra := c.Addr.Resource.String()
		switch c.Action {
		case NoOp:
			continue
		case Delete:
			id := "destroy " + a
			nodes[id] = &applyNode{id: id, change: c, destroy: true}
			destroyByRes[ra] = append(destroyByRes[ra], id)
		case DeleteThenCreate, CreateThenDelete:
			did, aid := "destroy "+a, "apply "+a
			nodes[did] = &applyNode{id: did, change: c, destroy: true}
			nodes[aid] = &applyNode{id: aid, change: c}
			destroyByRes[ra] = append(destroyByRes[ra], did)
			applyByRes[ra] = append(applyByRes[ra], aid)
		default:
			id := "apply " + a
			nodes[id] = &applyNode{id: id, change: c}
			applyByRes[ra] = append(applyByRes[ra], id)
		}
	}
	ids := make([]string, 0, len(nodes))
	for id := range nodes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		g.add(id)
	}
	// Reverse dependencies at resource level, from the configuration and
	// from the dependencies recorded for deleted instances.
	dependents := map[string]map[string]bool{}
	addDep := func(from, to string) {
		if dependents[to] == nil {
			dependents[to] = map[string]bool{}
		}
		dependents[to][from] = true
	}
	for a, info := range infos {
		for _, d := range info.deps {
			addDep(a, d)
		}
	}
	for _, c := range p.Changes {
		for _, d := range c.Deps {
			addDep(c.Addr.Resource.String(), d)
		}
	}
	for _, id := range ids {
		n := nodes[id]
		c := n.change
		ra := c.Addr.Resource.String()
		if !n.destroy {
			for _, d := range c.Deps {
				for _, dep := range applyByRes[d] {
					g.connect(id, dep)
				}
			}
			if c.Action == DeleteThenCreate {
				g.connect(id, "destroy "+c.Addr.String())
			}
			continue
		}
		// A destroy waits for the destroys of what depends on it.
		for dep := range dependents[ra] {
			for _, did := range destroyByRes[dep] {
				g.connect(id, did)
			}
		}
		if c.Action == CreateThenDelete {
			g.connect(id, "apply "+c.Addr.String())
			for dep := range dependents[ra] {
				for _, aid := range applyByRes[dep] {
					g.connect(id, aid)
				}
			}
		}
	}
	order, err := g.topo()
	if err != nil {
		return nil, nil, err
	}
	for _, id := range order {
		nodes[id].deps = g.dependencies(id)
	}
	return nodes, order, nil
}
