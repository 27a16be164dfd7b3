package cli

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/tools"
)

// MainNamed runs pondctl as the program argv0 names: under the name of
// one of HTCondor's commands (condor_q, a link install-tools made) it is
// "pondctl condor q" with args; else it is Main(args).
func MainNamed(argv0 string, args []string) int {
	if tool, ok := tools.Commands()[filepath.Base(argv0)]; ok {
		return Main(append([]string{"condor", tool}, args...))
	}
	return Main(args)
}

func (m *meta) cmdCondor(ctx context.Context, args []string) int {
	all := tools.Tools()
	if len(args) > 0 {
		switch args[0] {
		case "client-config":
			return m.condorClientConfig(args[1:])
		case "install-tools":
			return m.condorInstallTools(args[1:])
		case "dagman":
			return m.condorDagman(ctx, args[1:])
		case "submit_dag":
			return m.condorSubmitDag(ctx, args[1:])
		}
	}
	if len(args) == 0 || all[args[0]] == nil {
		names := make([]string, 0, len(all)+2)
		for n := range all {
			names = append(names, n)
		}
		names = append(names, "client-config", "install-tools", "dagman", "submit_dag")
		sort.Strings(names)
		usage := fmt.Sprintf("Usage: pondctl condor <%s> [-pool ADDR] [options]\n", strings.Join(names, "|"))
		if len(args) > 0 && isHelp(args[0]) {
			fmt.Fprint(m.stdout, usage)
			return 0
		}
		if len(args) > 0 {
			fmt.Fprintf(m.stderr, "pondctl condor: unknown tool %q\n", args[0])
		}
		fmt.Fprint(m.stderr, usage)
		return 1
	}
	for _, a := range args[1:] {
		if isHelp(a) {
			fmt.Fprintln(m.stdout, tools.Usage(args[0]))
			return 0
		}
	}
	// The tools resolve relative paths (submit files, Iwd) against PWD:
	// the working directory, or the one -chdir names.
	env := append(slices.Clone(m.env), "PWD="+m.dir)
	return all[args[0]](ctx, args[1:], m.stdin, m.stdout, m.stderr, env)
}

// condorClientConfig is "pondctl condor client-config": it writes the
// HTCondor client configuration of a pool and its credentials.
func (m *meta) condorClientConfig(args []string) int {
	fs := m.newFlagSet("condor client-config",
		"condor client-config -pool ADDR -dir DIR [-collector HOST:PORT] [-subject NAME] [-scope SCOPES] [-lifetime D] [-token-file FILE] [-force]")
	pool := fs.String("pool", "", "the API `address` of a node of the pool (its central_manager output)")
	dir := fs.String("dir", "", "the `directory` to write condor_config and the credentials in")
	collector := fs.String("collector", "", "COLLECTOR_HOST for HTCondor's own clients, when the pool's CEDAR listener is not at -pool (`HOST:PORT`)")
	subject := fs.String("subject", "", "the `identity` of the token made for the configuration (default: the user running pondctl)")
	scopeList := fs.String("scope", "READ,WRITE", "comma-separated `scopes` of the token made")
	lifetime := fs.Duration("lifetime", 7*24*time.Hour, "how long the token made is valid")
	tokenFile := fs.String("token-file", "", "use the token in `FILE` (pond's own, or an HTCondor-format one for HTCondor's clients) instead of making both with the working directory's authority")
	force := fs.Bool("force", false, "replace the files of an earlier client-config")
	if !m.parseNoArgs(fs, args) {
		return 1
	}
	if *pool == "" || *dir == "" {
		return m.errorf("condor client-config needs -pool ADDR and -dir DIR")
	}
	cc := tools.ClientConfig{Dir: *dir, Pool: *pool, Collector: *collector, Force: *force}
	if !filepath.IsAbs(cc.Dir) {
		cc.Dir = filepath.Join(m.dir, cc.Dir)
	}
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			return m.fail("Cannot read -token-file", err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return m.errorf("-token-file %s is empty", *tokenFile)
		}
		// An HTCondor-format token goes where HTCondor's clients read
		// it; pond's own, where pond's tools do.
		if auth.IsHTCondorToken(tok) {
			cc.HTCondorToken = tok
		} else {
			cc.Token = tok
		}
	} else {
		adir := auth.FindAuthorityDir(m.getenv, m.dir)
		if _, err := os.Stat(filepath.Join(adir, auth.SigningKeyFile)); err != nil {
			return m.errorf("No token authority at %s: run this in the working directory that made the pool, or give -token-file FILE", adir)
		}
		var scopes []auth.Scope
		for _, s := range strings.Split(*scopeList, ",") {
			sc, err := auth.ParseScope(strings.TrimSpace(s))
			if err != nil {
				return m.errorf("Invalid -scope: %v", err)
			}
			scopes = append(scopes, sc)
		}
		if *lifetime <= 0 {
			return m.errorf("Invalid -lifetime %s: a token must last more than zero", *lifetime)
		}
		a, err := auth.OpenAuthority(adir)
		if err != nil {
			return m.fail("Cannot open the token authority", err)
		}
		who := *subject
		if who == "" {
			who = currentUserName(m.getenv)
		}
		tok, _, err := a.Issue(who, scopes, *lifetime)
		if err != nil {
			return m.fail("Cannot create the token", err)
		}
		htok, _, err := a.IssueHTCondor(who, scopes, *lifetime)
		if err != nil {
			return m.fail("Cannot create the HTCondor token", err)
		}
		cc.Token, cc.HTCondorToken = tok, htok
		// A client certificate for SSL, when the sea has the
		// authority's CA.
		if ca := auth.FindCA(m.getenv, m.dir); ca != "" && ca == a.CAFile() {
			cert, key, err := a.IssueCertificate(who, nil, *lifetime)
			if err != nil {
				return m.fail("Cannot create the client certificate", err)
			}
			cc.Cert, cc.Key = cert, key
		}
	}
	if ca := auth.FindCA(m.getenv, m.dir); ca != "" {
		b, err := os.ReadFile(ca)
		if err != nil {
			return m.fail("Cannot read the sea's CA", err)
		}
		cc.CA = b
	}
	written, err := tools.WriteClientConfig(cc)
	if err != nil {
		return m.fail("Cannot write the client configuration", err)
	}
	for _, f := range written {
		fmt.Fprintf(m.stdout, "Wrote %s\n", f)
	}
	fmt.Fprintf(m.stdout, "\nexport CONDOR_CONFIG=%s\n", filepath.Join(cc.Dir, tools.ClientConfigFile))
	return 0
}

// currentUserName is the name of the user running pondctl, as the
// tokens pondctl makes for itself name it: the system's, else USER, else
// "pondctl".
func currentUserName(getenv func(string) string) string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := getenv("USER"); u != "" {
		return u
	}
	return "pondctl"
}

// condorInstallTools is "pondctl condor install-tools DIR": a link named
// after each of HTCondor's commands pond implements, to this pondctl.
func (m *meta) condorInstallTools(args []string) int {
	fs := m.newFlagSet("condor install-tools", "condor install-tools DIR")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	if fs.NArg() != 1 {
		return m.errorf("condor install-tools needs one argument, the directory to make the links in")
	}
	dir := fs.Arg(0)
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(m.dir, dir)
	}
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return m.fail("Cannot find the pondctl executable", err)
	}
	links, err := tools.InstallLinks(dir, exe)
	for _, l := range links {
		if l.Changed {
			fmt.Fprintf(m.stdout, "Linked %s -> %s\n", l.Path, l.Target)
		} else {
			fmt.Fprintf(m.stdout, "Unchanged %s -> %s\n", l.Path, l.Target)
		}
	}
	if err != nil {
		return m.fail("Cannot make every link", err)
	}
	return 0
}
