package classad

import "fmt"

// Attribute names used by matchmaking.
const (
	AttrRequirements = "Requirements"
	AttrRank         = "Rank"
)

// Match reports whether a and b match symmetrically: each ad's
// Requirements evaluates to true (or a non-zero number) with the other ad
// as TARGET. An ad without Requirements matches nothing, as in HTCondor.
func Match(a, b *Ad) bool {
	return requirementsHold(a, b) && requirementsHold(b, a)
}

func requirementsHold(my, target *Ad) bool {
	at := my.lookupLower("requirements")
	if at == nil {
		return false
	}
	return truth(EvalWith(at.expr, my, target)) == 1
}

// Rank evaluates my's Rank with target as TARGET and returns it as a
// float64; a missing, undefined, error or non-numeric Rank is 0.
func Rank(my, target *Ad) float64 {
	at := my.lookupLower("rank")
	if at == nil {
		return 0
	}
	f, _ := EvalWith(at.expr, my, target).NumberValue()
	return f
}

// Program is an expression compiled for repeated evaluation against many
// ads. Attribute names are interned (lower-cased once), constant lists are
// pre-built and constant regular expressions pre-compiled, so evaluation
// of a typical Requirements expression allocates nothing. A Program is
// safe for concurrent use.
type Program struct {
	src  string
	expr Expr
}

// Compile parses src into a Program.
func Compile(src string) (*Program, error) {
	e, err := ParseExpr(src)
	if err != nil {
		return nil, fmt.Errorf("classad: compile %q: %w", src, err)
	}
	return &Program{src: src, expr: e}, nil
}

// CompileExpr wraps an already parsed expression.
func CompileExpr(e Expr) *Program { return &Program{src: e.String(), expr: e} }

// String returns the program's expression in new syntax.
func (p *Program) String() string { return p.expr.String() }

// Expr returns the compiled expression.
func (p *Program) Expr() Expr { return p.expr }

// Eval evaluates the program with my as MY (and the scope of bare names)
// and target as TARGET; either may be nil.
func (p *Program) Eval(my, target *Ad) Value {
	st := statePool.Get().(*state)
	st.left, st.right, st.cur = my, target, my
	v := p.expr.eval(st)
	st.left, st.right, st.cur = nil, nil, nil
	st.stack = st.stack[:0]
	st.depth = 0
	st.steps = 0
	statePool.Put(st)
	return v
}

// EvalBool reports whether the program evaluates to true or to a non-zero
// number, the test HTCondor applies to Requirements and START.
func (p *Program) EvalBool(my, target *Ad) bool {
	return truth(p.Eval(my, target)) == 1
}

// EvalNumber evaluates the program and returns it as a float64 with ok
// false when the result is not a number (as for Rank).
func (p *Program) EvalNumber(my, target *Ad) (float64, bool) {
	return p.Eval(my, target).NumberValue()
}

// Matcher holds one ad's compiled Requirements and Rank for matching it
// against many candidate ads.
type Matcher struct {
	ad           *Ad
	requirements *Program // nil: the ad has no Requirements and matches nothing
	rank         *Program // nil means 0
}

// NewMatcher compiles ad's Requirements and Rank.
func NewMatcher(ad *Ad) *Matcher {
	m := &Matcher{ad: ad}
	if e, ok := ad.Lookup(AttrRequirements); ok {
		m.requirements = CompileExpr(e)
	}
	if e, ok := ad.Lookup(AttrRank); ok {
		m.rank = CompileExpr(e)
	}
	return m
}

// Ad returns the ad the matcher was built from.
func (m *Matcher) Ad() *Ad { return m.ad }

// Matches reports whether the matcher's Requirements hold against
// candidate (one direction only).
func (m *Matcher) Matches(candidate *Ad) bool {
	return m.requirements != nil && m.requirements.EvalBool(m.ad, candidate)
}

// SymmetricMatch reports whether the matcher's ad and candidate match in
// both directions.
func (m *Matcher) SymmetricMatch(candidate *Ad) bool {
	return m.Matches(candidate) && requirementsHold(candidate, m.ad)
}

// Rank evaluates the matcher's Rank against candidate (0 when not numeric).
func (m *Matcher) Rank(candidate *Ad) float64 {
	if m.rank == nil {
		return 0
	}
	f, _ := m.rank.EvalNumber(m.ad, candidate)
	return f
}
