package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// keepSpare is how long the cgroup of a slot's ended job is kept for the
// slot's next job (Manager.keepSpare). It is well below the time after
// which other agents take an empty cgroup for abandoned (see
// SweepAbandoned): a kept cgroup is touched as it is kept.
const keepSpare = 10 * time.Second

// spare is an ended job's cgroup kept for the next job of its name.
type spare struct {
	g     *Group
	timer *time.Timer
}

// Reusable says whether a job's cgroup can serve the next job of its slot
// (Release, Acquire): in v1, whose accounting of memory peaks and CPU can
// be reset. v2's memory.peak cannot be reset for every reader, so each v2
// job gets a new cgroup (one directory, cheaper to make than v1's one
// per hierarchy).
func (m *Manager) Reusable() bool { return !m.v2 }

// Acquire is the cgroup name (a single path element, a slot's: see
// Release) with limits lim for a job: the one the last job of that name
// left, kept (Release), readied for this job (its accounting reset) when
// its limits are lim and the last job left little memory charged to it
// (keptCharge), else a new one (Create).
func (m *Manager) Acquire(name string, lim Limits) (*Group, error) {
	m.mu.Lock()
	sp := m.spares[name]
	delete(m.spares, name)
	expiring := m.expiring[name]
	m.mu.Unlock()
	if expiring != nil {
		// The last one's time is up and it is being removed: the new
		// one, at the same paths, is made once it is gone.
		<-expiring
	}
	if sp != nil {
		sp.timer.Stop()
		if sp.g.lim == lim && sp.g.ready() == nil {
			return sp.g, nil
		}
		// Limits changed, memory left charged, or the cgroup could
		// not be readied (another agent took it for abandoned): a
		// new one.
		_ = sp.g.Remove()
	}
	return m.Create(name, lim)
}

// Release ends the job's use of its cgroup: whatever is left in it is
// killed and, where cgroups can be reused (Reusable), it is kept a while
// for the next job of its name (Acquire), else removed.
func (g *Group) Release() error {
	m := g.m
	if !m.Reusable() || !g.counted {
		return g.Remove()
	}
	if err := g.Kill(); err != nil {
		return errors.Join(err, g.Remove())
	}
	// Touched, so that other agents' sweeps do not take it for
	// abandoned while it is kept.
	now := time.Now()
	if err := os.Chtimes(g.primary(), now, now); err != nil {
		return errors.Join(fmt.Errorf("keeping the job's cgroup: %w", err), g.Remove())
	}
	name := filepath.Base(g.primary())
	sp := &spare{g: g}
	m.mu.Lock()
	if m.closed {
		// The agent is stopping: nothing is kept past it.
		m.mu.Unlock()
		return g.Remove()
	}
	old := m.spares[name]
	if m.spares == nil {
		m.spares = map[string]*spare{}
	}
	m.spares[name] = sp
	sp.timer = time.AfterFunc(m.keepSpare, func() {
		m.mu.Lock()
		mine := m.spares[name] == sp
		var done chan struct{}
		if mine {
			delete(m.spares, name)
			done = make(chan struct{})
			if m.expiring == nil {
				m.expiring = map[string]chan struct{}{}
			}
			m.expiring[name] = done
		}
		hook := m.expireHook
		m.mu.Unlock()
		if !mine {
			return
		}
		if hook != nil {
			hook(name)
		}
		_ = g.Remove()
		m.mu.Lock()
		if m.expiring[name] == done {
			delete(m.expiring, name)
		}
		m.mu.Unlock()
		close(done)
	})
	m.mu.Unlock()
	if old != nil && old.g != g {
		// Another group of the same name was kept: its paths are g's,
		// made again since, so it is let go without removing them.
		old.timer.Stop()
		old.g.forget()
	}
	return nil
}

// forget lets go of a group whose directories are another's now (made
// again at the same paths): its files are closed and it no longer counts
// among its manager's live cgroups, but nothing is removed.
func (g *Group) forget() {
	g.f.close()
	if g.counted {
		g.counted = false
		g.m.release()
	}
}

// keptCharge is the most memory an ended job may leave charged to its
// cgroup (page cache of the files it read, which outlives it) for the
// cgroup to serve the slot's next job: that memory counts as the next
// job's until the kernel reclaims it. Reclaiming it as a cgroup is kept
// (memory.force_empty) costs more CPU than a new cgroup; a job that read
// more than this gets a new one.
const keptCharge = 1 << 20

// errCharged is the error of a kept cgroup the last job left too much
// memory charged to (see keptCharge).
var errCharged = errors.New("the last job left memory charged to its cgroup")

// ready readies a kept cgroup, empty, for another job: its memory peak
// and CPU time reset and its count of processes killed over the memory
// limit noted (v1 cannot reset it). It fails when the last job left more
// than keptCharge charged to the cgroup.
func (g *Group) ready() error {
	mem := g.dirs["memory"]
	charged, err := g.f.readInt(filepath.Join(mem, "memory.usage_in_bytes"))
	if err != nil {
		return err
	}
	if charged > keptCharge {
		return fmt.Errorf("%w: %d bytes", errCharged, charged)
	}
	if err := g.f.write(filepath.Join(mem, "memory.max_usage_in_bytes"), "0"); err != nil {
		return err
	}
	if d, ok := g.dirs["cpuacct"]; ok {
		if err := g.f.write(filepath.Join(d, "cpuacct.usage"), "0"); err != nil {
			return err
		}
	}
	oc, err := g.f.readKV(filepath.Join(mem, "memory.oom_control"))
	if err != nil {
		return err
	}
	g.oomBase = oc["oom_kill"]
	return nil
}

// removeSpares removes the kept cgroups, and keeps none from now on.
func (m *Manager) removeSpares() {
	m.mu.Lock()
	spares := m.spares
	m.spares, m.closed = nil, true
	m.mu.Unlock()
	for _, sp := range spares {
		sp.timer.Stop()
		_ = sp.g.Remove()
	}
}
