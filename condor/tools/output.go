package tools

import (
	"fmt"
	"io"
	"strings"

	"github.com/pond-htc/pond/condor/classad"
)

// printAds prints ads in -json, -long, -af or -format form and reports
// whether one of them was asked for. -attributes projects -long and
// -json onto the attributes it names.
func printAds(w io.Writer, c *common, list []*classad.Ad) (bool, error) {
	attrs := c.attributes
	if attrs == nil && (c.json || c.long) {
		attrs = c.af
	}
	switch {
	case c.json:
		if attrs != nil {
			list = projectAds(list, attrs)
		}
		b := classad.MarshalJSON(list)
		_, err := w.Write(append(b, '\n'))
		return true, err
	case c.long:
		if attrs != nil {
			list = projectAds(list, attrs)
		}
		for _, a := range list {
			s := a.String()
			fmt.Fprint(w, s)
			if !strings.HasSuffix(s, "\n") {
				fmt.Fprintln(w)
			}
			fmt.Fprintln(w)
		}
		return true, nil
	case c.af != nil:
		return true, printAutoformat(w, c.af, c.afOpts, list)
	case c.formats != nil:
		return true, printFormats(w, c.formats, list)
	}
	return false, nil
}

// printAutoformat prints one line per ad of the values of the
// expressions exprs, as HTCondor's -af[:OPTS] does: separated by a space
// (",": a comma, "t": a tab, "n": a newline after each), preceded by the
// job's id ("j"), labelled "Attr = value" ("l"), under a line of
// headings ("h"), strings quoted ("V"), expressions unevaluated ("r"),
// and a blank line after each ad ("g").
func printAutoformat(w io.Writer, exprs []string, o afOpts, list []*classad.Ad) error {
	progs := make([]classad.Expr, len(exprs))
	for i, n := range exprs {
		e, err := classad.ParseExpr(n)
		if err != nil {
			return fmt.Errorf("-af %s: %w", n, err)
		}
		progs[i] = e
	}
	sep, end := o.sep, "\n"
	if o.newline {
		sep, end = "\n", "\n"
	}
	if o.headings {
		heads := append([]string(nil), exprs...)
		if o.jobID {
			heads = append([]string{"ID"}, heads...)
		}
		fmt.Fprint(w, strings.Join(heads, sep)+end)
	}
	var b strings.Builder
	for _, a := range list {
		b.Reset()
		fields := make([]string, 0, len(progs)+1)
		if o.jobID {
			fields = append(fields, jobID(a))
		}
		for i, e := range progs {
			var s string
			switch {
			case o.raw:
				if x, ok := a.Lookup(exprs[i]); ok {
					s = x.String()
				} else if isAttrName(exprs[i]) {
					s = "undefined"
				} else {
					s = e.String()
				}
			default:
				v := a.EvalExpr(e)
				if str, ok := v.StringValue(); ok && !o.quoted {
					s = str
				} else {
					s = v.String()
				}
			}
			if o.label {
				s = exprs[i] + " = " + s
			}
			fields = append(fields, s)
		}
		b.WriteString(strings.Join(fields, sep))
		b.WriteString(end)
		if o.adBreak {
			b.WriteString("\n")
		}
		if _, err := io.WriteString(w, b.String()); err != nil {
			return err
		}
	}
	return nil
}

// isAttrName reports whether s is an attribute name, not an expression.
func isAttrName(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

// jobID is "ClusterId.ProcId" of a job ad, the Name of another ad.
func jobID(a *classad.Ad) string {
	if _, ok := a.Lookup("ClusterId"); ok {
		return fmt.Sprintf("%d.%d", intAttr(a, "ClusterId"), intAttr(a, "ProcId"))
	}
	return strAttr(a, "Name")
}

// printFormats prints, for each ad, every -format FMT ATTR in turn: the
// value of the expression ATTR formatted by the printf-style FMT (with
// \n, \t and \\ escapes), nothing for a value that is undefined or does
// not suit the conversion, as HTCondor's -format does. No newline is
// added: FMT carries it.
func printFormats(w io.Writer, formats []formatArg, list []*classad.Ad) error {
	type prog struct {
		tmpl, verb string
		expr       classad.Expr
	}
	progs := make([]prog, len(formats))
	for i, f := range formats {
		tmpl, verb, err := parseFormat(unescape(f.format))
		if err != nil {
			return fmt.Errorf("-format %q: %w", f.format, err)
		}
		e, err := classad.ParseExpr(f.attr)
		if err != nil {
			return fmt.Errorf("-format %q %s: %w", f.format, f.attr, err)
		}
		progs[i] = prog{tmpl, verb, e}
	}
	var b strings.Builder
	for _, a := range list {
		b.Reset()
		for _, p := range progs {
			if s, ok := formatValue(p.tmpl, p.verb, a.EvalExpr(p.expr)); ok {
				b.WriteString(s)
			}
		}
		if _, err := io.WriteString(w, b.String()); err != nil {
			return err
		}
	}
	return nil
}

// unescape replaces the C escapes \n, \t, \\ and \" in a -format string.
func unescape(s string) string {
	return strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\\`, `\`, `\"`, `"`).Replace(s)
}

// parseFormat checks a printf-style template: at most one conversion
// (%d %i %u %x %X %o %c %f %e %E %g %G %s %v, with flags, width and
// precision; %% is a percent sign). It returns the template in Go's
// spelling and the conversion letter ("" when there is none).
func parseFormat(s string) (tmpl, verb string, err error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		j := i + 1
		for j < len(s) && strings.IndexByte("-+ #0123456789.lh", s[j]) >= 0 {
			j++
		}
		if j >= len(s) {
			return "", "", fmt.Errorf("conversion at byte %d has no letter", i+1)
		}
		if s[j] == '%' && j == i+1 {
			b.WriteString("%%")
			i = j
			continue
		}
		if verb != "" {
			return "", "", fmt.Errorf("more than one conversion (at byte %d)", i+1)
		}
		spec := strings.NewReplacer("l", "", "h", "").Replace(s[i+1 : j])
		v := s[j]
		switch v {
		case 'i', 'u':
			v = 'd'
		case 'd', 'x', 'X', 'o', 'c', 'f', 'e', 'E', 'g', 'G', 's', 'v':
		default:
			return "", "", fmt.Errorf("unsupported conversion %%%c at byte %d", s[j], i+1)
		}
		verb = string(v)
		b.WriteString("%" + spec + verb)
		i = j
	}
	return b.String(), verb, nil
}

// formatValue formats v by tmpl, whose conversion is verb; false when v
// is undefined or an error, or a string for a numeric conversion.
func formatValue(tmpl, verb string, v classad.Value) (string, bool) {
	if verb == "" {
		return tmpl, true
	}
	if v.IsUndefined() || v.IsError() {
		return "", false
	}
	num := func() (float64, bool) {
		if b, ok := v.BoolValue(); ok {
			if b {
				return 1, true
			}
			return 0, true
		}
		return v.NumberValue()
	}
	switch verb {
	case "d", "x", "X", "o", "c":
		f, ok := num()
		if !ok {
			return "", false
		}
		return fmt.Sprintf(tmpl, int64(f)), true
	case "f", "e", "E", "g", "G":
		f, ok := num()
		if !ok {
			return "", false
		}
		return fmt.Sprintf(tmpl, f), true
	}
	if s, ok := v.StringValue(); ok {
		return fmt.Sprintf(tmpl, s), true
	}
	return fmt.Sprintf(tmpl, v.String()), true
}

func projectAds(list []*classad.Ad, attrs []string) []*classad.Ad {
	out := make([]*classad.Ad, len(list))
	for i, a := range list {
		p := classad.NewAd()
		for _, n := range attrs {
			if e, ok := a.Lookup(n); ok {
				p.Set(n, e)
			}
		}
		out[i] = p
	}
	return out
}
