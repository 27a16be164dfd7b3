package jobqueue

import (
	"fmt"
	"strings"
)

// Column is one of the values the queue keeps of each job beside its ad,
// equal to the ad's attribute of the same name, and indexes.
type Column int

// The indexed columns.
const (
	ClusterCol Column = iota + 1 // ClusterId
	ProcCol                      // ProcId
	StatusCol                    // JobStatus
	OwnerCol                     // Owner
)

func (c Column) sql() string {
	switch c {
	case ClusterCol:
		return "cluster"
	case ProcCol:
		return "proc"
	case StatusCol:
		return "status"
	case OwnerCol:
		return "owner"
	}
	return ""
}

// CmpOp is a comparison a Filter makes.
type CmpOp string

// The comparisons.
const (
	Eq CmpOp = "="
	Ne CmpOp = "!="
	Lt CmpOp = "<"
	Le CmpOp = "<="
	Gt CmpOp = ">"
	Ge CmpOp = ">="
)

func (o CmpOp) valid() bool {
	switch o {
	case Eq, Ne, Lt, Le, Gt, Ge:
		return true
	}
	return false
}

type filterKind uint8

const (
	filterAll filterKind = iota // every job
	filterCmp
	filterAnd
	filterOr
)

// Filter is a condition on the indexed columns of the jobs, which the
// database tests before any ad is read. Its zero value accepts every job.
// A Selector's Filter must accept every job its Constraint accepts: it
// narrows the jobs the Constraint is asked about, never the answer.
type Filter struct {
	kind filterKind
	col  Column
	op   CmpOp
	val  any  // int64, or string for OwnerCol
	fold bool // string comparison without regard to ASCII case
	kids []Filter
}

// IntFilter compares an integer column (ClusterCol, ProcCol or StatusCol)
// with v. Any other column or operator accepts every job.
func IntFilter(c Column, op CmpOp, v int64) Filter {
	if c == OwnerCol || c.sql() == "" || !op.valid() {
		return Filter{}
	}
	return Filter{kind: filterCmp, col: c, op: op, val: v}
}

// OwnerIs accepts the jobs whose Owner is owner: exactly, or with fold
// regardless of the case of ASCII letters, as ClassAd's == compares
// strings.
func OwnerIs(owner string, fold bool) Filter {
	return Filter{kind: filterCmp, col: OwnerCol, op: Eq, val: owner, fold: fold}
}

// AllOf accepts the jobs every one of fs accepts.
func AllOf(fs ...Filter) Filter {
	out := Filter{kind: filterAnd}
	for _, f := range fs {
		switch f.kind {
		case filterAll:
		case filterAnd:
			out.kids = append(out.kids, f.kids...)
		default:
			out.kids = append(out.kids, f)
		}
	}
	if len(out.kids) == 0 {
		return Filter{}
	}
	if len(out.kids) == 1 {
		return out.kids[0]
	}
	return out
}

// AnyOf accepts the jobs one of fs accepts.
func AnyOf(fs ...Filter) Filter {
	out := Filter{kind: filterOr}
	for _, f := range fs {
		switch f.kind {
		case filterAll:
			return Filter{}
		case filterOr:
			out.kids = append(out.kids, f.kids...)
		default:
			out.kids = append(out.kids, f)
		}
	}
	if len(out.kids) == 0 {
		return Filter{}
	}
	if len(out.kids) == 1 {
		return out.kids[0]
	}
	return out
}

// All reports whether f accepts every job.
func (f Filter) All() bool { return f.kind == filterAll }

// String renders f as SQL over the job columns, for logs and tests.
func (f Filter) String() string {
	s, args := f.sql("j")
	if s == "" {
		return "every job"
	}
	parts := strings.Split(s, "?")
	var b strings.Builder
	for i, p := range parts {
		b.WriteString(p)
		if i < len(args) {
			if str, ok := args[i].(string); ok {
				b.WriteString("'" + strings.ReplaceAll(str, "'", "''") + "'")
			} else {
				fmt.Fprint(&b, args[i])
			}
		}
	}
	return b.String()
}

// sql renders f over table alias t; "" when it accepts every job.
func (f Filter) sql(t string) (string, []any) {
	switch f.kind {
	case filterCmp:
		s := t + "." + f.col.sql() + " " + string(f.op) + " ?"
		if f.fold {
			s += " COLLATE NOCASE"
		}
		return s, []any{f.val}
	case filterAnd, filterOr:
		sep := " AND "
		if f.kind == filterOr {
			sep = " OR "
		}
		parts := make([]string, 0, len(f.kids))
		var args []any
		for _, k := range f.kids {
			s, a := k.sql(t)
			if s == "" {
				if f.kind == filterOr {
					return "", nil
				}
				continue
			}
			parts = append(parts, "("+s+")")
			args = append(args, a...)
		}
		return strings.Join(parts, sep), args
	}
	return "", nil
}
