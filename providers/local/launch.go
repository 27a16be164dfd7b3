package local

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/startd"
	"github.com/pond-htc/pond/condor/wire"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/knobs"
	"github.com/pond-htc/pond/providers"
)

// ConfigFileName is the name of a node's HTCondor configuration file inside
// its data directory.
const ConfigFileName = "condor_config"

// LogFileName is the name of a node's log file inside its data directory.
const LogFileName = "agent.log"

func (p *Provider) dataDir(node string) string { return filepath.Join(p.root, "nodes", node) }

// launchReq describes one node to start.
type launchReq struct {
	pool    string
	address string
	index   int
	spec    spec
	record  spec     // spec as the journal records it (see Provider.recorded)
	cm      string   // API address of the central manager; "" for node 0 or free nodes
	join    []string // gossip addresses
	prev    *entry   // the node's previous journal entry, to reuse its addresses
}

// launch starts one node and waits until its API answers.
func (p *Provider) launch(ctx context.Context, r launchReq) (*entry, error) {
	e, err := p.launchOnce(ctx, r, true)
	if err != nil && r.prev != nil && r.prev.API != "" && ctx.Err() == nil {
		// The previous ports may be taken; try fresh ones. The sea may
		// still hold the node's earlier process alive at its old gossip
		// address (killed moments ago): a node of the same name joining
		// from another address would lose serf's name conflict to it and
		// shut down. So the sea is first given the time to see it gone.
		name := nodeName(r.pool, r.index)
		p.logger.Warn("relaunch on previous addresses failed; trying new ports", "node", name, "err", err)
		if err := p.waitMemberGone(ctx, r, name); err != nil {
			return nil, err
		}
		return p.launchOnce(ctx, r, false)
	}
	return e, err
}

// memberGoneTimeout bounds how long a relaunch on new ports waits for the
// sea to see the node's earlier process gone.
const memberGoneTimeout = 60 * time.Second

// waitMemberGone waits until no live agent of the pool, nor the provider's
// sea, holds the node name alive at the node's previous gossip address.
// With no agent to ask, there is nothing to wait for.
func (p *Provider) waitMemberGone(ctx context.Context, r launchReq, name string) error {
	var asks []string
	if es, err := p.journal.pool(r.pool); err == nil {
		for _, e := range es {
			if e.Node != name && e.API != "" && e.alive() {
				asks = append(asks, e.API)
			}
		}
	}
	if p.seaAddr != "" {
		asks = append(asks, p.seaAddr)
	}
	if len(asks) == 0 || r.prev.Gossip == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, memberGoneTimeout)
	defer cancel()
	for {
		held := false
		for _, addr := range asks {
			ms, err := p.client(addr).Members(ctx, api.MembersFilter{Status: api.StatusAlive})
			if err != nil {
				continue
			}
			for _, m := range ms {
				if m.Name == name && net.JoinHostPort(m.Addr, strconv.Itoa(int(m.Port))) == r.prev.Gossip {
					held = true
				}
			}
		}
		if !held {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: the sea still holds its earlier process alive at %s after %s: not started on new ports, where it would conflict with it", name, r.prev.Gossip, memberGoneTimeout)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (p *Provider) launchOnce(ctx context.Context, r launchReq, reuse bool) (*entry, error) {
	name := nodeName(r.pool, r.index)
	dir := p.dataDir(name)
	if err := privateDir(filepath.Dir(p.root)); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	os.Remove(filepath.Join(dir, api.InfoFile))
	if err := p.writeNodeConfig(dir, r); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	role := api.RoleNode
	if r.index == 0 && !r.spec.Free {
		role = api.RoleCM
	}
	args, err := p.agentArgs(r, name, dir, role, reuse)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	e := &entry{
		Pool: r.pool, Address: r.address, Node: name, Index: r.index, Role: role,
		DataDir: dir, Spec: r.record.hash(), NodeSpec: &r.record, Created: time.Now().UTC(),
		Nonce: rand.Text(), Bin: p.bin, Parent: os.Getpid(),
	}
	if st, _, err := procStart(os.Getpid()); err == nil {
		e.ParentStart = st
	}
	info, err := p.startAgent(ctx, e, args)
	if err != nil {
		return nil, err
	}
	e.API, e.Gossip = info.API, info.Gossip
	if invites(role, r.spec) {
		if err := p.grantNode(dir, name, info.API); err != nil {
			e.stop(2 * time.Second)
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	if err := p.journal.write(e); err != nil {
		return nil, err
	}
	return e, nil
}

// agentArgs returns the arguments of the node's pondctl agent: its
// addresses (those it had, when reuse), role, pool and central manager,
// its credentials and TLS files and, for the central manager of a pool
// whose factory has entries, the factory's.
func (p *Provider) agentArgs(r launchReq, name, dir, role string, reuse bool) ([]string, error) {
	bind := net.JoinHostPort(p.bindAddr, "0")
	api := net.JoinHostPort(p.bindAddr, "0")
	if reuse && r.prev != nil {
		if r.prev.Gossip != "" {
			bind = r.prev.Gossip
		}
		if r.prev.API != "" {
			api = r.prev.API
		}
	}
	aa := providers.AgentArgs{
		Config:        filepath.Join(dir, ConfigFileName),
		Name:          name,
		Bind:          bind,
		API:           api,
		DataDir:       dir,
		GossipProfile: p.profile,
		// Every agent of the sea is on this host: compressing the
		// gossip would only spend the CPU they share.
		NoGossipCompress: true,
		Role:             role,
		Join:             r.join,
		Attrs:            r.spec.Attrs,
	}
	if !r.spec.Free {
		aa.Pool, aa.CondorHost = r.pool, r.cm
		if r.index > 0 && r.spec.Reach != "" {
			// The central manager relays for the workers that need it.
			aa.Reach = r.spec.Reach
		}
	}
	args := aa.Args()
	creds, err := p.nodeCredentials(dir, name, invites(role, r.spec))
	if err != nil {
		return nil, err
	}
	args = append(args, creds...)
	certPool := r.pool
	if r.spec.Free {
		certPool = ""
	}
	tlsArgs, err := p.nodeTLS(dir, name, certPool)
	if err != nil {
		return nil, err
	}
	if !r.spec.Free && r.index == 0 && p.factoryPools[r.pool] {
		// The central manager of a pool whose factory has entries.
		fa, err := p.factoryArgs(r.pool)
		if err != nil {
			return nil, err
		}
		args = append(args, fa...)
		// Delegating a CA may have added a certificate to the sea's CA
		// file (one made before delegation existed), which the node's
		// copy must hold.
		if tlsArgs, err = p.nodeTLS(dir, name, certPool); err != nil {
			return nil, err
		}
	}
	return append(args, tlsArgs...), nil
}

// startAgent starts the node's pondctl agent with args, recorded in the
// journal before and after the fork, and waits until it is ready.
func (p *Provider) startAgent(ctx context.Context, e *entry, args []string) (*api.Info, error) {
	name, dir := e.Node, e.DataDir
	// Intent first: a crash between here and the fork leaves an entry
	// without a PID, which later runs simply drop; a crash after the fork
	// leaves one whose process resolve finds by its nonce, waiting for it
	// to exec if it has not yet.
	if err := p.journal.write(e); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(filepath.Join(dir, LogFileName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	defer logf.Close()
	cmd := exec.Command(p.bin, args...)
	cmd.Dir = dir
	cmd.Env = append(agentEnv(os.Environ(), dir), LaunchEnv+"="+e.Nonce)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		p.journal.remove(name)
		return nil, fmt.Errorf("%s: starting %s: %w", name, p.bin, err)
	}
	pid := cmd.Process.Pid
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	e.PID = pid
	if st, _, err := procStart(pid); err == nil {
		e.StartTime = st
	}
	if err := p.journal.write(e); err != nil {
		syscall.Kill(-pid, syscall.SIGKILL)
		return nil, err
	}
	info, err := waitReady(ctx, dir, pid, exited, p.client)
	if err != nil {
		e.stop(2 * time.Second)
		return nil, fmt.Errorf("%s: %w%s", name, err, logTail(filepath.Join(dir, LogFileName)))
	}
	return info, nil
}

// privateDir creates dir (the working directory's .pond) if need be and
// makes it private to its owner, mode 0700, even if it existed: the
// provider keeps the authority, the journal and the nodes' data in it.
func privateDir(dir string) error { return providers.PrivateDir(dir) }

func (p *Provider) writeNodeConfig(dir string, r launchReq) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Written by pond's local provider for %s.\n", r.address)
	// The pond_policy block's knobs and lenders_first first: a knob of
	// config, later in the file, overrides them.
	if lf := r.spec.LendersFirst; lf != nil {
		fmt.Fprintf(&b, "%s = %t\n", knobs.LendersFirst, *lf)
	}
	for _, knobs := range []map[string]string{r.spec.Policy, r.spec.Knobs} {
		for _, k := range slices.Sorted(maps.Keys(knobs)) {
			fmt.Fprintf(&b, "%s = %s\n", k, knobs[k])
		}
	}
	if len(r.spec.Secret) > 0 {
		// The agent never shows these knobs (GET /v1/self).
		fmt.Fprintf(&b, "%s = %s\n", knobs.SecretKnobs, strings.Join(r.spec.Secret, ", "))
	}
	fmt.Fprintf(&b, "NUM_SLOTS = %d\n", r.spec.Slots)
	if r.spec.Replicas > 0 {
		fmt.Fprintf(&b, "%s = %d\n", knobs.CMReplicas, r.spec.Replicas)
	}
	key, err := p.gossipKey()
	if err != nil {
		return err
	}
	if key != "" {
		fmt.Fprintf(&b, "%s = %s\n", knobs.Encrypt, key)
	}
	// A pool password of the configuration is no longer used (the daemons
	// authenticate with tokens); the daemons warn about it.
	path := filepath.Join(dir, ConfigFileName)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b.Bytes(), 0o600); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// waitReady waits for the agent to write agent.json and answer /v1/health.
func waitReady(ctx context.Context, dir string, pid int, exited <-chan struct{}, client func(addr string) *api.Client) (*api.Info, error) {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for {
		if info, err := api.ReadInfo(dir); err == nil && info.PID == pid {
			hctx, hcancel := context.WithTimeout(ctx, 2*time.Second)
			_, herr := client(info.API).Health(hctx)
			hcancel()
			if herr == nil {
				return info, nil
			}
		}
		select {
		case <-exited:
			return nil, errors.New("agent exited before it was ready")
		case <-ctx.Done():
			return nil, fmt.Errorf("agent not ready: %w", ctx.Err())
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// logTail returns the last lines of a log file, formatted for an error
// message.
func logTail(path string) string {
	data, err := os.ReadFile(path)
	if err != nil || len(data) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return fmt.Sprintf("\nlast lines of %s:\n  %s", path, strings.Join(lines, "\n  "))
}

// seaJoinAddrs lists gossip addresses of live agents to join: agents of
// this working directory's journal first, then the configured sea agent.
func (p *Provider) seaJoinAddrs(ctx context.Context, exclude string) []string {
	var out []string
	if es, err := p.journal.all(); err == nil {
		for _, e := range es {
			if e.Node != exclude && e.Gossip != "" && e.alive() {
				out = append(out, e.Gossip)
				if len(out) == 3 {
					break
				}
			}
		}
	}
	if p.seaAddr != "" {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if self, err := p.client(p.seaAddr).Self(cctx); err == nil {
			out = append(out, self.Gossip)
		} else {
			p.logger.Warn("configured sea agent does not answer", "sea", p.seaAddr, "err", err)
		}
	}
	return out
}

// checkNamesFree makes sure that no node this pool is about to launch
// takes a name already alive in a shared sea (one set with the provider's
// sea address): serf would resolve the conflict by shutting one of the two
// down. A member at the node's own previous gossip address is this
// working directory's node, killed before the sea noticed. A sea that does
// not answer at all is an error too, before any node is started.
func (p *Provider) checkNamesFree(ctx context.Context, pool string, nodes int, live, prev map[int]*entry) error {
	if p.seaAddr == "" {
		return nil
	}
	starts := 0
	for i := range nodes {
		if live[i] == nil {
			starts++
		}
	}
	if starts == 0 {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ms, err := p.client(p.seaAddr).Members(cctx, api.MembersFilter{Status: api.StatusAlive})
	if we := new(wire.Error); errors.As(err, &we) && we.Status == http.StatusUnauthorized ||
		errors.Is(err, auth.ErrNotInSea) || errors.Is(err, wire.ErrPlainToTLS) {
		return fmt.Errorf("the sea at %s belongs to another authority (%v): a sea trusts one authority, so set POND_AUTHORITY to the .pond/auth directory of the working directory that made the sea before joining it", p.seaAddr, err)
	}
	if providers.NoAnswer(err) {
		// The nodes would start, wait for the sea in vain, and be left
		// running: start none.
		return fmt.Errorf("the sea at %s does not answer, so no node of pool %s was started (they join the sea there): %w", p.seaAddr, pool, err)
	}
	if err != nil {
		// Another failure is reported where the nodes try to join it.
		return nil
	}
	alive := make(map[string]string, len(ms))
	for _, m := range ms {
		alive[m.Name] = m.GossipAddr()
	}
	for i := range nodes {
		if live[i] != nil {
			continue
		}
		name := nodeName(pool, i)
		addr, taken := alive[name]
		if !taken || (prev[i] != nil && prev[i].Gossip == addr) {
			continue
		}
		return fmt.Errorf("node name %q is already taken in the sea at %s (by %s, perhaps a pool of another working directory): node names are the pool's name and an index, so give this pool a name of its own", name, p.seaAddr, addr)
	}
	return nil
}

// seaWatchers returns the API addresses of the agents, besides the pool's
// own, from which the pool's nodes are usually looked for in the sea: the
// first node of every other live pool of this working directory and the
// configured sea agent.
func (p *Provider) seaWatchers(pool string) []string {
	var out []string
	if es, err := p.journal.all(); err == nil {
		for _, e := range es {
			if e.Pool != pool && e.Index == 0 && e.API != "" && e.alive() {
				out = append(out, e.API)
			}
		}
	}
	if p.seaAddr != "" {
		out = append(out, p.seaAddr)
	}
	return out
}

// waitMembers waits until the pool is one in the sea: the first node
// sees every node alive and answering tree queries (its tree address
// tag has arrived), every node sees the first, and the agents at the
// watch API addresses too see every node ready for tree queries. (Gossip
// then spreads the rest; asking for all pairs costs N² calls and, for
// large pools, far longer than the pool needs to be usable.)
func (p *Provider) waitMembers(ctx context.Context, es []*entry, watch []string, timeout time.Duration) error {
	if len(es) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// sees returns the first of names that the agent at addr does not
	// see alive, and with a tree address if routed is set and that agent
	// answers tree queries itself.
	treeAgent := map[string]bool{}
	sees := func(c *api.Client, names []string, routed bool) (string, error) {
		addr := c.Addr()
		if routed {
			t, ok := treeAgent[addr]
			if !ok {
				self, err := c.Self(ctx)
				if err != nil {
					return "", err
				}
				t = self.Tags[api.TagTree] != ""
				treeAgent[addr] = t
			}
			routed = t
		}
		ms, err := c.Members(ctx, api.MembersFilter{Status: api.StatusAlive})
		if err != nil {
			return "", err
		}
		seen := make(map[string]bool, len(ms))
		for _, m := range ms {
			seen[m.Name] = !routed || m.Tags[api.TagTree] != ""
		}
		for _, n := range names {
			if !seen[n] {
				return n, nil
			}
		}
		return "", nil
	}
	all := make([]string, len(es))
	for i, e := range es {
		all[i] = e.Node
		p.refreshAddrs(e)
	}
	seed := es[0]
	watchers := []struct{ name, api string }{{seed.Node, seed.API}}
	for _, api := range watch {
		if api != seed.API {
			watchers = append(watchers, struct{ name, api string }{"the agent at " + api, api})
		}
	}
	done := map[string]bool{}
	var missing string
	for {
		missing = ""
		for _, w := range watchers {
			if n, err := sees(p.client(w.api), all, true); err != nil {
				missing = fmt.Sprintf("%s: %v", w.name, err)
				break
			} else if n != "" {
				missing = fmt.Sprintf("%s does not see %s ready for tree queries", w.name, n)
				break
			}
		}
		if missing == "" {
			for _, e := range es[1:] {
				if done[e.Node] {
					continue
				}
				n, err := sees(p.nodeClient(e), []string{seed.Node}, false)
				if err != nil {
					missing = fmt.Sprintf("%s: %v", e.Node, err)
					if p.refreshAddrs(e) {
						// The node moved (its relay gave it other
						// ports): ask it there at once.
						missing = fmt.Sprintf("%s moved to %s", e.Node, e.API)
						continue
					}
					break
				}
				if n != "" {
					missing = fmt.Sprintf("%s does not see %s", e.Node, n)
					break
				}
				done[e.Node] = true
			}
		}
		if missing == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nodes did not join one another in the sea within %s: %s", timeout, missing)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stopAll stops entries in parallel and removes their data and journal
// entries.
func (p *Provider) stopAll(es []*entry, remove bool) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, e := range es {
		wg.Go(func() {
			e.stop(stopTimeout)
			if e.alive() {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s (pid %d) did not stop", e.Node, e.PID))
				mu.Unlock()
				return
			}
			if remove {
				if err := p.journal.remove(e.Node); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
			if remove && strings.HasPrefix(filepath.Clean(e.DataDir), p.root+string(filepath.Separator)) {
				// The scratch directories of the jobs of a node that
				// died may lie outside its data directory.
				if err := startd.RemoveExecute(e.DataDir); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", e.Node, err))
					mu.Unlock()
				}
				if err := os.RemoveAll(e.DataDir); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
