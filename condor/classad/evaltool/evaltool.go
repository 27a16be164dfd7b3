// Package evaltool implements "pondctl classad eval", a work-alike of
// HTCondor's classad_eval: it builds a context ad from ads and assignments
// given on the command line or in files and evaluates expressions in it,
// left to right.
package evaltool

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/pond-htc/pond/condor/classad"
)

const usage = `Usage: classad eval [options] <ad|assignment|expression|-quiet>...

Evaluates ClassAd expressions in the context of a ClassAd built from the
arguments, which take effect from left to right:
  '[ a = 1; b = 2 ]'   an ad: its attributes replace those of the context ad
  'a = 2'              an assignment to the context ad ('a = 2; b = 3': two)
  'a * 2'              an expression: prints its value ('-a' too: only the
                       options below are options)
Options:
  -help                  print this message
  -quiet                 do not print the context ad before later results
  -file FILE, -my-file FILE
                         replace the context ad with the first ad in FILE
                         (new, old or JSON syntax, or condor_q -long:new)
  -target-file FILE      use the first ad in FILE as TARGET
`

// Exit statuses, as classad_eval's.
const (
	exitOK       = 0
	exitBadInput = 1
	exitBadUsage = 255
)

// context is the ad being built, with the order attributes were last set
// in, so it prints as classad_eval does: most recently set first.
type context struct {
	ad    *classad.Ad
	order []string // lower-case names, oldest first
	names map[string]string
}

func newContext() *context {
	return &context{ad: classad.NewAd(), names: map[string]string{}}
}

func (c *context) set(name string, e classad.Expr) {
	ln := strings.ToLower(name)
	for i, n := range c.order {
		if n == ln {
			c.order = append(c.order[:i], c.order[i+1:]...)
			break
		}
	}
	c.order = append(c.order, ln)
	if _, ok := c.names[ln]; !ok {
		c.names[ln] = name
	}
	c.ad.Set(c.names[ln], e)
}

func (c *context) setAd(a *classad.Ad) {
	for _, n := range a.Names() {
		e, _ := a.Lookup(n)
		c.set(n, e)
	}
}

// String prints the context ad as classad_eval does: in new syntax, its
// attributes in HTCondor's order.
func (c *context) String() string { return c.ad.NewSyntax() }

// Run executes the tool with args (without the program name) and returns
// its exit status.
func Run(args []string, stdout, stderr io.Writer) int {
	ctx := newContext()
	var target *classad.Ad
	quiet := false
	changed := true
	sawArgument := false
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if strings.HasPrefix(arg, "-") && len(arg) > 1 && isOption(arg) {
			opt := strings.TrimLeft(arg, "-")
			switch opt {
			case "help", "h":
				fmt.Fprint(stdout, usage)
				return exitOK
			case "quiet", "q":
				quiet = true
				sawArgument = true
			case "debug":
			case "file", "my-file", "ad-file", "target-file":
				if i+1 >= len(args) {
					fmt.Fprintf(stderr, "classad eval: option -%s needs a file name\n", opt)
					return exitBadUsage
				}
				i++
				a, err := readAd(args[i])
				if err != nil {
					fmt.Fprintf(stderr, "classad eval: %v\n", err)
					return exitBadInput
				}
				if opt == "target-file" {
					target = a
				} else {
					ctx = newContext()
					ctx.setAd(a)
				}
				changed = true
			default:
				fmt.Fprintf(stderr, "classad eval: unknown option %s\n%s", arg, usage)
				return exitBadUsage
			}
			continue
		}
		sawArgument = true
		kind, name, e, ad, err := classify(arg)
		if err != nil {
			fmt.Fprintf(stderr, "classad eval: argument %d %q: %v\n", i+1, arg, err)
			return exitBadInput
		}
		switch kind {
		case argAd:
			ctx.setAd(ad)
			changed = true
		case argAssignment:
			ctx.set(name, e)
			changed = true
		case argExpr:
			if changed && !quiet {
				fmt.Fprintln(stdout, ctx.String())
			}
			changed = false
			fmt.Fprintln(stdout, result(e, ctx.ad, target))
		}
	}
	if !sawArgument {
		fmt.Fprint(stderr, usage)
		return exitBadUsage
	}
	return exitOK
}

// isOption reports whether arg is one of the options; any other argument
// that begins with "-" ("-1", "-r", "-x + 1") is an expression, as in
// classad_eval.
func isOption(arg string) bool {
	switch strings.TrimLeft(arg, "-") {
	case "help", "h", "quiet", "q", "debug", "file", "my-file", "ad-file", "target-file":
		return true
	}
	return false
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

type argKind int

const (
	argExpr argKind = iota
	argAssignment
	argAd
)

// classify decides whether arg is an ad, an assignment or an expression.
func classify(arg string) (argKind, string, classad.Expr, *classad.Ad, error) {
	t := strings.TrimSpace(arg)
	if strings.HasPrefix(t, "[") {
		if a, err := classad.ParseNewAd(t); err == nil {
			return argAd, "", nil, a, nil
		}
		// "[ a = 1 ].a" is an expression that starts with an ad.
		e, err := classad.ParseExpr(t)
		if err != nil {
			return 0, "", nil, nil, err
		}
		return argExpr, "", e, nil, nil
	}
	if name, rest, ok := splitAssignment(t); ok {
		// Several assignments in one argument ("a = 2; b = 2"), as
		// classad_eval reads an argument: the body of an ad.
		if a, err := classad.ParseNewAd("[" + t + "]"); err == nil && a.Len() > 1 {
			return argAd, "", nil, a, nil
		}
		e, err := classad.ParseExpr(rest)
		if err != nil {
			var se *classad.SyntaxError
			if errors.As(err, &se) {
				se.Col += len(t) - len(rest)
			}
			return 0, "", nil, nil, err
		}
		return argAssignment, name, e, nil, nil
	}
	e, err := classad.ParseExpr(t)
	if err != nil {
		return 0, "", nil, nil, err
	}
	return argExpr, "", e, nil, nil
}

// splitAssignment recognises "name = expr" (but not "name == expr").
func splitAssignment(s string) (name, rest string, ok bool) {
	i := 0
	if i < len(s) && s[i] == '\'' {
		j := strings.IndexByte(s[1:], '\'')
		if j < 0 {
			return "", "", false
		}
		name = s[1 : j+1]
		i = j + 2
	} else {
		for i < len(s) && (s[i] == '_' || isLetter(s[i]) || (i > 0 && s[i] >= '0' && s[i] <= '9')) {
			i++
		}
		if i == 0 {
			return "", "", false
		}
		name = s[:i]
	}
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	if i >= len(s) || s[i] != '=' || (i+1 < len(s) && (s[i+1] == '=' || s[i+1] == '?' || s[i+1] == '!')) {
		return "", "", false
	}
	return name, s[i+1:], true
}

// readAd reads the first ad of a file in new, old or JSON syntax.
func readAd(path string) (*classad.Ad, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read ad: %w", err)
	}
	src := string(data)
	t := strings.TrimSpace(src)
	var a *classad.Ad
	switch {
	case strings.HasPrefix(t, "["):
		a, err = firstNewAd(src)
	case strings.HasPrefix(t, "{") && strings.HasPrefix(strings.TrimSpace(t[1:]), "["):
		// condor_q -long:new prints a list of ads: "{ [ ... ], ... }".
		a, err = firstNewAd(src[strings.IndexByte(src, '{')+1:])
	case strings.HasPrefix(t, "{"):
		a, err = classad.ParseJSONAd(src)
	default:
		var ads []*classad.Ad
		ads, err = classad.ParseOldAds(src)
		if err == nil {
			if len(ads) == 0 {
				return nil, fmt.Errorf("%s: no ClassAd in file", path)
			}
			a = ads[0]
		}
	}
	if err != nil {
		var se *classad.SyntaxError
		if errors.As(err, &se) {
			se.File = path
			return nil, se
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return a, nil
}

// firstNewAd parses the first "[ ... ]" ad of src, ignoring what follows.
func firstNewAd(src string) (*classad.Ad, error) {
	depth := 0
	inStr := byte(0)
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case inStr != 0:
			if c == '\\' {
				i++
			} else if c == inStr {
				inStr = 0
			}
		case c == '"' || c == '\'':
			inStr = c
		case c == '[':
			depth++
		case c == ']':
			depth--
			if depth == 0 {
				return classad.ParseNewAd(src[:i+1])
			}
		}
	}
	return classad.ParseNewAd(src)
}

// result is the text printed for expression e evaluated with my as the
// context ad and target as TARGET.
func result(e classad.Expr, my, target *classad.Ad) string {
	return classad.EvalWith(e, my, target).String()
}
