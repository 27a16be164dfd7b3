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

// applyGraph is the apply nodes of a plan, and their ids by resource
// address.
type applyGraph struct {
	g            *graph
	nodes        map[string]*applyNode
	applyByRes   map[string][]string
	destroyByRes map[string][]string
}

// buildApplyGraph turns changes into apply nodes with their ordering.
func buildApplyGraph(p *Plan, infos map[string]*resourceInfo) (map[string]*applyNode, []string, error) {
	ag := newApplyGraph(p)
	dependents := resourceDependents(p, infos)
	for _, id := range ag.g.order {
		if n := ag.nodes[id]; n.destroy {
			ag.connectDestroy(n, dependents)
		} else {
			ag.connectApply(n)
		}
	}
	order, err := ag.g.topo()
	if err != nil {
		return nil, nil, err
	}
	for _, id := range order {
		ag.nodes[id].deps = ag.g.dependencies(id)
	}
	return ag.nodes, order, nil
}

// newApplyGraph makes the nodes of every change that does something: one
// for a create, update, read or delete, two for a replacement. They are
// added to the graph in id order.
func newApplyGraph(p *Plan) *applyGraph {
	ag := &applyGraph{g: newGraph(), nodes: map[string]*applyNode{}, applyByRes: map[string][]string{}, destroyByRes: map[string][]string{}}
	for _, c := range p.Changes {
		a := c.Addr.String()
		ra := c.Addr.ResourceAddress().String()
		switch c.Action {
		case NoOp, Forget:
			continue
		case Delete:
			id := "destroy " + a
			ag.nodes[id] = &applyNode{id: id, change: c, destroy: true}
			ag.destroyByRes[ra] = append(ag.destroyByRes[ra], id)
		case DeleteThenCreate, CreateThenDelete:
			did, aid := "destroy "+a, "apply "+a
			ag.nodes[did] = &applyNode{id: did, change: c, destroy: true}
			ag.nodes[aid] = &applyNode{id: aid, change: c}
			ag.destroyByRes[ra] = append(ag.destroyByRes[ra], did)
			ag.applyByRes[ra] = append(ag.applyByRes[ra], aid)
		default:
			id := "apply " + a
			ag.nodes[id] = &applyNode{id: id, change: c}
			ag.applyByRes[ra] = append(ag.applyByRes[ra], id)
		}
	}
	ids := make([]string, 0, len(ag.nodes))
	for id := range ag.nodes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		ag.g.add(id)
	}
	return ag
}

// resourceDependents returns, by resource address, the resources that
// depend on it: from the configuration and from the dependencies recorded
// for deleted instances.
func resourceDependents(p *Plan, infos map[string]*resourceInfo) map[string]map[string]bool {
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
			addDep(c.Addr.ResourceAddress().String(), d)
		}
	}
	return dependents
}

// connectApply makes a create, update or read wait for what its resource
// depends on, and the create of a delete-then-create for its delete.
func (ag *applyGraph) connectApply(n *applyNode) {
	c := n.change
	for _, d := range c.Deps {
		for _, dep := range ag.applyByRes[d] {
			ag.g.connect(n.id, dep)
		}
	}
	if c.Action == DeleteThenCreate {
		ag.g.connect(n.id, "destroy "+c.Addr.String())
	}
}

// connectDestroy makes a delete wait for the deletes of what depends on
// it; the delete of a create-then-delete also waits for its create and for
// the creates and updates of what depends on it.
func (ag *applyGraph) connectDestroy(n *applyNode, dependents map[string]map[string]bool) {
	c := n.change
	ra := c.Addr.ResourceAddress().String()
	for dep := range dependents[ra] {
		for _, did := range ag.destroyByRes[dep] {
			ag.g.connect(n.id, did)
		}
	}
	if c.Action == CreateThenDelete {
		ag.g.connect(n.id, "apply "+c.Addr.String())
		for dep := range dependents[ra] {
			for _, aid := range ag.applyByRes[dep] {
				ag.g.connect(n.id, aid)
			}
		}
	}
}
