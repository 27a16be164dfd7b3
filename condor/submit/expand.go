package submit

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path"
	"strconv"
	"strings"
)

// macroSet resolves submit macros: file commands, loop variables and the
// predefined Cluster/Process family. Names are case-insensitive.
type macroSet struct {
	vals map[string]string // lower-case name -> raw value
	env  func(string) (string, bool)
}

func (m *macroSet) set(name, value string) { m.vals[strings.ToLower(name)] = value }

// expand expands $(NAME), $(NAME:default), $ENV(), $INT(), $REAL(),
// $CHOICE(), $RANDOM_CHOICE(), $RANDOM_INTEGER() and the $F[pdnxq]()
// file-name functions. $$(NAME) is kept for match-time expansion.
func (m *macroSet) expand(s string) (string, error) {
	return m.expandStack(s, nil)
}

func (m *macroSet) expandStack(s string, stack []string) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	if len(stack) > 64 {
		return "", fmt.Errorf("macro nesting deeper than 64 (%s)", strings.Join(stack, " -> "))
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if b.Len() > 1<<20 {
			return "", fmt.Errorf("macro expansion longer than 1 MiB")
		}
		if s[i] != '$' {
			b.WriteByte(s[i])
			i++
			continue
		}
		if strings.HasPrefix(s[i:], "$$(") {
			end := matchParen(s, i+2)
			if end < 0 {
				b.WriteString(s[i:])
				break
			}
			b.WriteString(s[i : end+1])
			i = end + 1
			continue
		}
		j := i + 1
		for j < len(s) && (isAlnum(s[j]) || s[j] == '_') {
			j++
		}
		if j >= len(s) || s[j] != '(' {
			b.WriteByte('$')
			i++
			continue
		}
		fn := s[i+1 : j]
		end := matchParen(s, j)
		if end < 0 {
			return "", fmt.Errorf("unterminated macro reference %q", clip(s[i:]))
		}
		out, ok, err := m.ref(fn, s[j+1:end], stack)
		if err != nil {
			return "", err
		}
		if ok {
			b.WriteString(out)
		} else {
			b.WriteString(s[i : end+1])
		}
		i = end + 1
	}
	return b.String(), nil
}

func (m *macroSet) lookup(name string, stack []string) (string, bool, error) {
	ln := strings.ToLower(strings.TrimSpace(name))
	for _, s := range stack {
		if s == ln {
			return "", false, fmt.Errorf("circular macro reference: %s -> %s", strings.Join(stack, " -> "), ln)
		}
	}
	v, ok := m.vals[ln]
	if !ok {
		return "", false, nil
	}
	out, err := m.expandStack(v, append(stack[:len(stack):len(stack)], ln))
	return out, true, err
}

func (m *macroSet) ref(fn, inner string, stack []string) (string, bool, error) {
	up := strings.ToUpper(fn)
	switch {
	case up == "":
		name, def, hasDef := strings.Cut(inner, ":")
		if strings.EqualFold(strings.TrimSpace(name), "DOLLAR") {
			return "$", true, nil
		}
		v, _, err := m.lookup(name, stack)
		if err != nil {
			return "", false, err
		}
		if v == "" && hasDef {
			v, err = m.expandStack(def, stack)
		}
		return v, true, err
	case up == "ENV":
		name, def, hasDef := strings.Cut(inner, ":")
		if m.env != nil {
			if v, ok := m.env(strings.TrimSpace(name)); ok {
				return v, true, nil
			}
		}
		if hasDef {
			v, err := m.expandStack(def, stack)
			return v, true, err
		}
		return "", true, nil
	case up == "INT" || up == "REAL":
		args := splitArgs(inner)
		v, err := m.valueOrLiteral(args[0], stack)
		if err != nil {
			return "", false, err
		}
		f, _, err := evalArith(v)
		if err != nil {
			return "", false, fmt.Errorf("$%s(%s): %w", fn, inner, err)
		}
		format := ""
		if len(args) > 1 {
			format = strings.TrimSpace(args[1])
		}
		if up == "INT" {
			n := int64(math.Trunc(f))
			if format != "" {
				return fmt.Sprintf(format, n), true, nil
			}
			return strconv.FormatInt(n, 10), true, nil
		}
		if format != "" {
			return fmt.Sprintf(format, f), true, nil
		}
		return strconv.FormatFloat(f, 'f', -1, 64), true, nil
	case up == "CHOICE":
		args := splitArgs(inner)
		if len(args) < 2 {
			return "", false, fmt.Errorf("$CHOICE needs an index and a list")
		}
		is, err := m.valueOrLiteral(args[0], stack)
		if err != nil {
			return "", false, err
		}
		idx, err := strconv.Atoi(strings.TrimSpace(is))
		if err != nil || idx < 0 || idx >= len(args)-1 {
			return "", false, fmt.Errorf("$CHOICE(%s): index %q out of range", inner, is)
		}
		v, err := m.expandStack(strings.TrimSpace(args[idx+1]), stack)
		return v, true, err
	case up == "RANDOM_CHOICE":
		args := splitArgs(inner)
		return strings.TrimSpace(args[rand.IntN(len(args))]), true, nil
	case up == "RANDOM_INTEGER":
		args := splitArgs(inner)
		if len(args) < 2 {
			return "", false, fmt.Errorf("$RANDOM_INTEGER needs min,max")
		}
		lo, err1 := strconv.Atoi(strings.TrimSpace(args[0]))
		hi, err2 := strconv.Atoi(strings.TrimSpace(args[1]))
		if err1 != nil || err2 != nil || hi < lo {
			return "", false, fmt.Errorf("$RANDOM_INTEGER(%s): bad range", inner)
		}
		return strconv.Itoa(lo + rand.IntN(hi-lo+1)), true, nil
	case len(up) >= 2 && up[0] == 'F' && strings.Trim(up[1:], "FPDNXQABUW") == "":
		v, err := m.valueOrLiteral(inner, stack)
		if err != nil {
			return "", false, err
		}
		return fileFunc(strings.ToLower(up[1:]), v), true, nil
	}
	return "", false, nil
}

// fileFunc implements $F: p = directory with trailing slash, d = parent
// directory name with slash, n = base name without extension, x =
// extension with dot, q = double-quoted; letters combine (nx = file
// name); others leave the value as it is.
func fileFunc(flags, v string) string {
	if flags == "" || strings.Trim(flags, "fuwb") == "" {
		return v
	}
	dir, file := path.Split(v)
	ext := path.Ext(file)
	base := strings.TrimSuffix(file, ext)
	var out string
	if strings.Contains(flags, "p") {
		out += dir
	} else if strings.Contains(flags, "d") {
		d := strings.TrimSuffix(dir, "/")
		if d != "" {
			out += path.Base(d) + "/"
		}
	}
	hasN, hasX := strings.Contains(flags, "n"), strings.Contains(flags, "x")
	switch {
	case hasN && hasX:
		out += file
	case hasN:
		out += base
	case hasX:
		out += ext
	case !strings.ContainsAny(flags, "pd"):
		out = v
	}
	if strings.Contains(flags, "q") {
		out = `"` + out + `"`
	}
	return out
}

func (m *macroSet) valueOrLiteral(s string, stack []string) (string, error) {
	s = strings.TrimSpace(s)
	if isIdent(s) {
		if v, ok, err := m.lookup(s, stack); ok || err != nil {
			return v, err
		}
	}
	return m.expandStack(s, stack)
}

func matchParen(s string, open int) int {
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

func splitArgs(s string) []string {
	var out []string
	depth, last := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[last:i])
				last = i + 1
			}
		}
	}
	return append(out, s[last:])
}

func isAlnum(ch byte) bool {
	return ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9'
}

// evalArith evaluates + - * / % with parentheses over numbers.
func evalArith(s string) (float64, bool, error) {
	p := arith{s: s}
	v, isInt, err := p.expr()
	if err != nil {
		return 0, false, err
	}
	p.skip()
	if p.i != len(p.s) {
		return 0, false, fmt.Errorf("unexpected %q in %q", p.s[p.i:], s)
	}
	return v, isInt, nil
}

type arith struct {
	s     string
	i     int
	depth int
}

func (p *arith) skip() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *arith) expr() (float64, bool, error) {
	l, li, err := p.term()
	for err == nil {
		p.skip()
		if p.i >= len(p.s) || (p.s[p.i] != '+' && p.s[p.i] != '-') {
			return l, li, nil
		}
		op := p.s[p.i]
		p.i++
		var r float64
		var ri bool
		if r, ri, err = p.term(); err != nil {
			break
		}
		if op == '+' {
			l += r
		} else {
			l -= r
		}
		li = li && ri
	}
	return 0, false, err
}

func (p *arith) term() (float64, bool, error) {
	l, li, err := p.unary()
	for err == nil {
		p.skip()
		if p.i >= len(p.s) || (p.s[p.i] != '*' && p.s[p.i] != '/' && p.s[p.i] != '%') {
			return l, li, nil
		}
		op := p.s[p.i]
		p.i++
		var r float64
		var ri bool
		if r, ri, err = p.unary(); err != nil {
			break
		}
		switch op {
		case '*':
			l *= r
		case '/':
			if r == 0 {
				return 0, false, fmt.Errorf("division by zero in %q", p.s)
			}
			l /= r
			if li && ri {
				l = math.Trunc(l)
			}
		case '%':
			if r == 0 || !(li && ri) {
				return 0, false, fmt.Errorf("bad modulus in %q", p.s)
			}
			l = float64(int64(l) % int64(r))
		}
		li = li && ri
	}
	return 0, false, err
}

func (p *arith) unary() (float64, bool, error) {
	p.skip()
	if p.i < len(p.s) && (p.s[p.i] == '-' || p.s[p.i] == '+') {
		neg := p.s[p.i] == '-'
		p.i++
		v, vi, err := p.unary()
		if neg {
			v = -v
		}
		return v, vi, err
	}
	if p.i < len(p.s) && p.s[p.i] == '(' {
		p.depth++
		if p.depth > 100 {
			return 0, false, fmt.Errorf("expression nested too deeply")
		}
		p.i++
		v, vi, err := p.expr()
		if err != nil {
			return 0, false, err
		}
		p.skip()
		if p.i >= len(p.s) || p.s[p.i] != ')' {
			return 0, false, fmt.Errorf("missing ) in %q", p.s)
		}
		p.i++
		p.depth--
		return v, vi, nil
	}
	start := p.i
	for p.i < len(p.s) && (p.s[p.i] >= '0' && p.s[p.i] <= '9' || p.s[p.i] == '.') {
		p.i++
	}
	tok := p.s[start:p.i]
	if tok == "" {
		if p.i >= len(p.s) {
			return 0, false, fmt.Errorf("unexpected end of %q", p.s)
		}
		return 0, false, fmt.Errorf("unexpected %q in %q", p.s[p.i:], p.s)
	}
	if n, err := strconv.ParseInt(tok, 10, 64); err == nil {
		return float64(n), true, nil
	}
	f, err := strconv.ParseFloat(tok, 64)
	if err != nil {
		return 0, false, fmt.Errorf("bad number %q", tok)
	}
	return f, false, nil
}
