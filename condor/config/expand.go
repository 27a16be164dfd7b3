package config

import (
	"strings"

	"github.com/pond-htc/pond/condor/macro"
)

// Expand expands every macro reference in s against c with the macro
// language of package macro: $(NAME), $(NAME:default), $ENV(NAME),
// $INT(NAME[,fmt]), $REAL(NAME[,fmt]), $RANDOM_INTEGER(min,max[,step]),
// $RANDOM_CHOICE(a,b,...), $CHOICE(i,a,b,...), $SUBSTR(NAME,start[,len])
// and $F[pdnxq...](NAME). $$(NAME) is left for match-time expansion, and
// $(DOLLAR) yields "$". Names are case-insensitive and resolve as Get does
// (local-name prefixes first). Undefined macros without a default expand
// to the empty string.
func (c *Config) Expand(s string) (string, error) {
	return c.expand(s, nil)
}

// expand expands s, the value of the macros in stack (upper-case names).
func (c *Config) expand(s string, stack []string) (string, error) {
	return macro.Expander{Source: configSource{c}, Env: c.opts.LookupEnv}.ExpandValue(s, stack...)
}

// configSource resolves macros from the configuration.
type configSource struct{ c *Config }

func (s configSource) Lookup(name string) (value, key string, ok bool) {
	up := strings.ToUpper(name)
	if !validName(up) {
		return "", "", false
	}
	e, ok := s.c.find(up)
	if !ok {
		return "", "", false
	}
	return e.value, up, true
}

func matchParen(s string, open int) int { return macro.MatchParen(s, open) }

func splitArgs(s string) []string { return macro.SplitArgs(s) }

func evalArith(s string) (float64, bool, error) { return macro.EvalArith(s) }
