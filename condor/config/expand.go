package config

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// maxExpansion bounds the size of an expanded value so that exponential
// macro definitions fail instead of exhausting memory.
const maxExpansion = 1 << 20

// Expand expands every macro reference in s against c: $(NAME),
// $(NAME:default), $ENV(NAME), $ENV(NAME:default), $INT(NAME[,fmt]),
// $REAL(NAME[,fmt]), $RANDOM_INTEGER(min,max[,step]),
// $RANDOM_CHOICE(a,b,...), $CHOICE(i,a,b,...) and $SUBSTR(NAME,start[,len]).
// $$(NAME) is left for match-time expansion, and $(DOLLAR) yields "$".
// Undefined macros without a default expand to the empty string.
func (c *Config) Expand(s string) (string, error) {
	return c.expand(s, nil)
}

func (c *Config) expand(s string, stack []string) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	if len(stack) > 64 {
		return "", fmt.Errorf("macro nesting deeper than 64 (%s)", strings.Join(stack, " -> "))
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if b.Len() > maxExpansion {
			return "", fmt.Errorf("expansion longer than %d bytes", maxExpansion)
		}
		ch := s[i]
		if ch != '$' {
			b.WriteByte(ch)
			i++
			continue
		}
		// $$(...) is expanded at match time; keep it verbatim.
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
		// $(NAME) or $FUNC(...)
		j := i + 1
		for j < len(s) && (isAlnum(s[j]) || s[j] == '_') {
			j++
		}
		if j >= len(s) || s[j] != '(' {
			b.WriteByte(ch)
			i++
			continue
		}
		fn := strings.ToUpper(s[i+1 : j])
		end := matchParen(s, j)
		if end < 0 {
			return "", fmt.Errorf("unterminated macro reference %q", s[i:])
		}
		inner := s[j+1 : end]
		out, handled, err := c.expandRef(fn, inner, stack)
		if err != nil {
			return "", err
		}
		if !handled {
			b.WriteString(s[i : end+1])
		} else {
			b.WriteString(out)
		}
		i = end + 1
	}
	return b.String(), nil
}

func (c *Config) expandRef(fn, inner string, stack []string) (string, bool, error) {
	switch fn {
	case "":
		name, def, hasDef := strings.Cut(inner, ":")
		name = strings.TrimSpace(name)
		if strings.Contains(name, "$") {
			var err error
			if name, err = c.expand(name, stack); err != nil {
				return "", false, err
			}
		}
		if strings.EqualFold(name, "DOLLAR") {
			return "$", true, nil
		}
		v, err := c.macro(name, stack)
		if err != nil {
			return "", false, err
		}
		if v == "" && hasDef {
			v, err = c.expand(def, stack)
			if err != nil {
				return "", false, err
			}
		}
		return v, true, nil
	case "ENV":
		name, def, hasDef := strings.Cut(inner, ":")
		if v, ok := c.opts.LookupEnv(strings.TrimSpace(name)); ok {
			return v, true, nil
		}
		if hasDef {
			v, err := c.expand(def, stack)
			return v, err == nil, err
		}
		return "", true, nil
	case "INT", "REAL":
		args := splitArgs(inner)
		v, err := c.macroOrLiteral(args[0], stack)
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
		if fn == "INT" {
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
	case "RANDOM_INTEGER":
		args := splitArgs(inner)
		if len(args) < 2 {
			return "", false, fmt.Errorf("$RANDOM_INTEGER needs min,max")
		}
		lo, err1 := strconv.Atoi(strings.TrimSpace(args[0]))
		hi, err2 := strconv.Atoi(strings.TrimSpace(args[1]))
		step := 1
		if len(args) > 2 {
			var err error
			if step, err = strconv.Atoi(strings.TrimSpace(args[2])); err != nil || step <= 0 {
				return "", false, fmt.Errorf("$RANDOM_INTEGER: bad step %q", args[2])
			}
		}
		if err1 != nil || err2 != nil || hi < lo {
			return "", false, fmt.Errorf("$RANDOM_INTEGER(%s): bad range", inner)
		}
		n := lo + step*rand.IntN((hi-lo)/step+1)
		return strconv.Itoa(n), true, nil
	case "RANDOM_CHOICE":
		args := splitArgs(inner)
		return strings.TrimSpace(args[rand.IntN(len(args))]), true, nil
	case "CHOICE":
		args := splitArgs(inner)
		if len(args) < 2 {
			return "", false, fmt.Errorf("$CHOICE needs an index and a list")
		}
		idxs, err := c.macroOrLiteral(args[0], stack)
		if err != nil {
			return "", false, err
		}
		idx, err := strconv.Atoi(strings.TrimSpace(idxs))
		if err != nil || idx < 0 || idx >= len(args)-1 {
			return "", false, fmt.Errorf("$CHOICE(%s): index %q out of range", inner, idxs)
		}
		return strings.TrimSpace(args[idx+1]), true, nil
	case "SUBSTR":
		args := splitArgs(inner)
		if len(args) < 2 {
			return "", false, fmt.Errorf("$SUBSTR needs a name and a start")
		}
		v, err := c.macro(strings.TrimSpace(args[0]), stack)
		if err != nil {
			return "", false, err
		}
		start, err := strconv.Atoi(strings.TrimSpace(args[1]))
		if err != nil {
			return "", false, fmt.Errorf("$SUBSTR: bad start %q", args[1])
		}
		if start < 0 {
			start += len(v)
		}
		start = max(0, min(start, len(v)))
		v = v[start:]
		if len(args) > 2 {
			n, err := strconv.Atoi(strings.TrimSpace(args[2]))
			if err != nil {
				return "", false, fmt.Errorf("$SUBSTR: bad length %q", args[2])
			}
			if n < 0 {
				n += len(v)
			}
			v = v[:max(0, min(n, len(v)))]
		}
		return v, true, nil
	}
	return "", false, nil
}

// macro expands the named macro, detecting cycles through stack.
func (c *Config) macro(name string, stack []string) (string, error) {
	up := strings.ToUpper(name)
	for _, s := range stack {
		if s == up {
			return "", fmt.Errorf("%w: %s -> %s", ErrCircular, strings.Join(stack, " -> "), up)
		}
	}
	e, ok := c.find(up)
	if !ok {
		return "", nil
	}
	return c.expand(e.value, append(stack[:len(stack):len(stack)], up))
}

// macroOrLiteral expands name when it is a defined macro, otherwise treats
// it as a literal to expand.
func (c *Config) macroOrLiteral(name string, stack []string) (string, error) {
	name = strings.TrimSpace(name)
	if validName(name) {
		if _, ok := c.find(name); ok {
			return c.macro(name, stack)
		}
	}
	return c.expand(name, stack)
}

// matchParen returns the index of the parenthesis closing the one at open.
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

// splitArgs splits on top-level commas.
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

// evalArith evaluates a simple arithmetic expression: numbers, + - * / %,
// unary minus and parentheses. It reports whether the result is integral
// in the sense that only integers and integer operations were involved.
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
	if err != nil {
		return 0, false, err
	}
	for {
		p.skip()
		if p.i >= len(p.s) || (p.s[p.i] != '+' && p.s[p.i] != '-') {
			return l, li, nil
		}
		op := p.s[p.i]
		p.i++
		r, ri, err := p.term()
		if err != nil {
			return 0, false, err
		}
		if op == '+' {
			l += r
		} else {
			l -= r
		}
		li = li && ri
	}
}

func (p *arith) term() (float64, bool, error) {
	l, li, err := p.unary()
	if err != nil {
		return 0, false, err
	}
	for {
		p.skip()
		if p.i >= len(p.s) || (p.s[p.i] != '*' && p.s[p.i] != '/' && p.s[p.i] != '%') {
			return l, li, nil
		}
		op := p.s[p.i]
		p.i++
		r, ri, err := p.unary()
		if err != nil {
			return 0, false, err
		}
		switch op {
		case '*':
			l *= r
		case '/':
			if r == 0 {
				return 0, false, fmt.Errorf("division by zero in %q", p.s)
			}
			if li && ri {
				l = math.Trunc(l / r)
			} else {
				l /= r
			}
		case '%':
			if r == 0 || !(li && ri) {
				return 0, false, fmt.Errorf("bad modulus in %q", p.s)
			}
			l = float64(int64(l) % int64(r))
		}
		li = li && ri
	}
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
	for p.i < len(p.s) && (p.s[p.i] >= '0' && p.s[p.i] <= '9' || p.s[p.i] == '.' ||
		p.s[p.i] == 'e' || p.s[p.i] == 'E' ||
		((p.s[p.i] == '-' || p.s[p.i] == '+') && p.i > start && (p.s[p.i-1] == 'e' || p.s[p.i-1] == 'E'))) {
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
