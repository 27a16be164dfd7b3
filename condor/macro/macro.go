// Package macro is the $(MACRO) language shared by HTCondor configuration
// and submit description files: $(NAME), $(NAME:default), $ENV(NAME),
// $ENV(NAME:default), $INT(NAME[,fmt]), $REAL(NAME[,fmt]),
// $RANDOM_INTEGER(min,max[,step]), $RANDOM_CHOICE(a,b,...),
// $CHOICE(i,a,b,...), $SUBSTR(NAME,start[,len]) and the file-name
// functions $F[pdnxqabuw](NAME). $$(NAME) is left for match-time expansion
// and $(DOLLAR) yields "$". Where the macros come from (and how their names
// compare) is the caller's: a Source.
package macro

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path"
	"strconv"
	"strings"

	"github.com/pond-htc/pond/condor/classad"
)

// MaxExpansion bounds the size of an expanded value so that exponential
// macro definitions fail instead of exhausting memory.
const MaxExpansion = 1 << 20

// MaxWork bounds the work of one expansion: each macro reference resolved
// counts 64, and each byte a macro expands to counts 1. Without it, a few
// lines defining each macro as two references to the one before would take
// time exponential in their number while expanding to little or nothing.
const MaxWork = 16 << 20

// ErrCircular is wrapped by errors reporting a macro that refers to itself,
// directly or through other macros.
var ErrCircular = errors.New("circular macro reference")

// Source resolves macro names.
type Source interface {
	// Lookup returns the raw (unexpanded) value of the macro called name
	// (trimmed, spelled as written), and a key that is the same for every
	// spelling of the name, used to detect circular definitions. ok is
	// false when the macro is not defined.
	Lookup(name string) (value, key string, ok bool)
}

// Expander expands macro references against a Source.
type Expander struct {
	Source Source
	// Env looks up $ENV() names; nil means no environment.
	Env func(name string) (string, bool)
}

// Expand expands every macro reference in s. Undefined macros without a
// default expand to the empty string.
func (x Expander) Expand(s string) (string, error) {
	return x.start().expand(s, nil)
}

// ExpandValue expands s, the value of the macros whose keys are given
// (outermost first): a reference back to one of them is circular.
func (x Expander) ExpandValue(s string, keys ...string) (string, error) {
	return x.start().expand(s, keys)
}

// expansion is the state of one call to Expand or ExpandValue.
type expansion struct {
	Expander
	// done holds the expansions of the macros already expanded, by key: a
	// macro referred to many times is expanded once.
	done map[string]string
	// work is spent so far; see MaxWork.
	work int
	// random counts the $RANDOM_ functions evaluated: an expansion that
	// evaluated one is not reused, so that each reference draws anew.
	random int
}

func (x Expander) start() *expansion {
	return &expansion{Expander: x, done: map[string]string{}}
}

// spend adds n to the work done, failing beyond MaxWork.
func (x *expansion) spend(n int) error {
	x.work += n
	if x.work > MaxWork {
		return fmt.Errorf("macro expansion takes too much work (more than %d references or %d bytes expanded)", MaxWork/64, MaxWork)
	}
	return nil
}

func (x *expansion) expand(s string, stack []string) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	if len(stack) > 64 {
		return "", fmt.Errorf("macro nesting deeper than 64 (%s)", strings.Join(stack, " -> "))
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		if b.Len() > MaxExpansion {
			return "", fmt.Errorf("macro expansion longer than %d bytes", MaxExpansion)
		}
		ch := s[i]
		if ch != '$' {
			// Copy the text up to the next '$' at once.
			k := strings.IndexByte(s[i:], '$')
			if k < 0 {
				k = len(s) - i
			}
			b.WriteString(s[i : i+k])
			i += k
			continue
		}
		// $$(...) is expanded at match time; keep it verbatim.
		if strings.HasPrefix(s[i:], "$$(") {
			end := MatchParen(s, i+2)
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
		for j < len(s) && (IsAlnum(s[j]) || s[j] == '_') {
			j++
		}
		if j >= len(s) || s[j] != '(' {
			b.WriteByte(ch)
			i++
			continue
		}
		fn := strings.ToUpper(s[i+1 : j])
		end := MatchParen(s, j)
		if end < 0 {
			return "", fmt.Errorf("unterminated macro reference %q", clip(s[i:]))
		}
		out, handled, err := x.ref(fn, s[j+1:end], stack)
		if err != nil {
			return "", err
		}
		if handled {
			b.WriteString(out)
		} else {
			b.WriteString(s[i : end+1])
		}
		i = end + 1
	}
	if b.Len() > MaxExpansion {
		return "", fmt.Errorf("macro expansion longer than %d bytes", MaxExpansion)
	}
	return b.String(), nil
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}

// ref expands the reference $fn(inner); handled is false when fn is no
// function of the language, and the reference is then kept as written.
func (x *expansion) ref(fn, inner string, stack []string) (string, bool, error) {
	switch {
	case fn == "":
		return x.refMacro(inner, stack)
	case fn == "ENV":
		return x.refEnv(inner, stack)
	case fn == "INT" || fn == "REAL":
		return x.refNumber(fn, inner, stack)
	case fn == "RANDOM_INTEGER":
		x.random++
		return refRandomInteger(inner)
	case fn == "RANDOM_CHOICE":
		x.random++
		args := SplitArgs(inner)
		return strings.TrimSpace(args[rand.IntN(len(args))]), true, nil
	case fn == "CHOICE":
		return x.refChoice(inner, stack)
	case fn == "SUBSTR":
		return x.refSubstr(inner, stack)
	case fn == "EVAL" || fn == "STRING":
		return x.refEval(fn, inner, stack)
	case fn == "DIRNAME" || fn == "BASENAME":
		v, err := x.macroOrLiteral(inner, stack)
		if err != nil {
			return "", false, err
		}
		flags := "p"
		if fn == "BASENAME" {
			flags = "nx"
		}
		return fileFunc(flags, v), true, nil
	case len(fn) >= 2 && fn[0] == 'F' && strings.Trim(fn[1:], "FPDNXQABUW") == "":
		v, err := x.macroOrLiteral(inner, stack)
		if err != nil {
			return "", false, err
		}
		return fileFunc(strings.ToLower(fn[1:]), v), true, nil
	}
	return "", false, nil
}

// refMacro expands $(NAME) and $(NAME:default): the name may itself hold
// references, DOLLAR is "$", and the default is used when the macro is
// undefined or empty.
func (x *expansion) refMacro(inner string, stack []string) (string, bool, error) {
	name, def, hasDef := strings.Cut(inner, ":")
	name = strings.TrimSpace(name)
	if strings.Contains(name, "$") {
		var err error
		if name, err = x.expand(name, stack); err != nil {
			return "", false, err
		}
	}
	if strings.EqualFold(name, "DOLLAR") {
		return "$", true, nil
	}
	v, _, err := x.macro(name, stack)
	if err != nil {
		return "", false, err
	}
	if v == "" && hasDef {
		if v, err = x.expand(def, stack); err != nil {
			return "", false, err
		}
	}
	return v, true, nil
}

// refEnv expands $ENV(NAME) and $ENV(NAME:default) from the environment.
func (x *expansion) refEnv(inner string, stack []string) (string, bool, error) {
	name, def, hasDef := strings.Cut(inner, ":")
	if x.Env != nil {
		if v, ok := x.Env(strings.TrimSpace(name)); ok {
			return v, true, nil
		}
	}
	if hasDef {
		v, err := x.expand(def, stack)
		return v, err == nil, err
	}
	return "", true, nil
}

// refNumber expands $INT(NAME[,fmt]) and $REAL(NAME[,fmt]) (fn is INT or
// REAL): the macro's value, or the literal, evaluated as arithmetic and
// formatted.
func (x *expansion) refNumber(fn, inner string, stack []string) (string, bool, error) {
	args := SplitArgs(inner)
	v, err := x.macroOrLiteral(args[0], stack)
	if err != nil {
		return "", false, err
	}
	f, _, err := EvalArith(v)
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
}

// refEval expands $EVAL(item) and $STRING(item[,fmt]) (fn is EVAL or
// STRING): the macro's value, or the literal, evaluated as a ClassAd
// expression. $EVAL gives a string's text without its quotes and any
// other value as the ClassAd language writes it; $STRING gives a
// string's text, formatted with fmt (%s by default), and refuses a value
// that is not a string.
func (x *expansion) refEval(fn, inner string, stack []string) (string, bool, error) {
	item, format, hasFormat := strings.Cut(inner, ",")
	if fn == "EVAL" {
		item, hasFormat = inner, false
	}
	v, err := x.macroOrLiteral(item, stack)
	if err != nil {
		return "", false, err
	}
	e, err := classad.ParseExpr(v)
	if err != nil {
		return "", false, fmt.Errorf("$%s(%s): %q is not a ClassAd expression: %w", fn, inner, v, err)
	}
	val := classad.EvalWith(e, nil, nil)
	str, isString := val.StringValue()
	switch {
	case fn == "EVAL" && isString:
		return str, true, nil
	case fn == "EVAL":
		return val.String(), true, nil
	case !isString:
		return "", false, fmt.Errorf("$STRING(%s): %s is %s, not a string", inner, v, val)
	case hasFormat:
		return fmt.Sprintf(format, str), true, nil
	}
	return str, true, nil
}

// refRandomInteger expands $RANDOM_INTEGER(min,max[,step]).
func refRandomInteger(inner string) (string, bool, error) {
	args := SplitArgs(inner)
	if len(args) < 2 {
		return "", false, fmt.Errorf("$RANDOM_INTEGER needs min,max")
	}
	lo, err1 := atoi(args[0])
	hi, err2 := atoi(args[1])
	step := 1
	if len(args) > 2 {
		var err error
		if step, err = atoi(args[2]); err != nil || step <= 0 {
			return "", false, fmt.Errorf("$RANDOM_INTEGER: bad step %q", args[2])
		}
	}
	if err1 != nil || err2 != nil || hi < lo {
		return "", false, fmt.Errorf("$RANDOM_INTEGER(%s): bad range", inner)
	}
	n := lo + step*rand.IntN((hi-lo)/step+1)
	return strconv.Itoa(n), true, nil
}

// refChoice expands $CHOICE(i,a,b,...): the list's item at the index,
// itself a macro or a literal.
func (x *expansion) refChoice(inner string, stack []string) (string, bool, error) {
	args := SplitArgs(inner)
	if len(args) < 2 {
		return "", false, fmt.Errorf("$CHOICE needs an index and a list")
	}
	idxs, err := x.macroOrLiteral(args[0], stack)
	if err != nil {
		return "", false, err
	}
	idx, err := atoi(idxs)
	if err != nil || idx < 0 || idx >= len(args)-1 {
		return "", false, fmt.Errorf("$CHOICE(%s): index %q out of range", inner, idxs)
	}
	v, err := x.expand(strings.TrimSpace(args[idx+1]), stack)
	return v, err == nil, err
}

// refSubstr expands $SUBSTR(NAME,start[,len]): negative start and length
// count from the end, and both are clamped to the value.
func (x *expansion) refSubstr(inner string, stack []string) (string, bool, error) {
	args := SplitArgs(inner)
	if len(args) < 2 {
		return "", false, fmt.Errorf("$SUBSTR needs a name and a start")
	}
	v, _, err := x.macro(strings.TrimSpace(args[0]), stack)
	if err != nil {
		return "", false, err
	}
	start, err := atoi(args[1])
	if err != nil {
		return "", false, fmt.Errorf("$SUBSTR: bad start %q", args[1])
	}
	if start < 0 {
		start += len(v)
	}
	start = max(0, min(start, len(v)))
	v = v[start:]
	if len(args) > 2 {
		n, err := atoi(args[2])
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

// atoi parses an integer argument, ignoring the spaces around it.
func atoi(s string) (int, error) { return strconv.Atoi(strings.TrimSpace(s)) }

// macro expands the named macro, detecting cycles through stack.
func (x *expansion) macro(name string, stack []string) (string, bool, error) {
	if err := x.spend(64); err != nil {
		return "", false, err
	}
	raw, key, ok := x.Source.Lookup(strings.TrimSpace(name))
	if !ok {
		return "", false, nil
	}
	for _, s := range stack {
		if s == key {
			return "", false, fmt.Errorf("%w: %s -> %s", ErrCircular, strings.Join(stack, " -> "), key)
		}
	}
	// A macro expanded before expands the same now: what it refers to does
	// not depend on where it is referred from, and had it led back to one of
	// the macros in stack, its earlier expansion would have failed too.
	if v, ok := x.done[key]; ok {
		return v, true, nil
	}
	random := x.random
	v, err := x.expand(raw, append(stack[:len(stack):len(stack)], key))
	if err == nil {
		err = x.spend(len(v))
	}
	if err == nil && x.random == random {
		x.done[key] = v
	}
	return v, true, err
}

// macroOrLiteral expands s as a macro name when a macro of that name is
// defined, otherwise as a literal.
func (x *expansion) macroOrLiteral(s string, stack []string) (string, error) {
	s = strings.TrimSpace(s)
	if v, ok, err := x.macro(s, stack); ok || err != nil {
		return v, err
	}
	return x.expand(s, stack)
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

// MatchParen returns the index of the parenthesis closing the one at open.
func MatchParen(s string, open int) int {
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

// SplitArgs splits s on commas outside parentheses.
func SplitArgs(s string) []string {
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

// IsAlnum reports whether ch is an ASCII letter or digit.
func IsAlnum(ch byte) bool {
	return ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9'
}

// EvalArith evaluates a simple arithmetic expression: numbers, + - * / %,
// unary minus and parentheses. It reports whether the result is integral
// in the sense that only integers and integer operations were involved.
func EvalArith(s string) (float64, bool, error) {
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
		p.depth++
		if p.depth > 100 {
			return 0, false, fmt.Errorf("expression nested too deeply")
		}
		v, vi, err := p.unary()
		p.depth--
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
