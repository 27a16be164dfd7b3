package config

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

const (
	ansiReset     = "\x1b[0m"
	ansiBold      = "\x1b[1m"
	ansiUnderline = "\x1b[4m"
	ansiRed       = "\x1b[31m"
	ansiYellow    = "\x1b[33m"
)

// WriteDiagnostics prints diagnostics the way Terraform does: the severity
// and summary, "on FILE line N, in BLOCK:", a numbered snippet of the source
// with the subject underlined, the values of the variables the expression
// used (when the diagnostic carries them), then the detail. files supplies
// the sources for snippets; a diagnostic whose file is missing is printed
// without one. With color false the subject is marked with carets on the
// following line instead of ANSI underlining.
func WriteDiagnostics(w io.Writer, files map[string]*hcl.File, diags hcl.Diagnostics, color bool) error {
	bw := bufio.NewWriter(w)
	for _, d := range diags {
		writeDiagnostic(bw, files, d, color)
	}
	return bw.Flush()
}

func writeDiagnostic(w *bufio.Writer, files map[string]*hcl.File, d *hcl.Diagnostic, color bool) {
	sev, col := "Error", ansiRed
	if d.Severity == hcl.DiagWarning {
		sev, col = "Warning", ansiYellow
	}
	w.WriteString("\n")
	if color {
		fmt.Fprintf(w, "%s%s%s: %s%s\n", ansiBold, col, sev, ansiReset+ansiBold+d.Summary, ansiReset)
	} else {
		fmt.Fprintf(w, "%s: %s\n", sev, d.Summary)
	}
	if d.Subject != nil {
		writeSnippet(w, files, d, color)
	}
	if d.Detail != "" {
		w.WriteString("\n")
		w.WriteString(d.Detail)
		w.WriteString("\n")
	}
}

func writeSnippet(w *bufio.Writer, files map[string]*hcl.File, d *hcl.Diagnostic, color bool) {
	subj := *d.Subject
	file := files[subj.Filename]
	where := ""
	if file != nil {
		if blk := file.OutermostBlockAtPos(subj.Start); blk != nil {
			where = ", in " + blockHeader(blk)
		}
	}
	fmt.Fprintf(w, "\n  on %s line %d%s:\n", subj.Filename, subj.Start.Line, where)
	if file == nil || len(file.Bytes) == 0 {
		return
	}
	ctx := subj
	if d.Context != nil {
		ctx = hcl.RangeOver(*d.Context, subj)
	}
	lines := strings.Split(string(file.Bytes), "\n")
	width := len(fmt.Sprint(ctx.End.Line))
	lineStart := 0 // byte offset of line n in the file
	for n := 1; n < ctx.Start.Line && n <= len(lines); n++ {
		lineStart += len(lines[n-1]) + 1
	}
	for n := ctx.Start.Line; n <= ctx.End.Line && n <= len(lines); n, lineStart = n+1, lineStart+len(lines[n-1])+1 {
		line := strings.TrimRight(lines[n-1], "\r")
		// Byte offsets of the subject within this line.
		from, to := -1, -1
		if n >= subj.Start.Line && n <= subj.End.Line {
			from, to = 0, len(line)
			if n == subj.Start.Line {
				from = lineOffset(line, lineStart, subj.Start)
			} else {
				// Continuation lines: underline from the first
				// non-blank character.
				from = len(line) - len(strings.TrimLeft(line, " \t"))
			}
			if n == subj.End.Line {
				to = lineOffset(line, lineStart, subj.End)
			}
			if to < from {
				to = from
			}
		}
		if color && from >= 0 && to > from {
			fmt.Fprintf(w, "  %*d: %s%s%s%s\n", width, n, line[:from], ansiUnderline, line[from:to], ansiReset+line[to:])
			continue
		}
		fmt.Fprintf(w, "  %*d: %s\n", width, n, line)
		if !color && from >= 0 {
			marks := max(1, len([]rune(line[from:to])))
			fmt.Fprintf(w, "  %*s  %s%s\n", width, "", strings.Repeat(" ", len([]rune(line[:from]))), strings.Repeat("^", marks))
		}
	}
	writeExprValues(w, d)
}

// lineOffset returns the byte offset in line, which starts at byte
// lineStart of its file, of p, a position on that line. The byte offset of
// p is used when it lies on the line: columns count characters as hcl sees
// them, which is not how invalid UTF-8 is printed. The column is the
// fallback.
func lineOffset(line string, lineStart int, p hcl.Pos) int {
	if off := p.Byte - lineStart; off >= 0 && off <= len(line) && (p.Byte != 0 || p.Line == 1) {
		return off
	}
	return charToByte(line, min(max(p.Column-1, 0), len(line)))
}

// charToByte converts a character offset in line to a byte offset.
func charToByte(line string, chars int) int {
	if chars < 0 {
		return chars
	}
	i := 0
	for b := range line {
		if i == chars {
			return b
		}
		i++
	}
	return len(line)
}

// writeExprValues prints, like Terraform, the values the failing
// expression's variables had.
func writeExprValues(w *bufio.Writer, d *hcl.Diagnostic) {
	if d.Expression == nil || d.EvalContext == nil {
		return
	}
	seen := map[string]bool{}
	var lines []string
	for _, tr := range d.Expression.Variables() {
		name := traversalString(tr)
		if seen[name] {
			continue
		}
		seen[name] = true
		v, diags := tr.TraverseAbs(d.EvalContext)
		if diags.HasErrors() {
			continue
		}
		lines = append(lines, fmt.Sprintf("    │ %s is %s", name, compactValue(v)))
	}
	sort.Strings(lines)
	if len(lines) == 0 {
		return
	}
	w.WriteString("    ├────────────────\n")
	for _, l := range lines {
		w.WriteString(l + "\n")
	}
}

func traversalString(tr hcl.Traversal) string {
	var b strings.Builder
	for i, step := range tr {
		switch s := step.(type) {
		case hcl.TraverseRoot:
			b.WriteString(s.Name)
		case hcl.TraverseAttr:
			if i > 0 {
				b.WriteString(".")
			}
			b.WriteString(s.Name)
		case hcl.TraverseIndex:
			if s.Key.Type() == cty.String {
				fmt.Fprintf(&b, "[%q]", s.Key.AsString())
			} else if s.Key.Type() == cty.Number {
				fmt.Fprintf(&b, "[%s]", s.Key.AsBigFloat().Text('f', -1))
			}
		case hcl.TraverseSplat:
			b.WriteString("[*]")
		}
	}
	return b.String()
}

// compactValue renders a value briefly for a diagnostic.
func compactValue(v cty.Value) string {
	switch {
	case v.IsMarked():
		return "(sensitive value)"
	case !v.IsKnown():
		return "a " + v.Type().FriendlyName() + " value known only after apply"
	case v.IsNull():
		return "null"
	case v.Type() == cty.String:
		return fmt.Sprintf("%q", v.AsString())
	case v.Type() == cty.Number:
		return v.AsBigFloat().Text('f', -1)
	case v.Type() == cty.Bool:
		return fmt.Sprint(v.True())
	case v.CanIterateElements():
		n := v.LengthInt()
		return fmt.Sprintf("%s with %d element(s)", v.Type().FriendlyName(), n)
	}
	return v.Type().FriendlyName()
}

// blockHeader renders a block's type and labels: pool "campus".
func blockHeader(blk *hcl.Block) string {
	var b strings.Builder
	b.WriteString(blk.Type)
	for _, l := range blk.Labels {
		fmt.Fprintf(&b, " %q", l)
	}
	return b.String()
}

// JSONDiagnostic is one diagnostic in the machine-readable form of -json
// output, shaped like Terraform's.
type JSONDiagnostic struct {
	Severity string     `json:"severity"`
	Summary  string     `json:"summary"`
	Detail   string     `json:"detail"`
	Range    *JSONRange `json:"range,omitempty"`
}

// JSONRange is a source range: file name and 1-based line/column positions
// with 0-based byte offsets.
type JSONRange struct {
	Filename string  `json:"filename"`
	Start    JSONPos `json:"start"`
	End      JSONPos `json:"end"`
}

// JSONPos is a position in a source file.
type JSONPos struct {
	Line   int `json:"line"`
	Column int `json:"column"`
	Byte   int `json:"byte"`
}

// DiagnosticsJSON converts diagnostics for -json output; the result
// marshals with encoding/json. It is never nil.
func DiagnosticsJSON(diags hcl.Diagnostics) []JSONDiagnostic {
	out := make([]JSONDiagnostic, 0, len(diags))
	for _, d := range diags {
		jd := JSONDiagnostic{Severity: "error", Summary: d.Summary, Detail: d.Detail}
		if d.Severity == hcl.DiagWarning {
			jd.Severity = "warning"
		}
		if d.Subject != nil {
			s := *d.Subject
			jd.Range = &JSONRange{
				Filename: s.Filename,
				Start:    JSONPos{Line: s.Start.Line, Column: s.Start.Column, Byte: s.Start.Byte},
				End:      JSONPos{Line: s.End.Line, Column: s.End.Column, Byte: s.End.Byte},
			}
		}
		out = append(out, jd)
	}
	return out
}

// ValueString renders a value in HCL-like syntax, for messages and for
// prompts of the CLI.
func ValueString(v cty.Value) string {
	if !v.IsWhollyKnown() || v.IsMarked() {
		return compactValue(v)
	}
	b, err := ctyjson.Marshal(v, v.Type())
	if err != nil {
		return compactValue(v)
	}
	var buf bytes.Buffer
	buf.Write(b)
	return buf.String()
}
