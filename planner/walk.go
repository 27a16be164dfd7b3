package planner

import (
	"runtime/debug"
)

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
	// A fixed set of workers, rather than a goroutine per vertex: each
	// grows its stack once for the deep recursion of evaluation instead of
	// once per vertex.
	work := make(chan string)
	done := make(chan result, par)
	for range par {
		go func() {
			for v := range work {
				done <- result{v, w.safeRun(v)}
			}
		}()
	}
	defer close(work)
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
			work <- v
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
