package cli

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/auth"
)

func (m *meta) cmdToken(ctx context.Context, args []string) int {
	return m.subcommand(ctx, "token", args, []subcommand{
		{"create", m.tokenCreate},
		{"list", m.tokenList},
		{"revoke", m.tokenRevoke},
		{"prune", m.tokenPrune},
	})
}

// authority opens the working directory's token authority, making it the
// first time.
func (m *meta) authority() (*auth.Authority, bool) {
	a, err := auth.OpenAuthority(filepath.Join(m.dir, filepath.FromSlash(auth.AuthorityDir)))
	if err != nil {
		m.fail("Cannot open the token authority", err)
		return nil, false
	}
	return a, true
}

func (m *meta) tokenCreate(ctx context.Context, args []string) int {
	fs := m.newFlagSet("token create", "token create -subject NAME -scope SCOPE[,SCOPE...] [-lifetime D] [-htcondor] [-json]")
	subject := fs.String("subject", "", "the `identity` the token authenticates (a user name, node:NAME)")
	scopeList := fs.String("scope", "", "comma-separated `scopes`: READ, WRITE, ADMINISTRATOR, DAEMON, ADVERTISE_STARTD, ADVERTISE_SCHEDD, ADVERTISE_MASTER, NEGOTIATOR, SEA_READ, SEA_WRITE, SEA_ADMIN")
	lifetime := fs.Duration("lifetime", 24*time.Hour, "how long the token is valid")
	jsonOut := fs.Bool("json", false, "print the token and what it grants as JSON")
	htcondor := fs.Bool("htcondor", false, "make an HTCondor IDTOKENS token (HS256, key ID POOL, subject user@trust-domain) for HTCondor's own clients, to put in their SEC_TOKEN_DIRECTORY")
	if !m.parseNoArgs(fs, args) {
		return 1
	}
	if *subject == "" {
		return m.errorf("token create needs -subject")
	}
	if *scopeList == "" {
		return m.errorf("token create needs -scope")
	}
	var scopes []auth.Scope
	for _, s := range strings.Split(*scopeList, ",") {
		sc, err := auth.ParseScope(s)
		if err != nil {
			return m.errorf("Invalid -scope: %v", err)
		}
		scopes = append(scopes, sc)
	}
	if *lifetime <= 0 {
		return m.errorf("Invalid -lifetime %s: a token must last more than zero", *lifetime)
	}
	a, ok := m.authority()
	if !ok {
		return 1
	}
	issue := a.Issue
	if *htcondor {
		issue = a.IssueHTCondor
	}
	tok, rec, err := issue(*subject, scopes, *lifetime)
	if err != nil {
		return m.fail("Cannot create the token", err)
	}
	if *jsonOut {
		return m.printJSON(struct {
			Token  string `json:"token"`
			Issuer string `json:"issuer"`
			auth.Issued
		}{tok, a.Issuer(), rec})
	}
	fmt.Fprintln(m.stdout, tok)
	return 0
}

func (m *meta) tokenList(ctx context.Context, args []string) int {
	fs := m.newFlagSet("token list", "token list [-all] [-json]")
	jsonOut := fs.Bool("json", false, "print the tokens as JSON")
	all := fs.Bool("all", false, "list expired tokens too")
	if !m.parseNoArgs(fs, args) {
		return 1
	}
	a, ok := m.authority()
	if !ok {
		return 1
	}
	list, err := a.List()
	if err != nil {
		return m.fail("Cannot list the tokens", err)
	}
	now := time.Now()
	hidden := 0
	if !*all {
		shown := list[:0:0]
		for _, t := range list {
			if now.After(t.Expires) {
				hidden++
				continue
			}
			shown = append(shown, t)
		}
		list = shown
	}
	if *jsonOut {
		if list == nil {
			list = []auth.Issued{}
		}
		return m.printJSON(list)
	}
	if len(list) == 0 && hidden == 0 {
		fmt.Fprintln(m.stdout, "No tokens were issued here.")
		return 0
	}
	rows := make([][]string, 0, len(list))
	for _, t := range list {
		names := make([]string, len(t.Scopes))
		for i, s := range t.Scopes {
			names[i] = s.Name()
		}
		status := "valid"
		switch {
		case t.Revoked:
			status = "revoked"
		case now.After(t.Expires):
			status = "expired"
		}
		rows = append(rows, []string{t.ID[:12], t.Subject, strings.Join(names, ","), t.Expires.Local().Format(time.RFC3339), status})
	}
	if len(rows) > 0 {
		if err := printTable(m.stdout, []string{"ID", "Subject", "Scopes", "Expires", "Status"}, rows); err != nil {
			return m.fail("Cannot print the table", err)
		}
	}
	if hidden > 0 {
		fmt.Fprintf(m.stdout, "%d expired %s not shown (-all shows them; pondctl token prune forgets those expired over a day ago).\n",
			hidden, tokensWord(hidden))
	}
	return 0
}

// tokenPruneAge is how long after its expiry pondctl token prune forgets a
// token.
const tokenPruneAge = 24 * time.Hour

func (m *meta) tokenPrune(ctx context.Context, args []string) int {
	fs := m.newFlagSet("token prune", "token prune [-json]")
	jsonOut := fs.Bool("json", false, "print the records removed as JSON")
	if !m.parseNoArgs(fs, args) {
		return 1
	}
	a, ok := m.authority()
	if !ok {
		return 1
	}
	pruned, err := a.Prune(time.Now().Add(-tokenPruneAge))
	if err != nil {
		return m.fail("Cannot prune the tokens", err)
	}
	if *jsonOut {
		if pruned == nil {
			pruned = []auth.Issued{}
		}
		return m.printJSON(pruned)
	}
	fmt.Fprintf(m.stdout, "Removed the records of %d %s that expired over a day ago.\n", len(pruned), tokensWord(len(pruned)))
	return 0
}

func (m *meta) tokenRevoke(ctx context.Context, args []string) int {
	fs := m.newFlagSet("token revoke", "token revoke ID")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	if fs.NArg() != 1 {
		return m.errorf("token revoke needs the token's ID (pondctl token list shows it)")
	}
	a, ok := m.authority()
	if !ok {
		return 1
	}
	t, err := a.Revoke(fs.Arg(0))
	if err != nil {
		return m.fail("Cannot revoke the token", err)
	}
	fmt.Fprintf(m.stdout, "Token %s of %s revoked.\n", t.ID[:12], t.Subject)
	return 0
}

// tokensWord is "token" or "tokens", as n asks.
func tokensWord(n int) string {
	if n == 1 {
		return "token"
	}
	return "tokens"
}
