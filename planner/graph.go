package planner

import (
	"fmt"
	"sort"
	"strings"
)

// graph is a directed graph of string-named vertices; an edge a→b means a
// depends on b (b must be handled first).
type graph struct {
	deps  map[string]map[string]struct{}
	order []string // insertion order, for deterministic walks
}

func newGraph() *graph { return &graph{deps: map[string]map[string]struct{}{}} }

func (g *graph) add(v string) {
	if _, ok := g.deps[v]; !ok {
		g.deps[v] = map[string]struct{}{}
		g.order = append(g.order, v)
	}
}

// connect records that from depends on to. Both must have been added.
func (g *graph) connect(from, to string) {
	if from == to {
		return
	}
	g.deps[from][to] = struct{}{}
}

// dependencies returns the direct dependencies of v, sorted.
func (g *graph) dependencies(v string) []string {
	out := make([]string, 0, len(g.deps[v]))
	for d := range g.deps[v] {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// topo returns the vertices with every vertex after its dependencies, or an
// error naming the vertices of a cycle.
func (g *graph) topo() ([]string, error) {
	indeg := make(map[string]int, len(g.deps))
	rev := make(map[string][]string, len(g.deps))
	for _, v := range g.order {
		indeg[v] = len(g.deps[v])
		for d := range g.deps[v] {
			rev[d] = append(rev[d], v)
		}
	}
	queue := make([]string, 0, len(g.order))
	for _, v := range g.order {
		if indeg[v] == 0 {
			queue = append(queue, v)
		}
	}
	out := make([]string, 0, len(g.order))
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		out = append(out, v)
		for _, w := range rev[v] {
			indeg[w]--
			if indeg[w] == 0 {
				queue = append(queue, w)
			}
		}
	}
	if len(out) == len(g.order) {
		return out, nil
	}
	return nil, &CycleError{Cycle: g.findCycle(indeg)}
}

// findCycle returns one cycle among the vertices left with in-degree > 0.
func (g *graph) findCycle(indeg map[string]int) []string {
	var start string
	for _, v := range g.order {
		if indeg[v] > 0 {
			start = v
			break
		}
	}
	seen := map[string]int{}
	path := []string{}
	v := start
	for {
		if i, ok := seen[v]; ok {
			return append(path[i:], v)
		}
		seen[v] = len(path)
		path = append(path, v)
		next := ""
		for _, d := range g.dependencies(v) {
			if indeg[d] > 0 {
				next = d
				break
			}
		}
		if next == "" {
			return path
		}
		v = next
	}
}

// CycleError reports a dependency cycle.
type CycleError struct {
	Cycle []string
}

func (e *CycleError) Error() string {
	return fmt.Sprintf("dependency cycle: %s", strings.Join(e.Cycle, " → "))
}
