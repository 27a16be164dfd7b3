// Package node plugs the services of a sea node into the agent: the node's
// live machine ad, PonD tree queries over TCP (the engine of overlay/tree,
// routed over the serf membership, evaluated with ClassAds), and pond
// membership (invitations, release, orphan withdrawal).
package node

import (
	"context"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/serf/serf"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/overlay/agent"
	"github.com/pond-htc/pond/overlay/autoscale"
	"github.com/pond-htc/pond/overlay/gossip"
	"github.com/pond-htc/pond/overlay/member"
	"github.com/pond-htc/pond/overlay/ring"
	"github.com/pond-htc/pond/overlay/seaquery"
	"github.com/pond-htc/pond/overlay/tree"
)

// HopTimeout bounds how long a node waits for a silent child before
// handing the child's region on.
const HopTimeout = 250 * time.Millisecond

// RepairRounds is how many times a query rooted at this node re-asks the
// parts of the sea its trees did not cover, while its deadline allows (see
// tree.Config.RepairRounds). A complete answer costs nothing more.
const RepairRounds = 2

// Configuration knobs the node services read from the agent's config file.
const (
	KnobJoinPolicy    = "POND_JOIN_POLICY"
	KnobOrphanTimeout = "POND_ORPHAN_TIMEOUT"
)

// Node is the services of one agent.
type Node struct {
	a       *agent.Agent
	tree    *tree.Server
	members *member.Manager
	condor  *condor
	policy  *autoscale.Policy
	started time.Time

	mu      sync.Mutex
	ad      *classad.Ad
	adTime  time.Time
	stamped *member.Membership
	// attrs re-reads the operator's attributes from the configuration
	// file; attrs0 are those read at start, which the agent's own
	// attributes already hold.
	attrs  attrFile
	attrs0 map[string]any
}

// Hook is an agent.Hook that starts the node services.
func Hook(ctx context.Context, a *agent.Agent) error {
	_, err := Start(ctx, a)
	return err
}

// Start starts the node services on a; they stop when ctx is done.
func Start(ctx context.Context, a *agent.Agent) (*Node, error) {
	self := a.Self()
	n := &Node{a: a, started: time.Now(), attrs: attrFile{path: a.ConfigFile()}}
	logger := a.Logger()
	n.attrs0, _, _ = n.attrs.load()

	// Tree queries: served over TCP on the API's host, advertised in a
	// tag, routed over the serf membership.
	host, _, err := net.SplitHostPort(a.APIAddr())
	if err != nil {
		return nil, fmt.Errorf("API address %q: %w", a.APIAddr(), err)
	}
	ev := seaquery.NewEvaluator(n.MachineAd)
	tn, err := tree.NewServer(tree.ServerConfig{
		Name:         self.Name,
		Listen:       net.JoinHostPort(host, "0"),
		Evaluator:    ev,
		Logger:       logger,
		HopTimeout:   HopTimeout,
		RepairRounds: RepairRounds,
	})
	if err != nil {
		return nil, fmt.Errorf("tree queries: %w", err)
	}
	n.tree = tn
	if err := a.SetTag(tree.TagAddr, tn.Addr()); err != nil {
		tn.Close()
		return nil, err
	}
	a.Mux().Handle("POST /v1/query", seaquery.Handler(tn))
	// The flat alternative: serf's own broadcast query, every member
	// answering the origin.
	a.ServeMatchQueries(ctx, ev)

	// The HTCondor-compatible daemons, following CONDOR_HOST.
	c, err := startCondor(ctx, a)
	if err != nil {
		tn.Close()
		return nil, err
	}
	n.condor = c

	// Pond membership.
	orphan := 30 * time.Second
	if v, ok := a.Knob(KnobOrphanTimeout); ok {
		if d, err := time.ParseDuration(v); err == nil {
			orphan = d
		} else if s, err := strconv.Atoi(v); err == nil {
			orphan = time.Duration(s) * time.Second
		} else {
			tn.Close()
			return nil, fmt.Errorf("%s = %q: want a duration", KnobOrphanTimeout, v)
		}
	}
	policy, _ := a.Knob(KnobJoinPolicy)
	mgr, err := member.New(member.Options{
		Name:                self.Name,
		DataDir:             a.DataDir(),
		Busy:                n.busy,
		Ad:                  n.MachineAd,
		JoinPolicy:          policy,
		Apply:               n.applyMembership,
		Drain:               n.drain,
		CentralManagerAlive: n.centralManagerAlive,
		Orphan:              orphan,
		Logger:              logger,
	})
	if err != nil {
		tn.Close()
		return nil, err
	}
	n.members = mgr
	if err := mgr.Restore(ctx); err != nil {
		logger.Warn("restoring pond membership", "err", err)
	}
	h := mgr.Handler()
	a.Mux().Handle("/v1/pond", h)
	a.Mux().Handle("/v1/pond/", h)

	// The pond policy: ponds grown by the node's own queue.
	if err := n.startPolicy(ctx); err != nil {
		tn.Close()
		return nil, err
	}

	events := a.Sea().Subscribe(256)
	go func() {
		defer tn.Close()
		routed := map[string]ring.Member{}
		n.refreshMembers(routed)
		// Membership events drive the refresh; the ticker only catches an
		// event a full subscription buffer dropped.
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		check := time.NewTicker(time.Second)
		defer check.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-events:
				// A member serf declares failed, or that left, will not
				// answer: queries waiting on it hand its region on now
				// rather than at their hop timeout.
				if me, ok := ev.(serf.MemberEvent); ok && (me.Type == serf.EventMemberFailed || me.Type == serf.EventMemberLeave) {
					for _, m := range me.Members {
						tn.Engine.PeerFailed(m.Name)
					}
				}
				n.refreshMembers(routed)
			case <-tick.C:
				n.refreshMembers(routed)
			case <-check.C:
				if err := mgr.Check(ctx); err != nil {
					logger.Warn("pond membership check", "err", err)
				}
			}
		}
	}()
	return n, nil
}

// refreshMembers gives the router the live members that answer tree
// queries. Rebuilding the routing table costs a sort of the whole ring, and
// most membership events do not touch it (a pond member's tags change,
// say): the router is rebuilt only when the routed members differ from the
// last refresh. routed is that last set; only the goroutine that refreshes
// uses it.
func (n *Node) refreshMembers(routed map[string]ring.Member) {
	if ms, changed := routedMembers(n.a.Sea().Serf().Members(), routed); changed {
		n.tree.SetMembers(ms)
	}
}

// routedMembers returns the members a tree query is routed to (alive, pond
// agents with a tree address) and whether they differ, by name or tree
// address, from routed, which it updates to them.
func routedMembers(members []serf.Member, routed map[string]ring.Member) ([]ring.Member, bool) {
	var ms []ring.Member
	changed := false
	for _, m := range members {
		addr := m.Tags[tree.TagAddr]
		version, pond := m.Tags[gossip.TagVersion]
		if m.Status != serf.StatusAlive || addr == "" || !pond {
			continue
		}
		if version == "1" {
			addr = tree.JSONAddr(addr) // it reads only JSON frames
		}
		rm, ok := routed[m.Name]
		if !ok || rm.Addr != addr {
			// The ring position is a hash of the name: keep it for the
			// members already known.
			if ok {
				rm.Addr = addr
			} else {
				rm = ring.NewMember(m.Name, addr)
			}
			routed[m.Name] = rm
			changed = true
		}
		ms = append(ms, rm)
	}
	if len(ms) != len(routed) {
		// Members left or failed: forget them.
		changed = true
		live := make(map[string]bool, len(ms))
		for _, m := range ms {
			live[m.Name] = true
		}
		for name := range routed {
			if !live[name] {
				delete(routed, name)
			}
		}
	}
	return ms, changed
}

// busy says why the node cannot join a pond: it belongs to a declared pool.
func (n *Node) busy() string {
	tags := n.a.Sea().LocalMember().Tags
	if p := tags[gossip.TagPool]; p != "" {
		return "member of pool " + p
	}
	return ""
}

// centralManagerAlive reports whether an alive member of the sea serves
// its API at addr.
func (n *Node) centralManagerAlive(addr string) bool {
	for _, m := range n.a.Sea().Members() {
		if m.Tags[gossip.TagAPI] == addr {
			return m.Status == "alive"
		}
	}
	return false
}

// applyMembership makes the node a member of m, or frees it when m is nil:
// its CONDOR_HOST (the cm tag), its pond tag and the stamped attributes.
func (n *Node) applyMembership(ctx context.Context, m *member.Membership) error {
	cm, pond := n.a.APIAddr(), ""
	if m != nil {
		cm, pond = m.CentralManager, m.Pond
	}
	n.mu.Lock()
	n.stamped = m
	n.ad = nil
	n.mu.Unlock()
	// The stamps reach the startd's slot ads with the reconfiguration that
	// moves it to the new central manager.
	n.condor.setStamps(stampsOf(m))
	return n.a.SetCondorHost(cm, map[string]string{gossip.TagPond: pond})
}

// drain empties the node's startd before it leaves a pond.
func (n *Node) drain(ctx context.Context, evict bool) (member.DrainResult, func()) {
	sd := n.condor.master.Startd()
	if sd == nil {
		return member.DrainResult{}, func() {}
	}
	r := sd.Drain(ctx, evict)
	return member.DrainResult{Finished: r.Finished, Evicted: r.Evicted, Took: r.Took}, sd.Resume
}

// cpusInUse counts the cores of the startd's claimed slots (dynamic and
// static: a partitionable slot lends its cores to its dynamic ones). It
// reports false if the node runs no startd.
func (n *Node) cpusInUse() (int64, bool) {
	if n.condor == nil || n.condor.master == nil {
		return 0, false
	}
	sd := n.condor.master.Startd()
	if sd == nil {
		return 0, false
	}
	var used int64
	for _, slot := range sd.Slots() {
		if typ, _ := slot.EvalAttr("SlotType").StringValue(); typ == "Partitionable" {
			continue
		}
		if state, _ := slot.EvalAttr("State").StringValue(); state != "Claimed" {
			continue
		}
		if c, ok := slot.EvalAttr("Cpus").IntValue(); ok {
			used += c
		}
	}
	return used, true
}

// stampsOf returns the attributes a membership stamps on the node's slot
// ads, as ClassAd expression text.
func stampsOf(m *member.Membership) map[string]string {
	if m == nil {
		return nil
	}
	out := map[string]string{"PondName": strconv.Quote(m.Pond), "PondID": strconv.Quote(m.PondID)}
	if len(m.JobIDs) > 0 {
		out["PondJobIds"] = strconv.Quote(strings.Join(m.JobIDs, ","))
	}
	for k, v := range m.Attributes {
		if !agent.ValidAttrName(k) {
			continue
		}
		if _, err := classad.ParseExpr(v); err != nil || strings.ContainsAny(v, "\r\n") {
			v = strconv.Quote(v)
		}
		out[k] = v
	}
	return out
}

// adTTL is how long a built machine ad is reused before dynamic attributes
// are read again.
const adTTL = time.Second

// MachineAd returns the node's live machine ad: the agent's attributes,
// dynamic ones (LoadAvg, KeyboardIdle, free Memory), where its API is
// (PondAPI), and what its pond stamped.
func (n *Node) MachineAd() *classad.Ad {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ad != nil && time.Since(n.adTime) < adTTL {
		return n.ad
	}
	self := n.a.Self()
	ad := classad.NewAd()
	names := make([]string, 0, len(self.Attributes))
	for k := range self.Attributes {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		setAny(ad, k, self.Attributes[k])
	}
	fileAttrs, changed, err := n.attrs.load()
	if err != nil && changed {
		n.a.Logger().Warn("configuration file: keeping the attributes last read", "file", n.attrs.path, "err", err)
	}
	for k := range n.attrs0 {
		if _, ok := fileAttrs[k]; !ok {
			ad.Delete(k) // taken out of the file since the agent started
		}
	}
	for k, v := range fileAttrs {
		setAny(ad, k, v)
	}
	ad.SetString("MyType", "Machine")
	ad.SetString("PondAPI", self.API)
	ad.SetString("PondPool", self.Pool)
	ad.SetString("CondorHost", self.CondorHost)
	ad.SetInt("KeyboardIdle", int64(time.Since(n.started)/time.Second))
	if la, ok := loadAvg(); ok {
		ad.SetReal("LoadAvg", la)
	}
	if free, ok := memAvailableMiB(); ok {
		ad.SetInt("FreeMemory", free)
	}
	// What jobs' default Requirements ask of a machine.
	ad.SetBool("HasFileTransfer", true)
	if disk, ok := diskFreeKiB(n.a.DataDir()); ok {
		ad.SetInt("Disk", disk)
	}
	if used, ok := n.cpusInUse(); ok {
		ad.SetInt("CpusInUse", used)
	}
	if m := n.stamped; m != nil {
		ad.SetString("PondName", m.Pond)
		ad.SetString("PondID", m.PondID)
		if len(m.JobIDs) > 0 {
			ad.SetString("PondJobIds", strings.Join(m.JobIDs, ","))
		}
		for k, v := range m.Attributes {
			if err := ad.SetExpr(k, v); err != nil {
				ad.SetString(k, v)
			}
		}
	}
	n.ad, n.adTime = ad, time.Now()
	return ad
}

func setAny(ad *classad.Ad, k string, v any) {
	switch v := v.(type) {
	case int64:
		ad.SetInt(k, v)
	case int:
		ad.SetInt(k, int64(v))
	case float64:
		if v == float64(int64(v)) && v < 1<<53 && v > -(1<<53) {
			ad.SetInt(k, int64(v))
		} else {
			ad.SetReal(k, v)
		}
	case bool:
		ad.SetBool(k, v)
	case string:
		ad.SetString(k, v)
	default:
		ad.SetString(k, fmt.Sprint(v))
	}
}

func loadAvg() (float64, bool) {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return v, err == nil
}

// diskFreeKiB returns the space available under dir, in KiB, as the startd
// advertises Disk.
func diskFreeKiB(dir string) (int64, bool) {
	if dir == "" {
		dir = os.TempDir()
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * st.Bsize / 1024, true
}

func memAvailableMiB() (int64, bool) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb / 1024, err == nil
			}
		}
	}
	return 0, false
}
