package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/planner/config"
)

func (m *meta) cmdSea(ctx context.Context, args []string) int {
	return m.subcommand(ctx, "sea", args, []subcommand{
		{"members", m.seaMembers},
		{"query", m.seaQuery},
		{"keygen", m.seaKeygen},
		{"keys", m.seaKeys},
		{"relays", m.seaRelays},
		{"factory", m.seaFactory},
		{"failover", m.seaFailover},
		{"flock", m.seaFlock},
		{"console", m.seaConsole},
	})
}

// seaFlock shows a central manager's flocking: the pools willing to take
// its pool's jobs, nearest first, its flocks, and the announcements it
// sees.
func (m *meta) seaFlock(ctx context.Context, args []string) int {
	return readSea(ctx, m, args, "flock", "API address of the central manager's agent", "Cannot read the flocking",
		(*api.Client).Flock, m.showFlock)
}

// showFlock prints a central manager's flocking as a table.
func (m *meta) showFlock(st *api.FlockStatus) int {
	var names []string
	for _, f := range st.Flocks {
		names = append(names, f.Name)
	}
	if len(names) == 0 {
		names = []string{"none"}
	}
	fmt.Fprintf(m.stdout, "Pool %s (central manager %s): %d idle slot(s); flocks: %s\n\n", st.Pool, st.Node,
		st.Announcement.IdleSlots, strings.Join(names, ", "))
	rows := make([][]string, 0, len(st.Willing))
	for _, w := range st.Willing {
		rtt := "unknown"
		if w.RTTKnown {
			rtt = w.RTT.Round(10 * time.Microsecond).String()
		}
		rows = append(rows, []string{w.Pool, w.API, rtt, strconv.Itoa(w.IdleSlots), strconv.Itoa(w.Cpus),
			strconv.Itoa(w.Memory), strings.Join(w.Flocks, ", ")})
	}
	if len(rows) == 0 {
		fmt.Fprintf(m.stdout, "No pool is willing to take pool %s's jobs (%d announcement(s) in the sea).\n", st.Pool, len(st.Sea))
		return 0
	}
	if err := printTable(m.stdout, []string{"Willing pool", "Central manager", "RTT", "Idle slots", "Cpus", "Memory", "Flocks"}, rows); err != nil {
		return m.fail("Cannot print the table", err)
	}
	return 0
}

// seaFailover shows a pool member's view of its central manager's
// fail-over: the manager it follows, its epoch, the replicas.
func (m *meta) seaFailover(ctx context.Context, args []string) int {
	return readSea(ctx, m, args, "failover", "API address of a member of a pool with replicas",
		"Cannot read the fail-over state (is the agent a member of a pool with replicas?)", (*api.Client).Failover, m.showFailover)
}

// readSea runs `pondctl sea NAME [-json] [-sea ADDR]`, a command that
// reads one document from an agent: get fetches it (within ten seconds),
// printed as JSON with -json and by show otherwise; failure is the summary
// of the error when get fails.
func readSea[T any](ctx context.Context, m *meta, args []string, name, seaHelp, failure string,
	get func(*api.Client, context.Context) (T, error), show func(T) int) int {
	fs := m.newFlagSet("sea "+name, "sea "+name+" [-json] [-sea ADDR]")
	seaAddr := fs.String("sea", "", seaHelp)
	jsonOut := fs.Bool("json", false, "print as JSON")
	if !m.parseNoArgs(fs, args) {
		return 1
	}
	c, ok := m.seaClient(*seaAddr)
	if !ok {
		return 1
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := get(c, ctx)
	if err != nil {
		return m.fail(failure, err)
	}
	if *jsonOut {
		return m.printJSON(st)
	}
	return show(st)
}

// showFailover prints a pool member's view of its fail-over as a table.
func (m *meta) showFailover(st *api.FailoverStatus) int {
	manager := st.Manager
	if st.Acting {
		manager += " (this node)"
	}
	rows := [][]string{
		{"Pool", st.Pool},
		{"Node", st.Node},
		{"Manager", manager},
		{"Manager API", st.ManagerAPI},
		{"Epoch", strconv.FormatInt(st.ManagerEpoch, 10)},
	}
	if st.State != nil {
		rows = append(rows, []string{"Replicas", strings.Join(st.State.Replicas, ", ")},
			[]string{"State of", fmt.Sprintf("%s at epoch %d, %s", st.State.Manager, st.State.Epoch, st.State.Updated.Format(time.RFC3339))})
	}
	if !st.LastCycle.IsZero() {
		rows = append(rows, []string{"Last cycle", fmt.Sprintf("%s, %d matches", st.LastCycle.Format(time.RFC3339), st.LastMatches)})
	}
	if err := printTable(m.stdout, []string{"Fail-over", ""}, rows); err != nil {
		return m.fail("Cannot print the table", err)
	}
	return 0
}

// seaFactory shows the pilot factory of a central manager, or sets or
// removes one of its entries.
func (m *meta) seaFactory(ctx context.Context, args []string) int {
	fs := m.newFlagSet("sea factory", "sea factory [-json] [-set FILE] [-remove NAME] [-sea ADDR]")
	seaAddr := fs.String("sea", "", "API address of the central manager's agent")
	jsonOut := fs.Bool("json", false, "print as JSON")
	set := fs.String("set", "", "add or replace the entry in the JSON `file`")
	remove := fs.String("remove", "", "remove the entry `NAME`")
	if !m.parseNoArgs(fs, args) {
		return 1
	}
	c, ok := m.seaClient(*seaAddr)
	if !ok {
		return 1
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	switch {
	case *set != "":
		data, err := os.ReadFile(*set)
		if err != nil {
			return m.fail("Cannot read the entry", err)
		}
		var e struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(data, &e); err != nil || e.Name == "" {
			return m.errorf("%s: want a JSON entry with its \"name\" (%v)", *set, err)
		}
		if err := c.SetFactoryEntry(ctx, e.Name, data); err != nil {
			return m.fail("Cannot set the entry "+e.Name, err)
		}
		fmt.Fprintf(m.stdout, "Set the entry %s.\n", e.Name)
		return 0
	case *remove != "":
		if err := c.RemoveFactoryEntry(ctx, *remove); err != nil {
			return m.fail("Cannot remove the entry "+*remove, err)
		}
		fmt.Fprintf(m.stdout, "Removed the entry %s.\n", *remove)
		return 0
	}
	st, err := c.Factory(ctx)
	if err != nil {
		return m.fail("Cannot read the factory", err)
	}
	if *jsonOut {
		return m.printJSON(st)
	}
	if err := printFactory(m.stdout, st, time.Now()); err != nil {
		return m.fail("Cannot print the table", err)
	}
	return 0
}

// printFactory prints a factory's status at now: its credentials, and a
// table of its entries' funnels, breakers and the first expiry of their
// glideins' credentials.
func printFactory(w io.Writer, st *api.FactoryStatus, now time.Time) error {
	if st.Error != "" {
		fmt.Fprintf(w, "Last cycle failed: %s\n", st.Error)
	}
	switch c := st.Credentials; {
	case c != nil:
		line := "Credentials:"
		if c.KeyID != "" {
			line += fmt.Sprintf(" key %s for %s*", c.KeyID, c.Prefix)
		}
		if !c.CAExpires.IsZero() {
			if c.KeyID != "" {
				line += ";"
			}
			line += " CA expires " + expiry(c.CAExpires, now)
		}
		fmt.Fprintln(w, line)
	case st.NeedsCredentials:
		fmt.Fprintln(w, "Credentials: none: the sea requires tokens, and the factory has no delegated key to sign its glideins' with (apply gives it one; or pondctl cert factory)")
	}
	if len(st.Entries) == 0 {
		fmt.Fprintf(w, "The factory of pool %s has no entry.\n", st.Pool)
		return nil
	}
	rows := make([][]string, 0, len(st.Entries))
	for _, e := range st.Entries {
		f := e.Funnel
		breaker := "closed"
		if e.Breaker.Open {
			breaker = "open until " + e.Breaker.Until.Format(time.TimeOnly) + ": " + e.Breaker.Reason
		}
		if e.Capped != "" {
			// Not the breaker, but what stops submissions as well: a cap of
			// the entry's budget.
			breaker += "; capped by " + e.Capped
		}
		if e.Error != "" {
			breaker += "; site: " + e.Error
		}
		creds := "-"
		if !e.CredentialsExpire.IsZero() {
			creds = expiry(e.CredentialsExpire, now)
		}
		rows = append(rows, []string{e.Name, strconv.Itoa(f.Requested), strconv.Itoa(f.Queued), strconv.Itoa(f.Running),
			strconv.Itoa(f.Validated), strconv.Itoa(f.Joined), strconv.Itoa(f.Claimed), strconv.Itoa(f.Failed),
			strconv.Itoa(f.Lost), strconv.Itoa(e.Matched), creds, breaker})
	}
	return printTable(w, []string{"Entry", "Requested", "Queued", "Running", "Validated", "Joined", "Claimed",
		"Failed", "Lost", "Jobs matched", "Credentials expire", "Breaker"}, rows)
}

// expiry says when t is, seen at now: its UTC time and how long until
// then, or that it is past.
func expiry(t, now time.Time) string {
	at := t.UTC().Format(time.RFC3339)
	if !now.Before(t) {
		return at + " (expired)"
	}
	return at + " (in " + t.Sub(now).Round(time.Second).String() + ")"
}

// seaRelays lists the workers an agent relays for, or drops one's tunnel.
func (m *meta) seaRelays(ctx context.Context, args []string) int {
	fs := m.newFlagSet("sea relays", "sea relays [-json] [-drop NAME] [-sea ADDR]")
	seaAddr := fs.String("sea", "", "API address of the relaying agent (a central manager)")
	jsonOut := fs.Bool("json", false, "print as JSON")
	drop := fs.String("drop", "", "close the tunnel of the worker `NAME`, as a network fault would (it attaches again)")
	if !m.parseNoArgs(fs, args) {
		return 1
	}
	c, ok := m.seaClient(*seaAddr)
	if !ok {
		return 1
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if *drop != "" {
		if err := c.RelayDrop(ctx, *drop); err != nil {
			return m.fail("Cannot drop the tunnel of "+*drop, err)
		}
		fmt.Fprintf(m.stdout, "Dropped the tunnel of %s.\n", *drop)
		return 0
	}
	ws, err := c.RelayWorkers(ctx)
	if err != nil {
		return m.fail("Cannot list the relayed workers", err)
	}
	if *jsonOut {
		return m.printJSON(ws)
	}
	if len(ws) == 0 {
		fmt.Fprintln(m.stdout, "The agent relays for no worker.")
		return 0
	}
	rows := make([][]string, 0, len(ws))
	for _, w := range ws {
		state := "attached"
		if !w.Connected {
			state = "away (addresses kept)"
		}
		rows = append(rows, []string{w.Name, state, w.Addrs.API, w.Addrs.Gossip, w.Addrs.Tree})
	}
	if err := printTable(m.stdout, []string{"Worker", "Tunnel", "API", "Gossip", "Tree"}, rows); err != nil {
		return m.fail("Cannot print the table", err)
	}
	return 0
}

func (m *meta) seaKeygen(ctx context.Context, args []string) int {
	key, err := api.GossipKeyGen()
	if err != nil {
		return m.fail("Cannot generate a key", err)
	}
	fmt.Fprintln(m.stdout, key)
	return 0
}

// seaClient returns a client for the agent named by -sea, POND_SEA_ADDR or
// the configuration's pond { sea {} } block.
func (m *meta) seaClient(flagVal string) (*api.Client, bool) {
	addr, ok := m.seaAddrOrFail(flagVal)
	if !ok {
		return nil, false
	}
	// From a subdirectory of the working directory, the sea is the one
	// the working directory made, as for pondctl condor.
	root := authorityRoot(m.dir)
	token, err := auth.FindToken(m.getenv, root)
	if err != nil {
		m.fail("Cannot read the token", err)
		return nil, false
	}
	tlsCfg, err := auth.FindClientTLS(m.getenv, root)
	if err != nil {
		m.fail("Cannot read the sea's CA", err)
		return nil, false
	}
	return api.NewClient(addr).WithTLS(tlsCfg).WithToken(token), true
}

func (m *meta) seaMembers(ctx context.Context, args []string) int {
	fs := m.newFlagSet("sea members", "sea members [-json] [-status alive|failed|left] [-tag K=V]... [-sea ADDR]")
	seaAddr := fs.String("sea", "", "API address of an agent in the sea")
	jsonOut := fs.Bool("json", false, "print as JSON")
	status := fs.String("status", "", "only members with this status (alive, failed, left, leaving)")
	var tags stringList
	fs.Var(&tags, "tag", "only members with this tag value K=V (repeatable)")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	c, ok := m.seaClient(*seaAddr)
	if !ok {
		return 1
	}
	f := api.MembersFilter{Status: *status, Tags: map[string]string{}}
	for _, t := range tags {
		k, v, ok := strings.Cut(t, "=")
		if !ok {
			return m.errorf("Invalid -tag %q: expected K=V", t)
		}
		f.Tags[k] = v
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	members, err := c.Members(ctx, f)
	if err != nil {
		return m.fail("Cannot list the sea's members", err)
	}
	sort.Slice(members, func(i, j int) bool { return members[i].Name < members[j].Name })
	for i := range members {
		// An agent of an older version says "relay via NAME", or nothing;
		// the tags say the same for every version.
		members[i].Reach, members[i].Relay = api.Reach(members[i]), api.Relay(members[i])
	}
	if *jsonOut {
		return m.printJSON(members)
	}
	if len(members) == 0 {
		fmt.Fprintln(m.stdout, "No members match.")
		return 0
	}
	if err := printTable(m.stdout, membersHeader, membersRows(members)); err != nil {
		return m.fail("Cannot print the table", err)
	}
	return 0
}

// membersHeader heads the table of pondctl sea members.
var membersHeader = []string{"Name", "Address", "Status", "Reach", "Relay", "Tags"}

// membersRows are the rows of the table of pondctl sea members: the Reach
// column is direct or reverse, as in -json, and Relay names the relay of
// a member reached in reverse ("-" for the others).
func membersRows(members []api.Member) [][]string {
	rows := make([][]string, 0, len(members))
	for _, mb := range members {
		keys := make([]string, 0, len(mb.Tags))
		for k := range mb.Tags {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var kv []string
		for _, k := range keys {
			kv = append(kv, k+"="+mb.Tags[k])
		}
		relay := mb.Relay
		if relay == "" {
			relay = "-"
		}
		rows = append(rows, []string{mb.Name, mb.GossipAddr(), mb.Status, mb.Reach, relay, strings.Join(kv, ",")})
	}
	return rows
}

func (m *meta) seaKeys(ctx context.Context, args []string) int {
	fs := m.newFlagSet("sea keys", "sea keys [-sea ADDR] [-json] list | install KEY | use KEY | remove KEY")
	seaAddr := fs.String("sea", "", "API address of an agent in the sea")
	jsonOut := fs.Bool("json", false, "print as JSON")
	// Options may also follow the operation: sea keys list -json.
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return 1
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) == 0 {
		return m.errorf("sea keys needs an operation: list, install KEY, use KEY or remove KEY")
	}
	c, ok := m.seaClient(*seaAddr)
	if !ok {
		return 1
	}
	ctx, cancel := context.WithTimeout(ctx, api.KeyTimeout)
	defer cancel()
	op := pos[0]
	var (
		res *api.KeyResult
		err error
	)
	switch op {
	case "list":
		if len(pos) != 1 {
			return m.errorf("sea keys list takes no arguments")
		}
		res, err = c.ListKeys(ctx)
	case "install", "use", "remove":
		if len(pos) != 2 {
			return m.errorf("sea keys %s needs the key, and only the key", op)
		}
		key := pos[1]
		switch op {
		case "install":
			res, err = c.InstallKey(ctx, key)
		case "use":
			res, err = c.UseKey(ctx, key)
		default:
			res, err = c.RemoveKey(ctx, key)
		}
	default:
		return m.errorf("Unknown key operation %q: use list, install, use or remove", op)
	}
	if err != nil {
		return m.fail("Key operation failed", err)
	}
	if *jsonOut {
		return m.printJSON(res)
	}
	fmt.Fprintf(m.stdout, "%d of %d nodes answered, %d errors\n", res.NumResp, res.NumNodes, res.NumErr)
	for k, n := range res.Keys {
		primary := ""
		if res.PrimaryKeys[k] > 0 {
			primary = " (primary)"
		}
		fmt.Fprintf(m.stdout, "  %s [%d/%d]%s\n", k, n, res.NumNodes, primary)
	}
	for node, msg := range res.Messages {
		fmt.Fprintf(m.stderr, "  %s: %s\n", node, msg)
	}
	if res.NumErr > 0 {
		return 1
	}
	return 0
}

func (m *meta) seaQuery(ctx context.Context, args []string) int {
	fs := m.newFlagSet("sea query", "sea query -requirements EXPR [-rank EXPR] [-k N] [-first-fit] [-redundant] [-attrs a,b] [-timeout D] [-json] [-sea ADDR]")
	seaAddr := fs.String("sea", "", "API address of the agent that roots the query")
	req := fs.String("requirements", "", "ClassAd Requirements the machine ads must satisfy (required)")
	rank := fs.String("rank", "", "ClassAd Rank; higher is better")
	k := fs.Int("k", 10, "how many matches to return (0: all)")
	firstFit := fs.Bool("first-fit", false, "return any k matches as soon as they are found")
	redundant := fs.Bool("redundant", false, "run the clockwise and counter-clockwise trees at once")
	attrs := fs.String("attrs", "", "comma-separated machine-ad attributes to show")
	timeout := fs.Duration("timeout", api.DefaultQueryTimeout, "query deadline")
	jsonOut := fs.Bool("json", false, "print the answer as JSON")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	if *req == "" {
		return m.errorf("sea query needs -requirements")
	}
	c, ok := m.seaClient(*seaAddr)
	if !ok {
		return 1
	}
	q := api.Query{Requirements: *req, Rank: *rank, K: *k, Redundant: *redundant, Deadline: time.Now().Add(*timeout)}
	if *firstFit {
		q.Mode = api.FirstFit
	}
	var names []string
	if *attrs != "" {
		for _, a := range strings.Split(*attrs, ",") {
			if a = strings.TrimSpace(a); a != "" {
				names = append(names, a)
			}
		}
		q.Attrs = names
	}
	ans, err := c.Query(ctx, q)
	if err != nil {
		return m.fail("Query failed", err)
	}
	if *jsonOut {
		return m.printJSON(ans)
	}
	headers := append([]string{"Name", "Rank"}, names...)
	rows := make([][]string, 0, len(ans.Matches))
	for _, mt := range ans.Matches {
		row := []string{mt.Name, strconv.FormatFloat(mt.Rank, 'g', -1, 64)}
		for _, n := range names {
			if v, ok := mt.Attrs[n]; ok {
				row = append(row, fmt.Sprint(v))
			} else {
				row = append(row, "undefined")
			}
		}
		rows = append(rows, row)
	}
	if err := printTable(m.stdout, headers, rows); err != nil {
		return m.fail("Cannot print the table", err)
	}
	st := ans.Stats
	noun := "matches"
	if len(ans.Matches) == 1 {
		noun = "match"
	}
	fmt.Fprintf(m.stdout, "\n%d %s; visited %d nodes, %d messages, depth %d, %s; coverage %d/%d members (%.1f%%)\n",
		len(ans.Matches), noun, st.Visited, st.Messages, st.Depth, st.Latency.Round(time.Millisecond), st.Covered, st.Members, 100*st.Completeness)
	switch q := ans.Query; {
	case q.Mode == api.FirstFit && q.K > 0 && len(ans.Matches) >= q.K && st.Completeness < 1:
		// Not a shortfall: first-fit stops spreading once it has k.
		fmt.Fprintf(m.stdout, "first-fit stopped once it had %d; the rest of the sea was not asked\n", q.K)
	case len(st.MissingMembers) > 0:
		fmt.Fprintf(m.stdout, "missing: %s\n", strings.Join(st.MissingMembers, ", "))
	}
	return 0
}

// seaAddrOrFail returns the sea address from -sea, POND_SEA_ADDR or the
// configuration.
func (m *meta) seaAddrOrFail(flagVal string) (string, bool) {
	cfg, _ := config.LoadDir(m.dir, loadOptions())
	addr := m.seaAddr(flagVal, cfg)
	if root := authorityRoot(m.dir); addr == "" && root != m.dir {
		cfg, _ = config.LoadDir(root, loadOptions())
		addr = m.seaAddr(flagVal, cfg)
	}
	if addr == "" {
		m.errorf("No sea address: pass -sea ADDR (an agent's -api address), set POND_SEA_ADDR, or add pond { sea { address = \"...\" } } to the configuration")
		return "", false
	}
	return addr, true
}

// authorityRoot returns dir or, when dir has no sea authority of its own
// (no token signing key, no CA), its nearest parent that has one: the
// working directory a command run in one of its subdirectories belongs
// to, as the condor tools find it. dir itself when none has.
func authorityRoot(dir string) string {
	dir = filepath.Clean(dir)
	for d := dir; ; {
		for _, f := range []string{auth.SigningKeyFile, auth.CACertFile} {
			if _, err := os.Stat(filepath.Join(d, filepath.FromSlash(auth.AuthorityDir), f)); err == nil {
				return d
			}
		}
		parent := filepath.Dir(d)
		if parent == d {
			return dir
		}
		d = parent
	}
}
