// Package tools implements pond's HTCondor command-line tools: submit, q,
// status, rm, hold, release, history, wait, tail, config_val and reconfig,
// which pondctl also is when run under HTCondor's names for them
// (Commands). Each is a
// function the CLI wires as "pondctl condor NAME", taking the arguments
// after the tool name, the output streams and the environment, and
// returning the exit status. They talk to a pool through a node's API
// address given with -pool ADDR or POND_POOL_ADDR, or found in the HTCondor
// configuration CONDOR_CONFIG names (poolFromEnv), presenting the token in
// POND_TOKEN or in the file POND_TOKEN_FILE (or that configuration) names, or else a short-lived
// token of their own made by the authority of the working directory
// (.pond/auth, looked for in the current directory and its parents) for
// the user running them. The daemons take the job's Owner from the token.
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

// Tool is the signature of every tool: the arguments after its name,
// the standard streams and the environment; it returns the exit status.
type Tool func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, env []string) int

// noInput adapts a tool that reads no standard input.
func noInput(f func(ctx context.Context, args []string, stdout, stderr io.Writer, env []string) int) Tool {
	return func(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer, env []string) int {
		return f(ctx, args, stdout, stderr, env)
	}
}

// Tools maps tool names (as "pondctl condor NAME" spells them) to tools.
func Tools() map[string]Tool {
	return map[string]Tool{
		"submit": SubmitInput, "q": noInput(Q), "status": noInput(Status), "rm": noInput(Rm), "hold": noInput(Hold),
		"release": noInput(Release), "history": noInput(History), "config_val": noInput(ConfigVal),
		"reconfig": noInput(Reconfig), "quarantine": noInput(Quarantine), "wait": noInput(Wait),
		"tail": noInput(Tail), "pool-history": noInput(PoolHistory),
		"config-history": noInput(ConfigHistory), "drain": noInput(Drain),
	}
}

// Commands maps the names of HTCondor's commands that pond's tools
// implement (condor_q) to the tools' names (q): a pondctl run under one
// of these names behaves as that tool.
func Commands() map[string]string {
	return map[string]string{
		"condor_submit": "submit", "condor_q": "q", "condor_status": "status", "condor_rm": "rm",
		"condor_hold": "hold", "condor_release": "release", "condor_history": "history", "condor_wait": "wait",
		"condor_config_val": "config_val", "condor_reconfig": "reconfig", "condor_submit_dag": "submit_dag",
		"condor_tail": "tail", "condor_drain": "drain",
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

// client returns a wire client of addr presenting the token from env.
func client(addr string, env []string) (*wire.Client, error) {
	env, err := withClientEnv(env)
	if err != nil {
		return nil, err
	}
	tok, err := findToken(env)
	if err != nil {
		return nil, err
	}
	tlsCfg, err := seaTLS(env)
	if err != nil {
		return nil, err
	}
	return wire.NewClient(addr, tok).WithTLS(tlsCfg).WithHandshakeTimeout(wire.ToolHandshakeTimeout), nil
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
