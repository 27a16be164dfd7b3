package config

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"
)

// Format returns HCL native-syntax source in canonical layout: aligned
// equals signs, two-space indentation, normalized spacing.
func Format(src []byte) []byte {
	return hclwrite.Format(src)
}

// IsFormattable reports whether pondctl fmt handles a file: *.pond.hcl and
// *.pondvars, the native-syntax files of a configuration.
func IsFormattable(name string) bool {
	base := filepath.Base(name)
	if strings.HasPrefix(base, ".") {
		return false
	}
	return strings.HasSuffix(base, NativeSuffix) || strings.HasSuffix(base, VarsSuffix)
}

// FmtOptions controls FormatPath.
type FmtOptions struct {
	// Recursive descends into subdirectories (skipping hidden ones).
	Recursive bool
	// Write rewrites the files that are not formatted; false only reports
	// them (pondctl fmt -check).
	Write bool
	// Diff fills FmtResult.Diff with a unified diff.
	Diff bool
}

// FmtResult is a file that was, or would be, changed by formatting.
type FmtResult struct {
	Path string
	// Diff is a unified diff from the current to the formatted source,
	// when FmtOptions.Diff is set.
	Diff string
}

// FormatPath formats the configuration files of a directory (or one named
// file) and returns those that changed, or would change when opts.Write is
// false, in path order. A file with syntax errors is left alone and its
// errors are returned.
func FormatPath(path string, opts FmtOptions) ([]FmtResult, hcl.Diagnostics) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Failed to read path",
			Detail:   fmt.Sprintf("%s could not be read: %s.", path, err),
		}}
	}
	var files []string
	if !st.IsDir() {
		files = []string{path}
	} else {
		err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if p != path && (!opts.Recursive || strings.HasPrefix(d.Name(), ".")) {
					return filepath.SkipDir
				}
				return nil
			}
			if d.Type().IsRegular() && IsFormattable(p) {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			return nil, hcl.Diagnostics{{
				Severity: hcl.DiagError,
				Summary:  "Failed to read directory",
				Detail:   fmt.Sprintf("Listing %s failed: %s.", path, err),
			}}
		}
	}
	sort.Strings(files)
	var (
		out   []FmtResult
		diags hcl.Diagnostics
	)
	for _, f := range files {
		res, d := formatFile(f, opts)
		diags = append(diags, d...)
		if res != nil {
			out = append(out, *res)
		}
	}
	return out, diags
}

func formatFile(path string, opts FmtOptions) (*FmtResult, hcl.Diagnostics) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Failed to read file",
			Detail:   fmt.Sprintf("%s could not be read: %s.", path, err),
		}}
	}
	_, rewritten, diags := parseNative(src, path)
	if diags.HasErrors() {
		return nil, diags
	}
	if rewritten == nil {
		rewritten = src
	}
	formatted := Format(rewritten)
	if bytes.Equal(src, formatted) {
		return nil, nil
	}
	res := &FmtResult{Path: path}
	if opts.Diff {
		res.Diff = UnifiedDiff(path, path, string(src), string(formatted))
	}
	if opts.Write {
		st, err := os.Stat(path)
		mode := fs.FileMode(0o644)
		if err == nil {
			mode = st.Mode().Perm()
		}
		if err := os.WriteFile(path, formatted, mode); err != nil {
			return res, hcl.Diagnostics{{
				Severity: hcl.DiagError,
				Summary:  "Failed to write file",
				Detail:   fmt.Sprintf("%s could not be written: %s.", path, err),
			}}
		}
	}
	return res, nil
}

// UnifiedDiff returns a unified diff (three lines of context) turning a
// into b, or "" when they are equal.
func UnifiedDiff(nameA, nameB, a, b string) string {
	if a == b {
		return ""
	}
	la, lb := splitLines(a), splitLines(b)
	ops := diffLines(la, lb)
	var out strings.Builder
	fmt.Fprintf(&out, "--- old/%s\n+++ new/%s\n", nameA, nameB)
	const ctx = 3
	// Group the edit script into hunks.
	i := 0
	for i < len(ops) {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start := max(0, i-ctx)
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*ctx {
				end = min(end+ctx, len(ops))
				break
			}
			end = run
		}
		aStart, bStart, aLen, bLen := ops[start].a, ops[start].b, 0, 0
		for _, op := range ops[start:end] {
			if op.kind != '+' {
				aLen++
			}
			if op.kind != '-' {
				bLen++
			}
		}
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", hunkRange(aStart, aLen), hunkRange(bStart, bLen))
		for _, op := range ops[start:end] {
			out.WriteByte(op.kind)
			out.WriteString(op.line)
			out.WriteByte('\n')
		}
		i = end
	}
	return out.String()
}

func hunkRange(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if n == 1 {
		return fmt.Sprint(start + 1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

func splitLines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

type diffOp struct {
	kind byte // ' ', '-', '+'
	line string
	a, b int // line indexes (0-based) in a and b where the op applies
}

// diffLines computes a line edit script by longest common subsequence.
// Very large inputs degrade to replacing the differing middle wholesale.
func diffLines(a, b []string) []diffOp {
	// Trim the common prefix and suffix.
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	var ops []diffOp
	for i := 0; i < pre; i++ {
		ops = append(ops, diffOp{' ', a[i], i, i})
	}
	if len(ma)*len(mb) > 4_000_000 {
		for i, l := range ma {
			ops = append(ops, diffOp{'-', l, pre + i, pre})
		}
		for j, l := range mb {
			ops = append(ops, diffOp{'+', l, pre + len(ma), pre + j})
		}
	} else {
		// lcs[i][j] is the LCS length of ma[i:] and mb[j:].
		lcs := make([][]int, len(ma)+1)
		for i := range lcs {
			lcs[i] = make([]int, len(mb)+1)
		}
		for i := len(ma) - 1; i >= 0; i-- {
			for j := len(mb) - 1; j >= 0; j-- {
				if ma[i] == mb[j] {
					lcs[i][j] = lcs[i+1][j+1] + 1
				} else {
					lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
				}
			}
		}
		i, j := 0, 0
		for i < len(ma) || j < len(mb) {
			switch {
			case i < len(ma) && j < len(mb) && ma[i] == mb[j]:
				ops = append(ops, diffOp{' ', ma[i], pre + i, pre + j})
				i++
				j++
			case i < len(ma) && (j == len(mb) || lcs[i+1][j] >= lcs[i][j+1]):
				ops = append(ops, diffOp{'-', ma[i], pre + i, pre + j})
				i++
			default:
				ops = append(ops, diffOp{'+', mb[j], pre + i, pre + j})
				j++
			}
		}
	}
	for k := 0; k < suf; k++ {
		ops = append(ops, diffOp{' ', a[len(a)-suf+k], len(a) - suf + k, len(b) - suf + k})
	}
	return ops
}
