package dagman

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Node states of the node status file, as DAGMan numbers them.
const (
	statusNotReady  = 0
	statusReady     = 1
	statusPreRun    = 2
	statusSubmitted = 3
	statusPostRun   = 4
	statusDone      = 5
	statusError     = 6
	statusFutile    = 7
)

// nodeStatus is node r's status number; futile says whether an ancestor
// of a node that is not ready failed.
func (m *Manager) nodeStatus(r *nodeRun, futile map[string]bool) int {
	switch r.st {
	case ready:
		if r.running() {
			return statusPreRun
		}
		return statusReady
	case preRun:
		return statusPreRun
	case submitted:
		return statusSubmitted
	case postRun:
		return statusPostRun
	case done:
		return statusDone
	case failed:
		return statusError
	}
	if m.futile(r, futile) {
		return statusFutile
	}
	return statusNotReady
}

// futile reports whether an ancestor of r failed (memoized in memo).
func (m *Manager) futile(r *nodeRun, memo map[string]bool) bool {
	if v, ok := memo[r.n.Name]; ok {
		return v
	}
	memo[r.n.Name] = false // a DAG has no cycles; this only bounds the walk
	for _, p := range r.n.Parents {
		pr := m.runs[p]
		if pr.st == failed || pr.st == notReady && m.futile(pr, memo) {
			memo[r.n.Name] = true
			return true
		}
	}
	return false
}

// statusPath and dotPath are the node status and DOT files' paths
// (relative ones are relative to the DAG file's directory).
func (m *Manager) relPath(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(m.d.File), p)
}

// writeNodeStatus writes the NODE_STATUS_FILE as DAGMan does: a
// DagStatus ClassAd, a NodeStatus ClassAd for each node, and a StatusEnd
// ClassAd, in the new ClassAd syntax, replaced atomically.
func (m *Manager) writeNodeStatus(end bool, code int) error {
	now := time.Now()
	futile := map[string]bool{}
	counts := make([]int, 8)
	var nodes strings.Builder
	heldProcs, idleProcs := 0, 0
	for _, r := range m.order {
		st := m.nodeStatus(r, futile)
		counts[st]++
		details := ""
		switch {
		case st == statusSubmitted && len(r.idle) > 0:
			details = "idle"
		case st == statusSubmitted:
			details = "not_idle"
		case st == statusError:
			details = r.msg
		case st == statusFutile:
			details = "Had an ancestor node fail"
		}
		queued := 0
		if st == statusSubmitted {
			queued = r.jobs - len(r.ended)
			idleProcs += len(r.idle)
		}
		heldProcs += r.held
		fmt.Fprintf(&nodes, "[\n  Type = \"NodeStatus\";\n  Node = %s;\n  NodeStatus = %d;\n  StatusDetails = %s;\n  RetryCount = %d;\n  JobProcsQueued = %d;\n  JobProcsHeld = %d;\n]\n",
			quote(r.n.Name), st, quote(details), r.retries, queued, r.held)
	}
	dagStatus, details := statusSubmitted, ""
	if end {
		dagStatus = statusDone
		if code != 0 {
			dagStatus, details = statusError, fmt.Sprintf("the DAG exited with %d", code)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[\n  Type = \"DagStatus\";\n  DagFiles = {\n    %s\n  };\n  Timestamp = %d; /* %q */\n  DagStatus = %d;\n  DagStatusDetails = %s;\n",
		quote(filepath.Base(m.d.File)), now.Unix(), now.Format(time.ANSIC), dagStatus, quote(details))
	fmt.Fprintf(&b, "  NodesTotal = %d;\n  NodesDone = %d;\n  NodesPre = %d;\n  NodesQueued = %d;\n  NodesPost = %d;\n  NodesReady = %d;\n  NodesUnready = %d;\n  NodesFutile = %d;\n  NodesFailed = %d;\n  JobProcsHeld = %d;\n  JobProcsIdle = %d;\n]\n",
		len(m.order), counts[statusDone], counts[statusPreRun], counts[statusSubmitted], counts[statusPostRun], counts[statusReady],
		counts[statusNotReady], counts[statusFutile], counts[statusError], heldProcs, idleProcs)
	b.WriteString(nodes.String())
	next := int64(0)
	if !end {
		next = now.Add(m.d.NodeStatusInterval).Unix()
	}
	fmt.Fprintf(&b, "[\n  Type = \"StatusEnd\";\n  EndTime = %d; /* %q */\n  NextUpdate = %d;\n]\n", now.Unix(), now.Format(time.ANSIC), next)
	return writeAtomic(m.relPath(m.d.NodeStatusFile), b.String())
}

// writeAtomic replaces the file at path with text.
func writeAtomic(path, text string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// writeDot writes the DOT file: a Graphviz digraph of the DAG, the
// INCLUDE file's lines at its top; with UPDATE each node's label holds
// its state. With DONT-OVERWRITE each write goes to a new FILE.N.
func (m *Manager) writeDot() error {
	dot := m.d.Dot
	var b strings.Builder
	b.WriteString("digraph DAG {\n")
	if dot.Include != "" {
		inc, err := readBounded(m.relPath(dot.Include))
		if err != nil {
			return fmt.Errorf("DOT INCLUDE: %w", err)
		}
		b.Write(inc)
		if len(inc) > 0 && inc[len(inc)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	futile := map[string]bool{}
	for _, r := range m.order {
		shape := "ellipse"
		if r.n.SubDAG {
			shape = "rect"
		}
		label := r.n.Name
		if dot.Update {
			label += " (" + stateNames[min(int(r.st), len(stateNames)-1)] + ")"
			if m.nodeStatus(r, futile) == statusFutile {
				label = r.n.Name + " (FUTILE)"
			}
		}
		style := ""
		if r.n.Final {
			style = " style=bold"
		}
		fmt.Fprintf(&b, "    %s [shape=%s label=%s%s];\n", dotID(r.n.Name), shape, dotID(label), style)
	}
	for _, r := range m.order {
		for _, c := range r.n.Children {
			fmt.Fprintf(&b, "    %s -> %s;\n", dotID(r.n.Name), dotID(c))
		}
	}
	b.WriteString("}\n")
	path := m.relPath(dot.File)
	if !dot.Overwrite {
		for i := 0; ; i++ {
			p := fmt.Sprintf("%s.%d", path, i)
			if _, err := os.Stat(p); os.IsNotExist(err) {
				path = p
				break
			}
			if i >= 100000 {
				return fmt.Errorf("DOT DONT-OVERWRITE: %s.0 to .%d exist", path, i)
			}
		}
	}
	return writeAtomic(path, b.String())
}

// dotID is s as a Graphviz quoted ID.
func dotID(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}
