package classad

import (
	"math"
	"math/big"
	"math/rand/v2"
	"os/user"
	"regexp"
	"regexp/syntax"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
)

// builtin is a ClassAd function. A call with fewer than min or more than
// max arguments evaluates to error without calling fn.
type builtin struct {
	name     string
	min, max int
	fn       func(st *state, n *callNode) Value
}

// many is the max of a builtin that takes any number of arguments.
const many = math.MaxInt

var builtins map[string]*builtin

func init() {
	list := []*builtin{
		{"isundefined", 1, 1, typePred(UndefinedKind)},
		{"iserror", 1, 1, typePred(ErrorKind)},
		{"isstring", 1, 1, typePred(StringKind)},
		{"isinteger", 1, 1, typePred(IntKind)},
		{"isreal", 1, 1, typePred(RealKind)},
		{"islist", 1, 1, typePred(ListKind)},
		{"isclassad", 1, 1, typePred(AdKind)},
		{"isboolean", 1, 1, typePred(BoolKind)},
		{"isabstime", 1, 1, typePred(AbsTimeKind)},
		{"isreltime", 1, 1, typePred(RelTimeKind)},
		{"ifthenelse", 3, 3, fnIfThenElse},
		{"eval", 1, 1, fnEval},
		{"unparse", 1, 1, fnUnparse},
		{"int", 1, 1, fnInt},
		{"real", 1, 1, fnReal},
		{"string", 1, 1, fnString},
		{"bool", 1, 1, fnBool},
		{"floor", 1, 1, roundFn(math.Floor)},
		{"ceiling", 1, 1, roundFn(math.Ceil)},
		{"ceil", 1, 1, roundFn(math.Ceil)},
		{"round", 1, 1, roundFn(roundHalfEven)},
		{"pow", 2, 2, fnPow},
		{"quantize", 2, 2, fnQuantize},
		{"sum", 1, 1, listAgg("sum")},
		{"avg", 1, 1, listAgg("avg")},
		{"min", 1, 1, listAgg("min")},
		{"max", 1, 1, listAgg("max")},
		{"random", 0, 1, fnRandom},
		{"strcat", 0, many, fnStrcat},
		{"join", 1, many, fnJoin},
		{"split", 1, 2, fnSplit},
		{"substr", 2, 3, fnSubstr},
		{"strcmp", 2, 2, strcmpFn(false)},
		{"stricmp", 2, 2, strcmpFn(true)},
		{"toupper", 1, 1, caseFn(strings.ToUpper)},
		{"tolower", 1, 1, caseFn(strings.ToLower)},
		{"size", 1, 1, fnSize},
		{"regexp", 2, 3, fnRegexp},
		{"regexps", 3, 4, replaceFn("regexps")},
		{"replace", 3, 4, replaceFn("replace")},
		{"replaceall", 3, 4, replaceFn("replaceall")},
		{"regexpmember", 2, 3, fnRegexpMember},
		{"stringlistsize", 1, 2, fnStringListSize},
		{"stringlistsum", 1, 2, stringListAgg("sum")},
		{"stringlistavg", 1, 2, stringListAgg("avg")},
		{"stringlistmin", 1, 2, stringListAgg("min")},
		{"stringlistmax", 1, 2, stringListAgg("max")},
		{"stringlistmember", 2, 3, stringListMember(false)},
		{"stringlistimember", 2, 3, stringListMember(true)},
		{"stringlistsintersect", 2, 3, fnStringListsIntersect},
		{"stringlistsubsetmatch", 2, 3, stringListSubset(false)},
		{"stringlistisubsetmatch", 2, 3, stringListSubset(true)},
		{"stringlistregexpmember", 2, 4, fnStringListRegexpMember},
		{"member", 2, 2, memberFn(false)},
		{"identicalmember", 2, 2, memberFn(true)},
		{"anycompare", 3, 3, compareFn(false)},
		{"allcompare", 3, 3, compareFn(true)},
		{"time", 0, 0, fnTime},
		{"currenttime", 0, 0, fnTime},
		{"abstime", 0, 2, fnAbsTime},
		{"reltime", 1, 1, fnRelTime},
		{"formattime", 0, 2, fnFormatTime},
		{"interval", 1, 1, fnInterval},
		{"splitusername", 1, 1, splitAt(false)},
		{"splitslotname", 1, 1, splitAt(true)},
		{"debug", 1, 1, fnDebug},
		{"versioncmp", 2, 2, versionFn("cmp")},
		{"versiongt", 2, 2, versionFn(">")},
		{"versionge", 2, 2, versionFn(">=")},
		{"versionlt", 2, 2, versionFn("<")},
		{"versionle", 2, 2, versionFn("<=")},
		{"versioneq", 2, 2, versionFn("==")},
		{"version_in_range", 3, 3, fnVersionInRange},
		{"gettime", 0, 0, fnTime},
		{"stringlist_regexpmember", 2, 4, fnStringListRegexpMember},
		{"evalineachcontext", 2, 2, contextFn(false)},
		{"countmatches", 2, 2, contextFn(true)},
		{"envv1tov2", 1, 1, fnEnvV1ToV2},
		{"mergeenvironment", 0, many, fnMergeEnvironment},
		{"userhome", 1, 2, fnUserHome},
		{"usermap", 2, 4, fnUserMap},
	}
	builtins = make(map[string]*builtin, len(list))
	for _, b := range list {
		builtins[b.name] = b
	}
}

func newCall(name string, args []Expr) *callNode {
	n := &callNode{name: name, lname: strings.ToLower(name), args: args}
	n.fn = builtins[n.lname]
	n.prepareRegex()
	return n
}

func (n *callNode) eval(st *state) Value {
	if n.fn == nil || len(n.args) < n.fn.min || len(n.args) > n.fn.max {
		return ErrorValue()
	}
	return n.fn.fn(st, n)
}

func (n *callNode) arg(st *state, i int) Value { return n.args[i].eval(st) }

func typePred(k Kind) func(*state, *callNode) Value {
	return func(st *state, n *callNode) Value {
		return Bool(n.arg(st, 0).kind == k)
	}
}

func fnIfThenElse(st *state, n *callNode) Value {
	switch truth(n.arg(st, 0)) {
	case 1:
		return n.arg(st, 1)
	case 0:
		return n.arg(st, 2)
	case -1:
		return Undefined()
	}
	return ErrorValue()
}

func fnEval(st *state, n *callNode) Value {
	v := n.arg(st, 0)
	switch v.kind {
	case UndefinedKind, ErrorKind:
		return ErrorValue()
	case StringKind:
	default:
		return v
	}
	e, err := ParseExpr(v.s)
	if err != nil {
		return ErrorValue()
	}
	if st.depth > maxEvalDepth {
		return ErrorValue()
	}
	st.depth++
	r := e.eval(st)
	st.depth--
	return r
}

func fnUnparse(st *state, n *callNode) Value {
	a, ok := n.args[0].(*attrNode)
	if !ok {
		return ErrorValue()
	}
	if a.base == nil {
		for s := st.cur; s != nil; s = s.parent {
			if at := s.attrs[a.lname]; at != nil {
				return String(prettyString(at.expr))
			}
		}
		if o := st.other(st.cur); o != nil {
			if at := o.attrs[a.lname]; at != nil {
				return String(prettyString(at.expr))
			}
		}
		return String("")
	}
	return String("")
}

// parseNumberPrefix parses a leading number like strtod, after spaces.
func parseNumberPrefix(s string) (float64, bool, bool) {
	t := strings.TrimLeft(s, " \t\n\r\f\v")
	end := 0
	isReal := false
	if end < len(t) && (t[end] == '+' || t[end] == '-') {
		end++
	}
	if strings.HasPrefix(strings.ToLower(t[end:]), "0x") {
		q := end + 2
		for q < len(t) && isHex(t[q]) {
			q++
		}
		if q > end+2 {
			u, err := strconv.ParseUint(t[end+2:q], 16, 64)
			if err == nil {
				f := float64(u)
				if t[0] == '-' {
					f = -f
				}
				return f, false, true
			}
		}
	}
	lt := strings.ToLower(t[end:])
	for _, w := range []string{"infinity", "inf", "nan"} {
		if strings.HasPrefix(lt, w) {
			f, _ := strconv.ParseFloat(t[:end+len(w)], 64)
			return f, true, true
		}
	}
	digits := 0
	for end < len(t) && isDigit(t[end]) {
		end++
		digits++
	}
	if end < len(t) && t[end] == '.' {
		isReal = true
		end++
		for end < len(t) && isDigit(t[end]) {
			end++
			digits++
		}
	}
	if digits == 0 {
		return 0, false, false
	}
	if end < len(t) && (t[end]|0x20) == 'e' {
		q := end + 1
		if q < len(t) && (t[q] == '+' || t[q] == '-') {
			q++
		}
		if q < len(t) && isDigit(t[q]) {
			for q < len(t) && isDigit(t[q]) {
				q++
			}
			end = q
			isReal = true
		}
	}
	f, err := strconv.ParseFloat(t[:end], 64)
	if err != nil && !strings.Contains(err.Error(), "range") {
		return 0, false, false
	}
	return f, isReal, true
}

func floatToInt(f float64) int64 {
	if math.IsNaN(f) || f >= 9.3e18 || f <= -9.3e18 {
		return math.MinInt64
	}
	return int64(f)
}

func fnInt(st *state, n *callNode) Value {
	v := n.arg(st, 0)
	switch v.kind {
	case IntKind:
		return v
	case BoolKind:
		return Int(v.i)
	case RealKind, RelTimeKind:
		return Int(floatToInt(v.fl()))
	case AbsTimeKind:
		return Int(v.i)
	case StringKind:
		f, _, ok := parseNumberPrefix(v.s)
		if !ok {
			return ErrorValue()
		}
		return Int(floatToInt(f))
	case UndefinedKind:
		return v
	}
	return ErrorValue()
}

func fnReal(st *state, n *callNode) Value {
	v := n.arg(st, 0)
	switch v.kind {
	case RealKind:
		return v
	case IntKind, BoolKind, AbsTimeKind:
		return Real(float64(v.i))
	case RelTimeKind:
		return Real(v.fl())
	case StringKind:
		f, _, ok := parseNumberPrefix(v.s)
		if !ok {
			return ErrorValue()
		}
		return Real(f)
	case UndefinedKind:
		return v
	}
	return ErrorValue()
}

// toStr converts a value to the string strcat and string() use.
func toStr(v Value) (string, bool) {
	switch v.kind {
	case StringKind:
		return v.s, true
	case UndefinedKind, ErrorKind:
		return "", false
	case AbsTimeKind:
		return formatAbsTime(v.i, int(v.tz)), true
	case RelTimeKind:
		return formatRelTime(v.fl()), true
	}
	return v.String(), true
}

func fnString(st *state, n *callNode) Value {
	v := n.arg(st, 0)
	switch v.kind {
	case UndefinedKind, ErrorKind, StringKind:
		return v
	}
	s, _ := toStr(v)
	return String(s)
}

func fnBool(st *state, n *callNode) Value {
	v := n.arg(st, 0)
	switch v.kind {
	case BoolKind, UndefinedKind:
		return v
	case IntKind:
		return Bool(v.i != 0)
	case RealKind, RelTimeKind:
		return Bool(v.fl() != 0)
	case StringKind:
		switch strings.ToLower(v.s) {
		case "true":
			return Bool(true)
		case "false":
			return Bool(false)
		}
		return Undefined()
	}
	return ErrorValue()
}

func roundHalfEven(f float64) float64 { return math.RoundToEven(f) }

func roundFn(r func(float64) float64) func(*state, *callNode) Value {
	return func(st *state, n *callNode) Value {
		v := n.arg(st, 0)
		switch v.kind {
		case IntKind:
			return v
		case BoolKind:
			return Int(v.i)
		case RealKind:
			return Int(floatToInt(r(v.fl())))
		case AbsTimeKind:
			return Int(v.i) // as HTCondor: the seconds
		case RelTimeKind:
			return Int(floatToInt(math.Trunc(v.fl())))
		case StringKind:
			f, _, ok := parseNumberPrefix(v.s)
			if !ok {
				return ErrorValue()
			}
			return Int(floatToInt(r(f)))
		}
		return ErrorValue()
	}
}

// toNumber converts a value for the math functions: numbers stay,
// booleans become integers and numeric strings are parsed.
func toNumber(v Value) (Value, bool) {
	switch v.kind {
	case IntKind, RealKind:
		return v, true
	case BoolKind:
		return Real(float64(v.i)), true
	case StringKind:
		f, _, ok := parseNumberPrefix(v.s)
		if !ok {
			return Value{}, false
		}
		return Real(f), true
	}
	return Value{}, false
}

// powReal computes x**y rounded correctly for integral exponents, as C's
// pow does, which math.Pow does not promise.
func powReal(x, y float64) float64 {
	if y != math.Trunc(y) || math.Abs(y) > 4096 || x == 0 || math.IsInf(x, 0) || math.IsNaN(x) {
		return math.Pow(x, y)
	}
	const prec = 8192
	r := new(big.Float).SetPrec(prec).SetFloat64(1)
	bx := new(big.Float).SetPrec(prec).SetFloat64(x)
	for e := int(math.Abs(y)); e > 0; e >>= 1 {
		if e&1 == 1 {
			r.Mul(r, bx)
		}
		bx.Mul(bx, bx)
	}
	if y < 0 {
		r.Quo(new(big.Float).SetPrec(prec).SetFloat64(1), r)
	}
	f, _ := r.Float64()
	return f
}

func fnPow(st *state, n *callNode) Value {
	b, e := n.arg(st, 0), n.arg(st, 1)
	if b.kind == IntKind && e.kind == IntKind && e.i >= 0 {
		// HTCondor computes in floating point and converts back.
		return Int(floatToInt(powReal(float64(b.i), float64(e.i))))
	}
	bn, ok1 := toNumber(b)
	en, ok2 := toNumber(e)
	if !ok1 || !ok2 {
		return ErrorValue()
	}
	return Real(powReal(asFloat(bn), asFloat(en)))
}

func fnQuantize(st *state, n *callNode) Value {
	a := n.arg(st, 0)
	q := n.arg(st, 1)
	an, ok := toNumber(a)
	if !ok {
		return ErrorValue()
	}
	quant := func(qv Value) Value {
		q, ok := toNumber(qv)
		if !ok {
			return ErrorValue()
		}
		if asFloat(q) == 0 {
			return a
		}
		if a.kind == IntKind && q.kind == IntKind {
			return Int((a.i + q.i - 1) / q.i * q.i)
		}
		qf := asFloat(q)
		return Real(math.Ceil(asFloat(an)/qf) * qf)
	}
	if q.kind != ListKind {
		return quant(q)
	}
	if len(q.elems()) == 0 {
		return a
	}
	for _, e := range q.elems() {
		ev, ok := toNumber(e)
		if !ok {
			return ErrorValue()
		}
		if asFloat(ev) >= asFloat(an) {
			return e
		}
	}
	return quant(q.elems()[len(q.elems())-1])
}

func aggregate(kind string, vals []Value) Value {
	var acc Value
	count := 0
	real := false
	for _, v := range vals {
		if v.kind == UndefinedKind {
			continue
		}
		if v.kind == RealKind {
			real = true
		}
		if !numeric(v) {
			return ErrorValue()
		}
		count++
		if count == 1 {
			acc = v
			continue
		}
		switch kind {
		case "sum", "avg":
			acc = binaryOp(opAdd, acc, v)
		case "min", "max":
			op := opLt
			if kind == "max" {
				op = opGt
			}
			c := binaryOp(op, v, acc)
			if c.kind != BoolKind {
				return ErrorValue()
			}
			if c.i != 0 {
				acc = v
			}
		}
		if acc.kind == ErrorKind {
			return acc
		}
	}
	switch kind {
	case "sum":
		if count == 0 {
			return Int(0)
		}
		return acc
	case "avg":
		if count == 0 {
			return Int(0)
		}
		if !numeric(acc) {
			return ErrorValue()
		}
		return binaryOp(opDiv, Real(asFloat(acc)), Int(int64(count)))
	}
	if count == 0 {
		return Undefined()
	}
	if real && acc.kind != RealKind {
		return Real(asFloat(acc))
	}
	if count > 1 && acc.kind == BoolKind {
		return Int(acc.i)
	}
	return acc
}

func listAgg(kind string) func(*state, *callNode) Value {
	return func(st *state, n *callNode) Value {
		l := n.arg(st, 0)
		switch l.kind {
		case UndefinedKind:
			return l
		case ListKind:
			return aggregate(kind, st.listValues(l))
		}
		return ErrorValue()
	}
}

// HTCondor keeps a list's elements unevaluated and evaluates them where
// a function uses them: sum(TARGET.l) evaluates l's elements in the ad
// the call is made in. listLen and listElem give a list's elements so.

// lazyList reports whether v is the value of a list expression with
// elements that are not constants.
func lazyList(v Value) bool {
	return v.lp != nil && v.lp.src != nil && v.lp.src.konst == nil
}

func listLen(v Value) int {
	if lazyList(v) {
		return len(v.lp.src.elems)
	}
	return len(v.elems())
}

func (st *state) listElem(v Value, i int) Value {
	if lazyList(v) {
		return v.lp.src.elems[i].eval(st)
	}
	return v.elems()[i]
}

// listValues returns all of v's elements as listElem does.
func (st *state) listValues(v Value) []Value {
	if !lazyList(v) {
		return v.elems()
	}
	out := make([]Value, len(v.lp.src.elems))
	for i, e := range v.lp.src.elems {
		out[i] = e.eval(st)
	}
	return out
}

func fnRandom(st *state, n *callNode) Value {
	switch len(n.args) {
	case 0:
		return Real(rand.Float64())
	case 1:
		v := n.arg(st, 0)
		switch v.kind {
		case IntKind:
			if v.i <= 0 {
				return ErrorValue()
			}
			return Int(rand.Int64N(v.i))
		case RealKind:
			return Real(rand.Float64() * v.fl())
		case UndefinedKind:
			return v
		}
	}
	return ErrorValue()
}

func fnStrcat(st *state, n *callNode) Value {
	var b strings.Builder
	for i := range n.args {
		v := n.arg(st, i)
		if v.kind == ErrorKind || v.kind == UndefinedKind {
			return v
		}
		s, _ := toStr(v)
		b.WriteString(s)
	}
	return String(b.String())
}

func joinStr(v Value) string {
	s, _ := toStr(v)
	return s
}

func fnJoin(st *state, n *callNode) Value {
	var sep string
	var items []Value
	first := n.arg(st, 0)
	if len(n.args) == 1 {
		switch first.kind {
		case UndefinedKind, ErrorKind:
			return first
		case ListKind:
			items = st.listValues(first)
		default:
			return String("")
		}
	} else {
		switch first.kind {
		case UndefinedKind:
		case ErrorKind:
			return first
		default:
			sep = joinStr(first)
		}
		if len(n.args) == 2 {
			second := n.arg(st, 1)
			switch second.kind {
			case ListKind:
				items = st.listValues(second)
			case UndefinedKind, ErrorKind:
				return second
			default:
				items = []Value{second}
			}
		} else {
			for i := 1; i < len(n.args); i++ {
				items = append(items, n.arg(st, i))
			}
		}
	}
	if len(items) > 0 {
		allUndef := true
		for _, v := range items {
			if v.kind != UndefinedKind {
				allUndef = false
			}
		}
		if allUndef {
			return Undefined()
		}
	}
	var b strings.Builder
	for _, v := range items {
		if v.kind == ErrorKind {
			return v
		}
		if v.kind == UndefinedKind {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(sep)
		}
		b.WriteString(joinStr(v))
	}
	return String(b.String())
}

// splitList splits s at any of the delimiter characters, trimming
// whitespace and dropping empty items, as HTCondor's StringList does.
// splitList splits a string list as HTCondor's StringList does: at any
// of the delimiters, without empty entries. White space is trimmed only
// as a delimiter.
func splitList(s, delims string) []string {
	if delims == "" {
		// As HTCondor: no delimiters, one item.
		if s == "" {
			return nil
		}
		return []string{s}
	}
	var out []string
	f := func(r rune) bool { return strings.ContainsRune(delims, r) }
	for _, p := range strings.FieldsFunc(s, f) {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

const defaultDelims = " ,"

func strArg(st *state, n *callNode, i int) (string, Value, bool) {
	v := n.arg(st, i)
	if v.kind != StringKind {
		if v.kind == UndefinedKind {
			return "", v, false
		}
		return "", ErrorValue(), false
	}
	return v.s, v, true
}

// optStrArg returns argument i as strArg does, or def when the call has
// no argument i.
func optStrArg(st *state, n *callNode, i int, def string) (string, Value, bool) {
	if len(n.args) <= i {
		return def, Value{}, true
	}
	return strArg(st, n, i)
}

func fnSplit(st *state, n *callNode) Value {
	s, bad, ok := strArg(st, n, 0)
	if !ok {
		if bad.kind == UndefinedKind {
			return ErrorValue()
		}
		return bad
	}
	delims, bad, ok := optStrArg(st, n, 1, " ,\t\n")
	if !ok {
		return ErrorValue() // as HTCondor, undefined delimiters included
	}
	parts := splitTokens(s, delims)
	out := make([]Value, len(parts))
	for i, p := range parts {
		out[i] = String(p)
	}
	return List(out)
}

// splitTokens splits s as HTCondor's split() does: a token ends at any
// delimiter; delimiters that are white space, around a token, are
// skipped, and so is one other delimiter after it, so that "a , b" is two
// tokens and "a,,b" three (the middle one empty); an empty first token is
// dropped.
func splitTokens(s, delims string) []string {
	isWS := func(c byte) bool {
		return (c == ' ' || c == '\t' || c == '\n' || c == '\r') && strings.IndexByte(delims, c) >= 0
	}
	out := []string{}
	i := 0
	for i < len(s) {
		start := i
		for i < len(s) && strings.IndexByte(delims, s[i]) < 0 {
			i++
		}
		tok := s[start:i]
		for i < len(s) && isWS(s[i]) {
			i++
		}
		if i < len(s) && strings.IndexByte(delims, s[i]) >= 0 {
			i++
			for i < len(s) && isWS(s[i]) {
				i++
			}
		}
		if tok == "" && len(out) == 0 && start == 0 {
			continue
		}
		out = append(out, tok)
	}
	return out
}

func fnSubstr(st *state, n *callNode) Value {
	sv := n.arg(st, 0)
	ov := n.arg(st, 1)
	lv := Int(math.MaxInt32)
	if len(n.args) == 3 {
		lv = n.arg(st, 2)
	}
	for _, v := range []Value{sv, ov, lv} {
		if v.kind == UndefinedKind {
			return v
		}
	}
	for _, v := range []Value{sv, ov, lv} {
		if v.kind == ErrorKind {
			return v
		}
	}
	if sv.kind != StringKind || (ov.kind != IntKind) || (lv.kind != IntKind) {
		return ErrorValue()
	}
	s := sv.s
	size := int64(len(s))
	off := int64(int32(ov.i))
	lv.i = int64(int32(lv.i))
	if off < 0 {
		off += size
		if off < 0 {
			off = 0
		}
	} else if off > size {
		off = size
	}
	ln := lv.i
	if ln < 0 {
		ln = size - off + ln
		if ln < 0 {
			ln = 0
		}
	}
	if off+ln > size {
		ln = size - off
	}
	return String(s[off : off+ln])
}

// strPair converts the two arguments to strings as toStr does. When
// either is undefined it returns undefined to return instead, else when
// either is an error, an error.
func strPair(st *state, n *callNode) (string, string, Value, bool) {
	a, b := n.arg(st, 0), n.arg(st, 1)
	if a.kind == UndefinedKind || b.kind == UndefinedKind {
		return "", "", Undefined(), false
	}
	as, ok1 := toStr(a)
	bs, ok2 := toStr(b)
	if !ok1 || !ok2 {
		return "", "", ErrorValue(), false
	}
	return as, bs, Value{}, true
}

func strcmpFn(fold bool) func(*state, *callNode) Value {
	return func(st *state, n *callNode) Value {
		as, bs, bad, ok := strPair(st, n)
		if !ok {
			return bad
		}
		if fold {
			return Int(int64(foldCompare(as, bs)))
		}
		return Int(int64(strings.Compare(as, bs)))
	}
}

func caseFn(f func(string) string) func(*state, *callNode) Value {
	return func(st *state, n *callNode) Value {
		v := n.arg(st, 0)
		switch v.kind {
		case UndefinedKind, ErrorKind:
			return v
		}
		s, ok := toStr(v)
		if !ok {
			return ErrorValue()
		}
		return String(asciiCase(f, s))
	}
}

func asciiCase(f func(string) string, s string) string {
	// HTCondor changes the case of ASCII letters only, byte by byte
	// (other bytes, invalid UTF-8 included, stay as they are).
	b := []byte(s)
	for i, c := range b {
		if c < utf8RuneSelf {
			b[i] = f(string(c))[0]
		}
	}
	return string(b)
}

const utf8RuneSelf = 0x80

func fnSize(st *state, n *callNode) Value {
	v := n.arg(st, 0)
	switch v.kind {
	case StringKind:
		return Int(int64(len(v.s)))
	case ListKind:
		return Int(int64(len(v.elems())))
	case AdKind:
		return Int(int64(v.ad.Len()))
	case UndefinedKind:
		return v
	}
	return ErrorValue()
}

// Regular expressions.

type regexCache struct {
	re  *regexp.Regexp
	err bool
	lit *literalMatcher // set when the pattern is a plain literal
}

// literalMatcher matches patterns that are a literal string, optionally
// anchored with ^ and $, without running the regexp engine. $ also
// matches before a final newline, as in PCRE.
type literalMatcher struct {
	s          string
	fold       bool
	begin, end bool
}

func (l *literalMatcher) match(t string) bool {
	eq := func(a, b string) bool {
		if l.fold {
			return strings.EqualFold(a, b)
		}
		return a == b
	}
	switch {
	case l.begin && l.end:
		return eq(t, l.s) || (strings.HasSuffix(t, "\n") && eq(t[:len(t)-1], l.s))
	case l.begin:
		return len(t) >= len(l.s) && eq(t[:len(l.s)], l.s)
	case l.end:
		if strings.HasSuffix(t, "\n") && len(t)-1 >= len(l.s) && eq(t[len(t)-1-len(l.s):len(t)-1], l.s) {
			return true
		}
		return len(t) >= len(l.s) && eq(t[len(t)-len(l.s):], l.s)
	}
	if !l.fold {
		return strings.Contains(t, l.s)
	}
	for i := 0; i+len(l.s) <= len(t); i++ {
		if strings.EqualFold(t[i:i+len(l.s)], l.s) {
			return true
		}
	}
	return false
}

// literalOf recognises literal patterns for the fast path.
func literalOf(pattern string, fold bool) *literalMatcher {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil
	}
	lm := &literalMatcher{fold: fold}
	parts := []*syntax.Regexp{re}
	if re.Op == syntax.OpConcat {
		parts = re.Sub
	}
	if len(parts) > 0 && parts[0].Op == syntax.OpBeginText {
		lm.begin = true
		parts = parts[1:]
	}
	if len(parts) > 0 && parts[len(parts)-1].Op == syntax.OpEndText {
		lm.end = true
		parts = parts[:len(parts)-1]
	}
	if len(parts) != 1 || parts[0].Op != syntax.OpLiteral || parts[0].Flags&syntax.FoldCase != 0 {
		return nil
	}
	for _, r := range parts[0].Rune {
		if r >= utf8RuneSelf {
			return nil
		}
	}
	lm.s = string(parts[0].Rune)
	return lm
}

func (c *regexCache) match(s string) bool {
	if c.lit != nil {
		return c.lit.match(s)
	}
	return c.re.MatchString(asLatin1(s))
}

// HTCondor's regular expressions (PCRE without UTF-8 mode) match bytes:
// "." is one byte and "[é]" the class of é's two bytes. Patterns and
// targets are therefore matched as Latin-1 text, each byte one rune, and
// results are turned back into bytes.

// asLatin1 returns s with every byte as one rune.
func asLatin1(s string) string {
	i := 0
	for i < len(s) && s[i] < utf8RuneSelf {
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for ; i < len(s); i++ {
		b.WriteRune(rune(s[i]))
	}
	return b.String()
}

// fromLatin1 undoes asLatin1.
func fromLatin1(s string) string {
	i := 0
	for i < len(s) && s[i] < utf8RuneSelf {
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	for _, r := range s[i:] {
		if r < 0x100 {
			b.WriteByte(byte(r))
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// regexMemo caches compiled patterns that are computed at run time
// (constant patterns are compiled into the call node). It is a bounded
// memo, reset when full.
var regexMemo struct {
	sync.Mutex
	m map[string]*regexCache
}

const regexMemoMax = 1024

func compileRegex(pattern, opts string) *regexCache {
	key := opts + "\x00" + pattern
	regexMemo.Lock()
	c, ok := regexMemo.m[key]
	regexMemo.Unlock()
	if ok {
		return c
	}
	c = compileRegexUncached(pattern, opts)
	regexMemo.Lock()
	if regexMemo.m == nil || len(regexMemo.m) >= regexMemoMax {
		regexMemo.m = make(map[string]*regexCache)
	}
	regexMemo.m[key] = c
	regexMemo.Unlock()
	return c
}

func compileRegexUncached(pattern, opts string) *regexCache {
	flags := ""
	// HTCondor's option letters are lower case; others are ignored.
	for _, o := range opts {
		switch o {
		case 'i':
			flags += "i"
		case 'm':
			flags += "m"
		case 's':
			flags += "s"
		}
	}
	p := pattern
	if strings.ContainsRune(opts, 'x') {
		p = stripExtended(p)
	}
	p = asLatin1(p)
	if flags != "" {
		p = "(?" + flags + ")" + p
	}
	re, err := regexp.Compile(p)
	c := &regexCache{re: re, err: err != nil}
	if err == nil && !strings.ContainsAny(opts, "msx") {
		c.lit = literalOf(pattern, strings.ContainsRune(opts, 'i'))
	}
	return c
}

func stripExtended(p string) string {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\' && i+1 < len(p):
			b.WriteByte(c)
			b.WriteByte(p[i+1])
			i++
			continue
		case c == '[':
			inClass = true
		case c == ']':
			inClass = false
		case !inClass && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			continue
		case !inClass && c == '#':
			for i < len(p) && p[i] != '\n' {
				i++
			}
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// prepareRegex compiles constant regular expressions once at parse time.
func (n *callNode) prepareRegex() {
	var pi, oi int
	switch n.lname {
	case "regexp":
		pi, oi = 0, 2
	case "regexps", "replace", "replaceall":
		pi, oi = 0, 3
	case "regexpmember":
		pi, oi = 0, 2
	default:
		return
	}
	if len(n.args) <= pi {
		return
	}
	pl, ok := n.args[pi].(*litNode)
	if !ok || pl.v.kind != StringKind {
		return
	}
	opts := ""
	if len(n.args) > oi {
		ol, ok := n.args[oi].(*litNode)
		if !ok || ol.v.kind != StringKind {
			return
		}
		opts = ol.v.s
	}
	n.re = compileRegex(pl.v.s, opts)
}

// evalArgs evaluates up to four arguments into vals and reports the
// error or undefined value to return when any argument is one (error
// first, then undefined), as HTCondor's regular-expression functions do.
func (n *callNode) evalArgs(st *state, vals *[4]Value) (Value, bool) {
	undef := false
	for i, a := range n.args {
		v := a.eval(st)
		vals[i] = v
		if v.kind == ErrorKind {
			return v, false
		}
		if v.kind == UndefinedKind {
			undef = true
		}
	}
	if undef {
		return Undefined(), false
	}
	return Value{}, true
}

func (n *callNode) regexOf(pat, opts Value, hasOpts bool) *regexCache {
	if n.re != nil {
		return n.re
	}
	o := ""
	if hasOpts {
		o = opts.s
	}
	return compileRegex(pat.s, o)
}

func fnRegexp(st *state, n *callNode) Value {
	if n.re != nil {
		// Constant pattern and options: only the target varies.
		t := n.args[1].eval(st)
		switch {
		case t.kind == StringKind && !n.re.err:
			return Bool(n.re.match(t.s))
		case t.kind == ErrorKind || t.kind == UndefinedKind:
			return t
		}
		return ErrorValue()
	}
	var v [4]Value
	if bad, ok := n.evalArgs(st, &v); !ok {
		return bad
	}
	hasOpts := len(n.args) == 3
	if v[0].kind != StringKind || v[1].kind != StringKind || (hasOpts && v[2].kind != StringKind) {
		return ErrorValue()
	}
	rc := n.regexOf(v[0], v[2], hasOpts)
	if rc.err {
		return ErrorValue()
	}
	return Bool(rc.match(v[1].s))
}

// expandSub expands \0..\9 in sub with the submatches of m in s; a
// reference to a group the pattern does not have is an error.
func expandSub(sub, s string, m []int) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(sub); i++ {
		c := sub[i]
		if c == '\\' && i+1 < len(sub) && isDigit(sub[i+1]) {
			k := int(sub[i+1] - '0')
			if 2*k+1 >= len(m) {
				return "", false
			}
			if m[2*k] >= 0 {
				b.WriteString(s[m[2*k]:m[2*k+1]])
			}
			i++
			continue
		}
		b.WriteByte(c)
	}
	return b.String(), true
}

func replaceFn(kind string) func(*state, *callNode) Value {
	return func(st *state, n *callNode) Value {
		var v [4]Value
		if bad, ok := n.evalArgs(st, &v); !ok {
			return bad
		}
		hasOpts := len(n.args) == 4
		for i := range n.args {
			if v[i].kind != StringKind {
				return ErrorValue()
			}
		}
		rc := n.regexOf(v[0], v[3], hasOpts)
		if rc.err {
			return ErrorValue()
		}
		s, sub := asLatin1(v[1].s), asLatin1(v[2].s)
		global := kind == "replaceall" || (hasOpts && strings.ContainsRune(v[3].s, 'g'))
		// regexps returns only the substitution unless option f asks for
		// the full target with substitutions applied.
		if kind == "regexps" && !(hasOpts && strings.ContainsRune(v[3].s, 'f')) {
			m := rc.re.FindStringSubmatchIndex(s)
			if m == nil {
				return latin1String("")
			}
			if global {
				var b strings.Builder
				for _, mm := range rc.re.FindAllStringSubmatchIndex(s, -1) {
					x, ok := expandSub(sub, s, mm)
					if !ok {
						return ErrorValue()
					}
					b.WriteString(x)
				}
				return latin1String(b.String())
			}
			x, ok := expandSub(sub, s, m)
			if !ok {
				return ErrorValue()
			}
			return latin1String(x)
		}
		var all [][]int
		if global {
			all = rc.re.FindAllStringSubmatchIndex(s, -1)
			for _, m := range all {
				if m[0] == m[1] {
					return ErrorValue()
				}
			}
		} else if m := rc.re.FindStringSubmatchIndex(s); m != nil {
			all = [][]int{m}
		}
		if len(all) == 0 {
			return latin1String(s)
		}
		var b strings.Builder
		last := 0
		for _, m := range all {
			b.WriteString(s[last:m[0]])
			x, ok := expandSub(sub, s, m)
			if !ok {
				return ErrorValue()
			}
			b.WriteString(x)
			last = m[1]
		}
		b.WriteString(s[last:])
		return latin1String(b.String())
	}
}

// latin1String is the string value of a Latin-1 result (see asLatin1).
func latin1String(s string) Value { return String(fromLatin1(s)) }

func fnRegexpMember(st *state, n *callNode) Value {
	var v [4]Value
	if bad, ok := n.evalArgs(st, &v); !ok {
		return bad
	}
	hasOpts := len(n.args) == 3
	if v[0].kind != StringKind || v[1].kind != ListKind || (hasOpts && v[2].kind != StringKind) {
		return ErrorValue()
	}
	rc := n.regexOf(v[0], v[2], hasOpts)
	undef := false
	for _, e := range v[1].elems() {
		switch e.kind {
		case StringKind:
			if rc.err {
				return ErrorValue()
			}
			if rc.match(e.s) {
				return Bool(true)
			}
		case UndefinedKind:
			undef = true
		default:
			return ErrorValue()
		}
	}
	if undef {
		return Undefined()
	}
	return Bool(false)
}

// String list functions.

func listAndDelims(st *state, n *callNode, li, di int) ([]string, Value, bool) {
	items, bad, ok := listAndDelimsOrUndefined(st, n, li, di)
	if !ok && bad.kind == UndefinedKind {
		bad = ErrorValue() // as HTCondor: an undefined list is an error
	}
	return items, bad, ok
}

// listAndDelimsOrUndefined is listAndDelims with an undefined list
// reported as undefined.
func listAndDelimsOrUndefined(st *state, n *callNode, li, di int) ([]string, Value, bool) {
	s, bad, ok := strArg(st, n, li)
	if !ok {
		return nil, bad, false
	}
	delims, bad, ok := optStrArg(st, n, di, defaultDelims)
	if !ok {
		return nil, bad, false
	}
	return splitList(s, delims), Value{}, true
}

func fnStringListSize(st *state, n *callNode) Value {
	items, bad, ok := listAndDelims(st, n, 0, 1)
	if !ok {
		return bad
	}
	return Int(int64(len(items)))
}

func stringListAgg(kind string) func(*state, *callNode) Value {
	return func(st *state, n *callNode) Value {
		items, bad, ok := listAndDelims(st, n, 0, 1)
		if !ok {
			return bad
		}
		// As HTCondor: the numbers are added or compared as doubles,
		// and the result is converted back to an integer when every
		// entry is one.
		// HTCondor starts max from FLT_MIN (the least positive float)
		// and min from FLT_MAX, so a list of negative numbers has
		// maximum 1.17549435e-38.
		var acc float64
		switch kind {
		case "max":
			acc = math.SmallestNonzeroFloat32 * (1 << 23)
		case "min":
			acc = math.MaxFloat32
		}
		allInt := true
		for i, it := range items {
			f, _, ok := parseNumberPrefix(it)
			if !ok {
				return ErrorValue()
			}
			_, err := strconv.ParseInt(strings.TrimSpace(it), 10, 64)
			allInt = allInt && err == nil
			switch {
			case kind == "sum" || kind == "avg":
				if i == 0 {
					acc = f
				} else {
					acc += f
				}
			case kind == "min" && f < acc, kind == "max" && f > acc:
				acc = f
			}
		}
		if len(items) == 0 {
			if kind == "min" || kind == "max" {
				return Undefined()
			}
			return Real(0)
		}
		if kind == "avg" {
			acc /= float64(len(items))
		}
		if allInt {
			return Int(cvtInt64(acc))
		}
		return Real(acc)
	}
}

// cvtInt64 converts f to an integer as C does on amd64: NaN and values
// out of range give the least integer.
func cvtInt64(f float64) int64 {
	if math.IsNaN(f) || f >= 1<<63 || f < -(1<<63) {
		return math.MinInt64
	}
	return int64(f)
}

// cvtInt32 is cvtInt64 for a C int.
func cvtInt32(f float64) int32 {
	if math.IsNaN(f) || f >= 1<<31 || f < -(1<<31) {
		return math.MinInt32
	}
	return int32(f)
}

// stringListArgs evaluates the arguments of a string-list function:
// the values, and the delimiters (the default ones when the call has none
// or, as HTCondor, when they are undefined). ok is false when the
// delimiter argument is neither a string nor undefined: an error.
func stringListArgs(st *state, n *callNode, k int) (vals [3]Value, delims string, ok bool) {
	for i := 0; i < k && i < len(n.args); i++ {
		vals[i] = n.arg(st, i)
	}
	delims = defaultDelims
	if len(n.args) > k {
		d := n.arg(st, k)
		switch d.kind {
		case StringKind:
			delims = d.s
		case UndefinedKind:
		default:
			return vals, "", false
		}
	}
	return vals, delims, true
}

func stringListMember(fold bool) func(*state, *callNode) Value {
	return func(st *state, n *callNode) Value {
		v, delims, ok := stringListArgs(st, n, 2)
		x, l := v[0], v[1]
		// As HTCondor: a list or delimiters of another type are an
		// error; an undefined item is not a member of a list, and
		// undefined when the list is undefined too.
		if !ok || (l.kind != StringKind && l.kind != UndefinedKind) {
			return ErrorValue()
		}
		if x.kind == UndefinedKind {
			if l.kind == UndefinedKind {
				return Undefined()
			}
			return Bool(false)
		}
		if x.kind != StringKind {
			return ErrorValue()
		}
		if l.kind == UndefinedKind {
			return Bool(false)
		}
		for _, it := range splitList(l.s, delims) {
			if it == x.s || (fold && strings.EqualFold(it, x.s)) {
				return Bool(true)
			}
		}
		return Bool(false)
	}
}

func fnStringListsIntersect(st *state, n *callNode) Value {
	v, delims, ok := stringListArgs(st, n, 2)
	// As HTCondor: errors first, then undefined, then other types.
	for i := range n.args {
		if i < 2 && v[i].kind == ErrorKind {
			return ErrorValue()
		}
	}
	if v[0].kind == UndefinedKind || v[1].kind == UndefinedKind {
		return Undefined()
	}
	if !ok || v[0].kind != StringKind || v[1].kind != StringKind {
		return ErrorValue()
	}
	if delims == "" {
		delims = defaultDelims // here no delimiters are the default ones
	}
	a, b := splitList(v[0].s, delims), splitList(v[1].s, delims)
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return Bool(true)
			}
		}
	}
	return Bool(false)
}

func stringListSubset(fold bool) func(*state, *callNode) Value {
	return func(st *state, n *callNode) Value {
		v, delims, ok := stringListArgs(st, n, 2)
		// As HTCondor: a first list or delimiters of another type are
		// an error; an undefined or empty first list is a subset of
		// anything, and nothing else is a subset of an undefined list.
		for _, x := range v[:2] {
			if x.kind != StringKind && x.kind != UndefinedKind {
				return ErrorValue()
			}
		}
		if !ok {
			return ErrorValue()
		}
		if v[0].kind == UndefinedKind {
			if v[1].kind == UndefinedKind {
				return Undefined()
			}
			return Bool(true)
		}
		a := splitList(v[0].s, delims)
		if len(a) == 0 {
			return Bool(true)
		}
		if v[1].kind == UndefinedKind {
			return Bool(false)
		}
		b := splitList(v[1].s, delims)
	outer:
		for _, x := range a {
			for _, y := range b {
				if x == y || (fold && strings.EqualFold(x, y)) {
					continue outer
				}
			}
			return Bool(false)
		}
		return Bool(true)
	}
}

func fnStringListRegexpMember(st *state, n *callNode) Value {
	pat, bad, ok := strArg(st, n, 0)
	if !ok {
		return bad
	}
	items, bad, ok := listAndDelims(st, n, 1, 2)
	if !ok {
		return bad
	}
	opts, bad, ok := optStrArg(st, n, 3, "")
	if !ok {
		return bad
	}
	rc := compileRegex(pat, opts)
	if rc.err {
		return ErrorValue()
	}
	for _, it := range items {
		if rc.re.MatchString(it) {
			return Bool(true)
		}
	}
	return Bool(false)
}

func memberFn(strict bool) func(*state, *callNode) Value {
	return func(st *state, n *callNode) Value {
		x, l := n.arg(st, 0), n.arg(st, 1)
		if (!strict && x.kind == UndefinedKind) || l.kind == UndefinedKind {
			return Undefined()
		}
		if l.kind != ListKind || (!strict && x.kind == ErrorKind) || x.kind == ListKind || x.kind == AdKind {
			return ErrorValue()
		}
		if strict {
			for i := range listLen(l) {
				if e := st.listElem(l, i); e.kind != ListKind && e.kind != AdKind && sameAs(x, e) {
					return Bool(true)
				}
			}
			return Bool(false)
		}
		for i := range listLen(l) {
			r := binaryOp(opEq, x, st.listElem(l, i))
			if r.kind == BoolKind && r.i != 0 {
				return Bool(true)
			}
		}
		return Bool(false)
	}
}

var compareOps = map[string]opcode{
	"<": opLt, "<=": opLe, "!=": opNe, "==": opEq, ">": opGt, ">=": opGe,
	"is": opIs, "isnt": opIsnt, // as HTCondor: not "=?=" or "=!=", lower case only
}

func compareFn(all bool) func(*state, *callNode) Value {
	return func(st *state, n *callNode) Value {
		ov, l, t := n.arg(st, 0), n.arg(st, 1), n.arg(st, 2)
		if ov.kind == UndefinedKind {
			return Undefined()
		}
		if ov.kind != StringKind {
			return ErrorValue()
		}
		op, ok := compareOps[ov.s]
		if !ok {
			return ErrorValue()
		}
		if l.kind != ListKind {
			if l.kind == UndefinedKind {
				return Undefined()
			}
			return ErrorValue()
		}
		for i := range listLen(l) {
			r := binaryOp(op, st.listElem(l, i), t)
			if r.kind == ErrorKind {
				return r
			}
			hit := r.kind == BoolKind && r.i != 0
			if all && !hit {
				return Bool(false)
			}
			if !all && hit {
				return Bool(true)
			}
		}
		return Bool(all)
	}
}

func fnDebug(st *state, n *callNode) Value {
	return n.arg(st, 0)
}

func splitAt(slot bool) func(*state, *callNode) Value {
	return func(st *state, n *callNode) Value {
		s, ok := n.arg(st, 0).StringValue()
		if !ok {
			return ErrorValue() // as HTCondor, undefined included
		}
		i := strings.IndexByte(s, '@')
		if i < 0 {
			if slot {
				return List([]Value{String(""), String(s)})
			}
			return List([]Value{String(s), String("")})
		}
		return List([]Value{String(s[:i]), String(s[i+1:])})
	}
}

// Versions.

// versionCompare compares version strings with digit runs compared as
// numbers, returning a signed difference as HTCondor's versionCmp does.
func versionCompare(a, b string) int {
	i, j := 0, 0
	for {
		if i < len(a) && j < len(b) && isDigit(a[i]) && isDigit(b[j]) {
			da, _ := leadingNum(a[i:])
			db, _ := leadingNum(b[j:])
			if da != db {
				za, zb := len(da) > 1 && da[0] == '0', len(db) > 1 && db[0] == '0'
				switch {
				case (za || zb) && len(da) != len(db):
					return len(db) - len(da)
				case len(da) == len(db):
					for k := 0; k < len(da) && k < len(db); k++ {
						if da[k] != db[k] {
							return int(da[k]) - int(db[k])
						}
					}
					return len(da) - len(db)
				}
				return len(da) - len(db)
			}
			i += len(da)
			j += len(db)
			continue
		}
		var ca, cb int
		if i < len(a) {
			ca = int(a[i])
		}
		if j < len(b) {
			cb = int(b[j])
		}
		if ca != cb {
			return ca - cb
		}
		if ca == 0 {
			return 0
		}
		i++
		j++
	}
}

func leadingNum(s string) (string, string) {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return s[:i], s[i:]
}

func versionFn(kind string) func(*state, *callNode) Value {
	return func(st *state, n *callNode) Value {
		as, bs, bad, ok := strPair(st, n)
		if !ok {
			return bad
		}
		c := versionCompare(as, bs)
		switch kind {
		case "cmp":
			return Int(int64(c))
		case ">":
			return Bool(c > 0)
		case ">=":
			return Bool(c >= 0)
		case "<":
			return Bool(c < 0)
		case "<=":
			return Bool(c <= 0)
		}
		return Bool(c == 0)
	}
}

// fnVersionInRange is version_in_range(v, lo, hi) with HTCondor's
// handling of other types: an undefined version is an error, a version or
// lower bound that is not a string is false, and an upper bound that is
// not a string is no bound.
func fnVersionInRange(st *state, n *callNode) Value {
	vv, lv, hv := n.arg(st, 0), n.arg(st, 1), n.arg(st, 2)
	if vv.kind == UndefinedKind {
		return ErrorValue()
	}
	if lv.kind == UndefinedKind || hv.kind == UndefinedKind {
		return Undefined()
	}
	v, ok := versionText(vv)
	if !ok {
		return Bool(false)
	}
	lo, ok := versionText(lv)
	if !ok || versionCompare(v, lo) < 0 {
		return Bool(false)
	}
	hi, ok := versionText(hv)
	return Bool(!ok || versionCompare(v, hi) <= 0)
}

// versionText is a version argument as text: a string, or a number
// written out.
func versionText(v Value) (string, bool) {
	switch v.kind {
	case StringKind:
		return v.s, true
	case IntKind:
		return strconv.FormatInt(v.i, 10), true
	case RealKind:
		return strconv.FormatFloat(v.fl(), 'g', -1, 64), true
	}
	return "", false
}

// Time.

func fnTime(st *state, n *callNode) Value {
	return Int(time.Now().Unix())
}

func fnAbsTime(st *state, n *callNode) Value {
	_, off := time.Now().Zone()
	if len(n.args) == 0 {
		return AbsTime(time.Now().Unix(), off)
	}
	v := n.arg(st, 0)
	if len(n.args) == 2 {
		o := n.arg(st, 1)
		switch o.kind {
		case IntKind:
			off = int(int32(o.i)) // as HTCondor: a C int
		case RealKind, RelTimeKind:
			off = int(cvtInt32(o.fl()))
		default:
			return ErrorValue()
		}
	}
	switch v.kind {
	case IntKind:
		return AbsTime(int64(int32(v.i)), off) // as HTCondor: a C int
	case RelTimeKind:
		return AbsTime(int64(cvtInt32(v.fl())), off)
	case RealKind:
		return AbsTime(int64(cvtInt32(v.fl())), off) // as HTCondor: a C int
	case AbsTimeKind:
		return v
	case StringKind:
		secs, tz, ok := parseAbsTime(v.s)
		if !ok {
			if len(n.args) == 2 {
				return v // as HTCondor: the string itself
			}
			return ErrorValue()
		}
		return AbsTime(secs, tz)
	case UndefinedKind:
		return v
	}
	return ErrorValue()
}

func parseAbsTime(s string) (int64, int, bool) {
	s = strings.TrimSpace(s)
	layouts := []string{
		"2006-01-02T15:04:05Z07:00", "2006-01-02T15:04:05Z0700", "2006-01-02T15:04:05",
		"2006-01-02 15:04:05Z07:00", "2006-01-02 15:04:05", "2006-01-02", "20060102T150405Z0700", "20060102T150405",
	}
	for _, l := range layouts {
		if t, err := time.Parse(l, s); err == nil {
			_, off := t.Zone()
			if !strings.Contains(l, "Z") {
				t2, err := time.ParseInLocation(l, s, time.Local)
				if err == nil {
					t = t2
					_, off = t.Zone()
				}
			}
			return t.Unix(), off, true
		}
	}
	return 0, 0, false
}

// formatAbsTime prints an absolute time as HTCondor does, ISO 8601 with
// the zone offset ("-00:00" for UTC).
func formatAbsTime(secs int64, off int) string {
	t := time.Unix(secs, 0).In(time.FixedZone("", off))
	sign := byte('-')
	if off > 0 {
		sign = '+'
	}
	a := off
	if a < 0 {
		a = -a
	}
	return t.Format("2006-01-02T15:04:05") + string(sign) + pad2(int64(a/3600)) + ":" + pad2(int64(a/60%60))
}

func fnRelTime(st *state, n *callNode) Value {
	v := n.arg(st, 0)
	switch v.kind {
	case IntKind:
		return RelTime(float64(int32(v.i))) // as HTCondor: a C int
	case RealKind:
		return RelTime(v.fl())
	case RelTimeKind, UndefinedKind:
		return v
	case AbsTimeKind:
		return RelTime(float64(v.i))
	case StringKind:
		// A literal string that is not a time is a syntax error (see
		// timeLiteral); at run time, as in HTCondor, it is zero.
		f, _ := parseRelTime(v.s)
		return RelTime(f)
	}
	return ErrorValue()
}

// parseRelTime parses "[-][D+]HH:MM:SS[.frac]" or "[-]NdNhNmNs".
func parseRelTime(s string) (float64, bool) {
	s = strings.TrimSpace(s)
	neg := false
	if strings.HasPrefix(s, "-") {
		neg = true
		s = s[1:]
	}
	var total float64
	if strings.Contains(s, ":") || strings.Contains(s, "+") || !strings.ContainsAny(s, "dhmsDHMS") {
		days := 0.0
		if i := strings.IndexByte(s, '+'); i >= 0 {
			d, err := strconv.ParseFloat(s[:i], 64)
			if err != nil {
				return 0, false
			}
			days = d
			s = s[i+1:]
		}
		parts := strings.Split(s, ":")
		if len(parts) > 3 {
			return 0, false
		}
		mult := 1.0
		for i := len(parts) - 1; i >= 0; i-- {
			f, err := strconv.ParseFloat(parts[i], 64)
			if err != nil {
				return 0, false
			}
			total += f * mult
			mult *= 60
		}
		total += days * 86400
	} else {
		num := ""
		for _, c := range s {
			switch unicode.ToLower(c) {
			case 'd', 'h', 'm', 's':
				f, err := strconv.ParseFloat(num, 64)
				if err != nil {
					return 0, false
				}
				total += f * map[rune]float64{'d': 86400, 'h': 3600, 'm': 60, 's': 1}[unicode.ToLower(c)]
				num = ""
			default:
				num += string(c)
			}
		}
		if strings.TrimSpace(num) != "" {
			return 0, false
		}
	}
	if neg {
		total = -total
	}
	return total, true
}

// formatRelTime prints a relative time as HTCondor does: [-][D+]HH:MM:SS
// with leading zero fields dropped and whole seconds.
func formatRelTime(secs float64) string {
	var b strings.Builder
	// As HTCondor: the seconds as a C int, which out of range is the
	// least int and stays negative when negated.
	w32 := cvtInt32(secs)
	if w32 < 0 {
		b.WriteByte('-')
		w32 = -w32
	}
	whole := int64(w32)
	d, h, m, s := whole/86400, whole%86400/3600, whole%3600/60, whole%60
	switch {
	case d != 0:
		b.WriteString(strconv.FormatInt(d, 10))
		b.WriteByte('+')
		b.WriteString(pad2(h) + ":" + pad2(m) + ":" + pad2(s))
	case h != 0:
		b.WriteString(pad2(h) + ":" + pad2(m) + ":" + pad2(s))
	case m != 0:
		b.WriteString(pad2(m) + ":" + pad2(s))
	default:
		b.WriteString(pad2(s))
	}
	return b.String()
}

// padSpace2 formats x as C's %2d.
func padSpace2(x int) string {
	if x >= 0 && x < 10 {
		return " " + strconv.Itoa(x)
	}
	return strconv.Itoa(x)
}

func pad2(x int64) string {
	if x >= 0 && x < 10 {
		return "0" + strconv.FormatInt(x, 10)
	}
	return strconv.FormatInt(x, 10)
}

func fnInterval(st *state, n *callNode) Value {
	v := n.arg(st, 0)
	var secs int64
	switch v.kind {
	case IntKind, BoolKind:
		secs = v.i
	case RealKind, RelTimeKind:
		secs = int64(v.fl())
	case AbsTimeKind:
		secs = v.i
	case StringKind:
		f, _, ok := parseNumberPrefix(v.s)
		if !ok {
			return ErrorValue()
		}
		secs = int64(f)
	default:
		return ErrorValue()
	}
	secs = int64(int32(secs))
	neg := secs < 0
	if neg {
		secs = -secs
	}
	d, h, m, s := secs/86400, secs/3600%24, secs/60%60, secs%60
	var out string
	switch {
	case d > 0:
		out = strconv.FormatInt(d, 10) + "+" + pad2(h) + ":" + pad2(m) + ":" + pad2(s)
	case h > 0:
		out = strconv.FormatInt(h, 10) + ":" + pad2(m) + ":" + pad2(s)
	case m > 0:
		out = strconv.FormatInt(m, 10) + ":" + pad2(s)
	default:
		out = strconv.FormatInt(s, 10)
	}
	if neg {
		out = "-" + out
	}
	return String(out)
}

func fnFormatTime(st *state, n *callNode) Value {
	secs := time.Now().Unix()
	_, off := time.Now().Zone()
	abs := false
	if len(n.args) >= 1 {
		v := n.arg(st, 0)
		switch v.kind {
		case IntKind:
			secs = v.i
		case RealKind:
			secs = int64(cvtInt32(v.fl())) // as HTCondor: a C int
		case AbsTimeKind:
			secs, off = v.i, int(v.tz)
			abs = true
		default:
			return ErrorValue()
		}
	}
	format, bad, ok := optStrArg(st, n, 1, "%c")
	if !ok {
		if bad.kind == UndefinedKind {
			return ErrorValue()
		}
		return bad
	}
	zone := ""
	if off == 0 {
		zone = "UTC" // as HTCondor's %Z for a UTC time
	}
	t := time.Unix(secs, 0).In(time.FixedZone(zone, off))
	if len(n.args) >= 1 && !abs {
		t = time.Unix(secs, 0).Local()
	}
	return String(strftime(t, format))
}

func strftime(t time.Time, f string) string {
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] != '%' || i+1 >= len(f) {
			b.WriteByte(f[i])
			continue
		}
		i++
		switch f[i] {
		case 'a':
			b.WriteString(t.Format("Mon"))
		case 'A':
			b.WriteString(t.Format("Monday"))
		case 'b', 'h':
			b.WriteString(t.Format("Jan"))
		case 'B':
			b.WriteString(t.Format("January"))
		case 'c':
			b.WriteString(t.Format("Mon Jan _2 15:04:05 2006"))
		case 'C':
			b.WriteString(pad2(int64(t.Year() / 100)))
		case 'k':
			b.WriteString(padSpace2(t.Hour()))
		case 'l':
			b.WriteString(padSpace2((t.Hour()+11)%12 + 1))
		case 'P':
			b.WriteString(strings.ToLower(t.Format("PM")))
		case 'r':
			b.WriteString(t.Format("03:04:05 PM"))
		case 'R':
			b.WriteString(t.Format("15:04"))
		case 'x':
			b.WriteString(t.Format("01/02/06"))
		case 'X':
			b.WriteString(t.Format("15:04:05"))
		case 'g':
			y, _ := t.ISOWeek()
			b.WriteString(pad2(int64(y % 100)))
		case 'G':
			y, _ := t.ISOWeek()
			b.WriteString(strconv.Itoa(y))
		case 'V':
			_, w := t.ISOWeek()
			b.WriteString(pad2(int64(w)))
		case 'U':
			b.WriteString(pad2(int64((t.YearDay() + 6 - int(t.Weekday())) / 7)))
		case 'W':
			b.WriteString(pad2(int64((t.YearDay() + 6 - (int(t.Weekday())+6)%7) / 7)))
		case 'd':
			b.WriteString(t.Format("02"))
		case 'e':
			b.WriteString(t.Format("_2"))
		case 'D':
			b.WriteString(t.Format("01/02/06"))
		case 'F':
			b.WriteString(t.Format("2006-01-02"))
		case 'H':
			b.WriteString(t.Format("15"))
		case 'I':
			b.WriteString(t.Format("03"))
		case 'j':
			b.WriteString(strconv.Itoa(1000 + t.YearDay())[1:])
		case 'm':
			b.WriteString(t.Format("01"))
		case 'M':
			b.WriteString(t.Format("04"))
		case 'n':
			b.WriteByte('\n')
		case 'p':
			b.WriteString(t.Format("PM"))
		case 's':
			b.WriteString(strconv.FormatInt(t.Unix(), 10))
		case 'S':
			b.WriteString(t.Format("05"))
		case 't':
			b.WriteByte('\t')
		case 'T':
			b.WriteString(t.Format("15:04:05"))
		case 'u':
			wd := int(t.Weekday())
			if wd == 0 {
				wd = 7
			}
			b.WriteString(strconv.Itoa(wd))
		case 'w':
			b.WriteString(strconv.Itoa(int(t.Weekday())))
		case 'y':
			b.WriteString(t.Format("06"))
		case 'Y':
			b.WriteString(t.Format("2006"))
		case 'z':
			b.WriteString(t.Format("-0700"))
		case 'Z':
			b.WriteString(t.Format("MST"))
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(f[i])
		}
	}
	return b.String()
}

// contextFn implements evalInEachContext (count false) and countMatches:
// the first argument is evaluated, unevaluated, in each ad of the list.
func contextFn(count bool) func(*state, *callNode) Value {
	return func(st *state, n *callNode) Value {
		l := n.arg(st, 1)
		if l.kind != ListKind {
			if l.kind == UndefinedKind {
				if count {
					return Int(0)
				}
				return Undefined()
			}
			return ErrorValue()
		}
		var out []Value
		matches := int64(0)
		for _, e := range l.elems() {
			if e.kind != AdKind {
				if !count {
					// As HTCondor: an undefined element gives
					// undefined, any other non-ad error.
					if e.kind == UndefinedKind {
						out = append(out, e)
					} else {
						out = append(out, ErrorValue())
					}
				}
				continue
			}
			saved := st.cur
			st.cur = e.ad
			v := n.args[0].eval(st)
			st.cur = saved
			if count {
				if v.IsTrue() {
					matches++
				}
				continue
			}
			out = append(out, v)
		}
		if count {
			return Int(matches)
		}
		if out == nil {
			out = []Value{}
		}
		return List(out)
	}
}

// fnEnvV1ToV2 converts a V1 environment string ("A=1;B=2", with "|" or
// ";" between entries) to the V2 form ("A=1 B=2", quoted where needed).
func fnEnvV1ToV2(st *state, n *callNode) Value {
	s, bad, ok := strArg(st, n, 0)
	if !ok {
		return bad
	}
	sep := ";"
	if strings.HasPrefix(s, "|") {
		sep, s = "|", s[1:]
	}
	vals := map[string]string{}
	for _, kv := range strings.FieldsFunc(s, func(r rune) bool { return r == rune(sep[0]) || r == '\n' }) {
		k, v, _ := strings.Cut(kv, "=")
		if k == "" || len(k) == len(kv) {
			return ErrorValue() // as HTCondor: every entry needs NAME=
		}
		vals[k] = v
	}
	return String(formatEnvV2(vals))
}

// formatEnvV2 writes an environment as HTCondor does: V2 syntax, the
// names sorted.
func formatEnvV2(vals map[string]string) string {
	names := make([]string, 0, len(vals))
	for k := range vals {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = quoteEnvV2(k + "=" + vals[k])
	}
	return strings.Join(parts, " ")
}

// quoteEnvV2 quotes one NAME=VALUE entry as HTCondor writes V2
// environments: each run of white space or single quotes inside single
// quotes, a single quote doubled.
func quoteEnvV2(kv string) string {
	if !strings.ContainsAny(kv, " \t\n\r'") {
		return kv
	}
	var b strings.Builder
	quoted := false
	for i := 0; i < len(kv); i++ {
		c := kv[i]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\'' {
			if !quoted {
				b.WriteByte('\'')
				quoted = true
			}
			if c == '\'' {
				b.WriteByte('\'')
			}
		} else if quoted {
			b.WriteByte('\'')
			quoted = false
		}
		b.WriteByte(c)
	}
	if quoted {
		b.WriteByte('\'')
	}
	return b.String()
}

// splitEnvV2 splits a V2 environment string into NAME=VALUE entries.
func splitEnvV2(s string) []string {
	var out []string
	var cur strings.Builder
	inQuote, have := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'' && inQuote && i+1 < len(s) && s[i+1] == '\'':
			cur.WriteByte('\'')
			i++
		case c == '\'':
			inQuote = !inQuote
			have = true
		case (c == ' ' || c == '\t' || c == '\n' || c == '\r') && !inQuote:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteByte(c)
			have = true
		}
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}

// fnMergeEnvironment merges V2 environment strings; later ones win.
func fnMergeEnvironment(st *state, n *callNode) Value {
	vals := map[string]string{}
	for i := range n.args {
		v := n.arg(st, i)
		switch v.kind {
		case UndefinedKind:
			continue
		case StringKind:
		default:
			return ErrorValue()
		}
		if strings.ContainsRune(v.s, '"') {
			return ErrorValue() // as HTCondor: not a V2 environment
		}
		for _, kv := range splitEnvV2(v.s) {
			k, val, found := strings.Cut(kv, "=")
			if !found || k == "" {
				return ErrorValue() // as HTCondor: every entry needs NAME=
			}
			vals[k] = val
		}
	}
	return String(formatEnvV2(vals))
}

// fnUserHome returns a user's home directory, or the default.
func fnUserHome(st *state, n *callNode) Value {
	name, bad, ok := strArg(st, n, 0)
	def := Undefined()
	if len(n.args) == 2 {
		def = n.arg(st, 1)
	}
	if !ok {
		if bad.kind == UndefinedKind {
			return def
		}
		return bad
	}
	if u, err := user.Lookup(name); err == nil && u.HomeDir != "" {
		return String(u.HomeDir)
	}
	return def
}

// fnUserMap has no map files configured in pond: every user is unmapped,
// so it returns the default group when one is given, else undefined.
func fnUserMap(st *state, n *callNode) Value {
	if len(n.args) == 4 {
		return n.arg(st, 3)
	}
	return Undefined()
}
