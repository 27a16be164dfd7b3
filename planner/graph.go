package planner

import (
	"fmt"
	"runtime/debug"
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

// walker runs a function over a DAG with bounded parallelism: a vertex runs
// once every vertex it depends on has succeeded; when one fails, everything
// that depends on it is skipped.
type walker struct {
	// order lists every vertex, dependencies first; deps gives each
	// vertex's dependencies.
	order []string
	deps  func(v string) []string
	par   int
	// run does the work of a vertex and reports success.
	run func(v string) bool
	// skipped is told of every vertex not run, because a dependency failed
	// or stop said so.
	skipped func(v string)
	// stop, if set, is asked before each start; true starts nothing more.
	stop func() bool
	// panicked is told of a panic in run, which then counts as a failure.
	panicked func(v string, r any, stack []byte)
}

func (w *walker) walk() {
	waiting := make(map[string]int, len(w.order))
	dependents := make(map[string][]string, len(w.order))
	var ready []string
	for _, v := range w.order {
		ds := w.deps(v)
		waiting[v] = len(ds)
		for _, d := range ds {
			dependents[d] = append(dependents[d], v)
		}
		if len(ds) == 0 {
			ready = append(ready, v)
		}
	}
	skipped := map[string]bool{}
	var skip func(v string)
	skip = func(v string) {
		for _, d := range dependents[v] {
			if !skipped[d] {
				skipped[d] = true
				if w.skipped != nil {
					w.skipped(d)
				}
				skip(d)
			}
		}
	}
	type result struct {
		v  string
		ok bool
	}
	par := max(w.par, 1)
	done := make(chan result, par)
	running := 0
	for len(ready) > 0 || running > 0 {
		for len(ready) > 0 && running < par {
			v := ready[0]
			ready = ready[1:]
			if w.stop != nil && w.stop() {
				skipped[v] = true
				if w.skipped != nil {
					w.skipped(v)
				}
				skip(v)
				continue
			}
			running++
			go func(v string) { done <- result{v, w.safeRun(v)} }(v)
		}
		if running == 0 {
			break
		}
		r := <-done
		running--
		if !r.ok {
			skip(r.v)
			continue
		}
		for _, d := range dependents[r.v] {
			waiting[d]--
			if waiting[d] == 0 && !skipped[d] {
				ready = append(ready, d)
			}
		}
	}
}

// safeRun runs a vertex, turning a panic (in a provider, say) into a
// failure reported through panicked, so that one broken resource does not
// take the process, its lock and its unsaved state down with it.
func (w *walker) safeRun(v string) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			if w.panicked != nil {
				w.panicked(v, r, debug.Stack())
			}
			ok = false
		}
	}()
	return w.run(v)
}
