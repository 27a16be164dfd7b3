// Package tools implements pond's HTCondor command-line tools: submit, q,
// status, rm, hold, release, history, config_val, reconfig, quarantine
// and client-config. Each is a function the CLI wires as "pondctl condor
// NAME", taking the arguments after the tool name, the output streams and
// the environment, and returning the exit status. They talk to a pool
// through a node's API address given with -pool ADDR or POND_POOL_ADDR,
// presenting the token in POND_TOKEN or in the file POND_TOKEN_FILE names,
// or else a short-lived token of their own made by the authority of the
// working directory (.pond/auth, looked for in the current directory and
// its parents) for the user running them. The daemons take the job's Owner
// from the token.
package tools

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/pond-htc/pond/condor/auth"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/wire"
)

// Tool is the signature of every tool.
type Tool func(ctx context.Context, args []string, stdout, stderr io.Writer, env []string) int

// Tools maps tool names (as "pondctl condor NAME" spells them) to tools.
func Tools() map[string]Tool {
	return map[string]Tool{
		"submit": Submit, "q": Q, "status": Status, "rm": Rm, "hold": Hold, "release": Release,
		"history": History, "config_val": ConfigVal, "reconfig": Reconfig, "quarantine": Quarantine,
		"client-config": ClientConfig,
	}
}

func getenv(env []string, name string) string {
	v, _ := lookupEnv(env, name)
	return v
}

// lookupEnv returns the value of the last NAME=value in env, as
// os.LookupEnv does for the process's own environment.
func lookupEnv(env []string, name string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

// common holds the options every tool takes.
type common struct {
	pool       string
	name       string
	constraint string
	af         []string
	long       bool
	json       bool
	rest       []string
	flags      map[string]string
}

// parseArgs reads HTCondor-style arguments: single-dash options, some
// taking a value (valued), -af/-autoformat taking every following
// non-option argument, and positional arguments.
func parseArgs(args []string, valued map[string]bool, env []string) (*common, error) {
	c := &common{pool: getenv(env, "POND_POOL_ADDR"), flags: map[string]string{}}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			c.rest = append(c.rest, a)
			continue
		}
		name := strings.ToLower(strings.TrimLeft(a, "-"))
		needValue := func() (string, error) {
			if i+1 >= len(args) {
				return "", fmt.Errorf("option -%s needs a value", name)
			}
			i++
			return args[i], nil
		}
		var err error
		switch {
		case name == "pool":
			c.pool, err = needValue()
		case name == "name":
			c.name, err = needValue()
		case name == "constraint":
			c.constraint, err = needValue()
		case name == "af" || strings.HasPrefix(name, "af:") || name == "autoformat":
			for i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
				c.af = append(c.af, args[i])
			}
			if len(c.af) == 0 {
				err = fmt.Errorf("option -%s needs attribute names", name)
			}
		case name == "l" || name == "long":
			c.long = true
		case name == "json":
			c.json = true
		case valued[name]:
			c.flags[name], err = needValue()
		default:
			c.flags[name] = "true"
		}
		if err != nil {
			return nil, err
		}
	}
	if c.pool == "" {
		return nil, errors.New("no pool given: use -pool ADDR (a node's API address) or set POND_POOL_ADDR")
	}
	return c, nil
}

// client returns a wire client of addr presenting the token from env.
func client(addr string, env []string) (*wire.Client, error) {
	tok, err := findToken(env)
	if err != nil {
		return nil, err
	}
	tlsCfg, err := seaTLS(env)
	if err != nil {
		return nil, err
	}
	return wire.NewClient(addr, tok).WithTLS(tlsCfg), nil
}

// seaTLS is the TLS the tools call a pool's nodes with: that of the sea's
// CA, found as auth.FindCA finds it from the working directory (PWD) or
// its nearest parent that has one; nil, for plain HTTP, without a CA.
func seaTLS(env []string) (*tls.Config, error) {
	lookup := func(name string) string { return getenv(env, name) }
	dir := lookup("PWD")
	if dir == "" {
		dir, _ = os.Getwd()
	}
	for dir != "" {
		if ca := auth.FindCA(lookup, dir); ca != "" {
			cfg, err := auth.ClientTLS(ca, "", "")
			if err != nil {
				return nil, fmt.Errorf("the sea's CA: %w", err)
			}
			return cfg, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return nil, nil
}

// findToken finds the token the tools present (auth.FindToken): POND_TOKEN,
// else the file POND_TOKEN_FILE names, else a short-lived token of the
// authority of the working directory (PWD) or of its nearest parent that
// has one (auth.AuthorityDir), whose subject is the user running the
// tool. Without any, the tools speak to open pools only.
func findToken(env []string) (string, error) {
	get := func(n string) string { return getenv(env, n) }
	dir := get("PWD")
	if dir == "" {
		dir, _ = os.Getwd()
	}
	return auth.FindToken(get, authorityRoot(dir))
}

// authorityRoot returns dir or its nearest parent whose authority has a
// signing key, or dir when none has.
func authorityRoot(dir string) string {
	if dir == "" {
		return ""
	}
	dir = filepath.Clean(dir)
	for d := dir; ; {
		if _, err := os.Stat(filepath.Join(d, filepath.FromSlash(auth.AuthorityDir), auth.SigningKeyFile)); err == nil {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return dir
		}
		d = parent
	}
}

// collectorOf returns a client of the collector of the pool c.pool belongs to.
func collectorOf(ctx context.Context, c *common, env []string) (*wire.Collector, error) {
	node, err := client(c.pool, env)
	if err != nil {
		return nil, err
	}
	info, err := node.Master().Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("asking %s for its central manager: %w", c.pool, err)
	}
	cm, err := client(info.CondorHost, env)
	if err != nil {
		return nil, err
	}
	return cm.Collector(), nil
}

// scheddOf returns a client of the schedd -name names, or the one on the
// -pool node, or else the first schedd the pool's collector knows.
func scheddOf(ctx context.Context, c *common, env []string) (*wire.Schedd, string, error) {
	node, err := client(c.pool, env)
	if err != nil {
		return nil, "", err
	}
	info, err := node.Master().Info(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("contacting %s: %w", c.pool, err)
	}
	if c.name == "" || c.name == info.Name {
		for _, d := range info.Daemons {
			if d == "SCHEDD" {
				return node.Schedd(), info.Name, nil
			}
		}
	}
	coll, err := client(info.CondorHost, env)
	if err != nil {
		return nil, "", err
	}
	cons := ""
	if c.name != "" {
		cons = "Name == " + classad.String(c.name).String()
	}
	scheds, err := coll.Collector().Query(ctx, &wire.QueryAdsRequest{Type: wire.TypeSchedd, Constraint: cons})
	if err != nil {
		return nil, "", fmt.Errorf("locating a schedd: %w", err)
	}
	if len(scheds) == 0 {
		if c.name != "" {
			return nil, "", fmt.Errorf("can't find address for schedd %s", c.name)
		}
		return nil, "", errors.New("no schedd in the pool")
	}
	addr := strings.Trim(scheds[0]["PondAddress"], `"`)
	name := strings.Trim(scheds[0]["Name"], `"`)
	sc, err := client(addr, env)
	if err != nil {
		return nil, "", err
	}
	return sc.Schedd(), name, nil
}

func fail(stderr io.Writer, tool string, err error) int {
	var we *wire.Error
	switch {
	case errors.As(err, &we) && we.Status == http.StatusUnauthorized:
		fmt.Fprintf(stderr, "%s: ERROR: not authorized by the pool (a missing, expired or foreign token: set POND_TOKEN or POND_TOKEN_FILE, or run in the working directory that made the pool): %v\n", tool, err)
		return 1
	case errors.As(err, &we) && we.Status == http.StatusForbidden:
		fmt.Fprintf(stderr, "%s: ERROR: not permitted: %v\n", tool, err)
		return 1
	}
	fmt.Fprintf(stderr, "%s: ERROR: %v\n", tool, err)
	return 1
}

// ads converts wire ads to ClassAds.
func ads(ws []wire.Ad) ([]*classad.Ad, error) {
	out := make([]*classad.Ad, 0, len(ws))
	for _, w := range ws {
		a, err := wire.ToClassAd(w)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// printAds prints ads in -af, -l or -json form and reports whether one of
// them was asked for.
func printAds(w io.Writer, c *common, list []*classad.Ad) (bool, error) {
	switch {
	case c.json:
		if c.af != nil {
			list = projectAds(list, c.af)
		}
		b := classad.MarshalJSON(list)
		_, err := w.Write(append(b, '\n'))
		return true, err
	case c.long:
		for _, a := range list {
			if c.af != nil {
				a = projectAds([]*classad.Ad{a}, c.af)[0]
			}
			fmt.Fprint(w, a.String())
			if !strings.HasSuffix(a.String(), "\n") {
				fmt.Fprintln(w)
			}
			fmt.Fprintln(w)
		}
		return true, nil
	case c.af != nil:
		progs := make([]classad.Expr, len(c.af))
		for i, n := range c.af {
			e, err := classad.ParseExpr(n)
			if err != nil {
				return true, fmt.Errorf("-af %s: %w", n, err)
			}
			progs[i] = e
		}
		for _, a := range list {
			vals := make([]string, len(progs))
			for i, e := range progs {
				v := a.EvalExpr(e)
				if s, ok := v.StringValue(); ok {
					vals[i] = s
				} else {
					vals[i] = v.String()
				}
			}
			fmt.Fprintln(w, strings.Join(vals, " "))
		}
		return true, nil
	}
	return false, nil
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
