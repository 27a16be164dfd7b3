package tools

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/wire"
)

// maxDAGDepth bounds the nesting condor q -dag follows (a DAG job's
// DAGManJobId naming a cycle of jobs is shown flat beyond it).
const maxDAGDepth = 32

// printDAGs prints condor q -dag: one line per job, as -nobatch, each
// DAG node's job (DAGManJobId naming a DAG manager's job in the queue)
// under its DAG manager's job, its OWNER column "|-NODE" indented by the
// nesting of its DAG.
func printDAGs(ctx context.Context, w *bufio.Writer, sc *wire.Schedd, req *wire.QueryJobsRequest, limit int, now time.Time, tot totals) error {
	rows := *req
	rows.Projection = []string{"ClusterId", "ProcId", "Owner", "QDate", "RemoteWallClockTime", "JobStatus", "JobCurrentStartDate",
		"JobPrio", "ImageSize", "Cmd", "Arguments", "Args", "DAGManJobId", "DAGNodeName"}
	var jobs []*classad.Ad
	if err := eachUpTo(ctx, sc, &rows, limit, func(a *classad.Ad) error {
		jobs = append(jobs, a)
		return nil
	}); err != nil {
		return err
	}
	clusters := map[int64]bool{}
	for _, a := range jobs {
		clusters[intAttr(a, "ClusterId")] = true
	}
	children := map[int64][]*classad.Ad{}
	var roots []*classad.Ad
	for _, a := range jobs {
		parent, ok := a.EvalAttr("DAGManJobId").IntValue()
		if ok && parent != intAttr(a, "ClusterId") && clusters[parent] {
			children[parent] = append(children[parent], a)
			continue
		}
		roots = append(roots, a)
	}
	fmt.Fprintf(w, "%-9s %-14s %11s %12s %-2s %-3s %-4s %s\n", " ID", "OWNER/NODENAME", "SUBMITTED", "RUN_TIME", "ST", "PRI", "SIZE", "CMD")
	seen := map[int64]bool{}
	printed := map[*classad.Ad]bool{}
	var print func(a *classad.Ad, depth int) error
	print = func(a *classad.Ad, depth int) error {
		printed[a] = true
		who := strAttr(a, "Owner")
		if depth > 0 {
			who = strings.Repeat(" ", depth) + "|-" + strAttr(a, "DAGNodeName")
		}
		fmt.Fprintf(w, "%6d.%-3d %-14s %11s %12s %-2s %-3d %-4.1f %s\n", intAttr(a, "ClusterId"), intAttr(a, "ProcId"),
			who, time.Unix(intAttr(a, "QDate"), 0).Format("01/02 15:04"), runTime(a, now),
			stLetter[intAttr(a, "JobStatus")], intAttr(a, "JobPrio"), float64(intAttr(a, "ImageSize"))/1024, cmdLine(a))
		tot.add(strAttr(a, "Owner"), int(intAttr(a, "JobStatus")), 1)
		if err := flushSoon(w); err != nil {
			return err
		}
		cl := intAttr(a, "ClusterId")
		if seen[cl] || depth >= maxDAGDepth {
			return nil
		}
		seen[cl] = true
		for _, c := range children[cl] {
			if err := print(c, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	for _, a := range roots {
		if err := print(a, 0); err != nil {
			return err
		}
	}
	// Jobs whose DAGManJobId chain loops have no root: shown on their own.
	for _, a := range jobs {
		if !printed[a] {
			if err := print(a, 0); err != nil {
				return err
			}
		}
	}
	return nil
}
