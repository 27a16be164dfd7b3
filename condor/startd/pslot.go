package startd

import (
	"context"
	"fmt"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/wire"
)

// pslotPreemptClaim grants a claim on a partitionable slot that preempts
// some of its dynamic slots (req.Preempts, each named by its preempting
// claim id), as HTCondor's startd does for a match of
// ALLOW_PSLOT_PREEMPTION: the jobs of those dynamic slots retire and are
// vacated (each as a preempted static slot's), their slots are released,
// and the job's dynamic slot is carved from their resources and the free
// ones. The free resources the job needs beyond the dynamic slots' are
// held for it meanwhile. It answers then, or when ctx ends first.
func (s *Startd) pslotPreemptClaim(ctx context.Context, req *wire.ClaimRequest, job *classad.Ad) (*wire.ClaimResponse, error) {
	s.mu.Lock()
	pslot, victims, held, err := s.checkPslotPreemptLocked(req, job)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	// The free resources the job needs beyond the victims' are the
	// claim's from now on.
	pslot.cpus -= held.cpus
	pslot.memory -= held.memory
	pslot.disk -= held.disk
	ps := make([]*preemption, len(victims))
	for i, v := range victims {
		ps[i] = s.beginPreemptionLocked(v, s.slotAd(v), job)
	}
	s.markDirty()
	s.mu.Unlock()
	// undo gives back what the claim holds: the held resources, the
	// victims already freed for it; s.mu must be held.
	undo := func() {
		pslot.cpus += held.cpus
		pslot.memory += held.memory
		pslot.disk += held.disk
		for i, v := range victims {
			switch {
			case v.preempting == ps[i]:
				// Its job still ends; the slot waits for no one.
				v.preempting = nil
			case s.claims[ps[i].id] == v:
				s.releaseLocked(v)
			}
		}
		s.markDirty()
	}
	for i, p := range ps {
		select {
		case <-p.free:
		case <-ctx.Done():
			s.mu.Lock()
			undo()
			s.mu.Unlock()
			return nil, fmt.Errorf("%w: slot %s: the preempted job of %s has not ended yet", wire.ErrConflict,
				pslot.name, victims[i].name)
		case <-s.stop.Done():
			return nil, fmt.Errorf("%w: startd is shutting down", wire.ErrConflict)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("%w: startd is shutting down", wire.ErrConflict)
	}
	for i, v := range victims {
		if s.claims[ps[i].id] != v {
			undo()
			return nil, fmt.Errorf("%w: slot %s was not freed for the claim", wire.ErrConflict, v.name)
		}
	}
	for _, v := range victims {
		s.releaseLocked(v)
	}
	pslot.cpus += held.cpus
	pslot.memory += held.memory
	pslot.disk += held.disk
	s.log.Info("the preempted dynamic slots were released: carving the preempting job's", "slot", pslot.name,
		"preempted", len(victims))
	return s.carveLocked(pslot, req, job, s.slotAd(pslot))
}

// resources are cpus, memory (MB) and disk (KB).
type resources struct {
	cpus, memory int
	disk         int64
}

// checkPslotPreemptLocked checks a claim on a partitionable slot that
// preempts dynamic slots of it: the slot, the dynamic slots, and what the
// job needs of the slot's free resources beyond theirs; s.mu must be
// held.
func (s *Startd) checkPslotPreemptLocked(req *wire.ClaimRequest, job *classad.Ad) (*slot, []*slot, resources, error) {
	var held resources
	switch {
	case s.closed:
		return nil, nil, held, fmt.Errorf("%w: startd is shutting down", wire.ErrConflict)
	case s.drainingLocked():
		return nil, nil, held, fmt.Errorf("%w: the machine is draining", wire.ErrConflict)
	case req.Epoch < s.epoch:
		return nil, nil, held, fmt.Errorf("%w: %w: the match is of central-manager epoch %d, the pool is at epoch %d",
			wire.ErrConflict, ErrStaleEpoch, req.Epoch, s.epoch)
	}
	pslot := s.claims[req.ClaimID]
	if pslot == nil || !pslot.partitionable {
		return nil, nil, held, fmt.Errorf("%w: unknown claim id of a partitionable slot", wire.ErrNotFound)
	}
	if err := s.refusalLocked(job); err != nil {
		return nil, nil, held, err
	}
	seen := map[*slot]bool{}
	var victims []*slot
	got := resources{cpus: pslot.cpus, memory: pslot.memory, disk: pslot.disk}
	for _, ps := range req.Preempts {
		v := s.preemptingSlotLocked(ps.ClaimID)
		if v == nil || v.parent != pslot {
			return nil, nil, held, fmt.Errorf("%w: slot %s: %s is no dynamic slot of it that may be preempted",
				wire.ErrConflict, pslot.name, firstNonEmpty(ps.SlotName, "a preempted slot"))
		}
		if seen[v] {
			return nil, nil, held, fmt.Errorf("%w: slot %s: %s is named twice", wire.ErrBadRequest, pslot.name, v.name)
		}
		seen[v] = true
		if v.preempting != nil || v.retire {
			return nil, nil, held, fmt.Errorf("%w: slot %s is already being preempted", wire.ErrConflict, v.name)
		}
		vad := s.slotAd(v)
		cur := s.currentRankLocked(v, vad)
		if nr, _ := classad.EvalWith(s.rank, vad, job).NumberValue(); nr < cur {
			return nil, nil, held, fmt.Errorf("%w: slot %s ranks the job (%g) lower than the one it runs (%g)",
				wire.ErrConflict, v.name, nr, cur)
		}
		victims = append(victims, v)
		got.cpus += v.cpus
		got.memory += v.memory
		got.disk += v.disk
	}
	// The slot as it will be once the dynamic slots are released.
	ad := s.slotAd(pslot)
	ad.SetInt("Cpus", int64(got.cpus))
	ad.SetInt("Memory", int64(got.memory))
	ad.SetInt("Disk", got.disk)
	if !classad.EvalWith(s.start, ad, job).IsTrue() {
		return nil, nil, held, fmt.Errorf("%w: slot %s: START rejects the job", wire.ErrConflict, pslot.name)
	}
	if !classad.Match(job, ad) {
		return nil, nil, held, fmt.Errorf("%w: slot %s does not match the job", wire.ErrConflict, pslot.name)
	}
	cpus, mem, disk := requestOf(job, ad)
	if cpus > got.cpus || mem > got.memory || disk > got.disk {
		return nil, nil, held, fmt.Errorf("%w: slot %s has %d cpus, %d MB, %d KB with the preempted slots; job requests %d, %d MB, %d KB",
			wire.ErrConflict, pslot.name, got.cpus, got.memory, got.disk, cpus, mem, disk)
	}
	var freed resources
	for _, v := range victims {
		freed.cpus += v.cpus
		freed.memory += v.memory
		freed.disk += v.disk
	}
	held = resources{cpus: max(cpus-freed.cpus, 0), memory: max(mem-freed.memory, 0), disk: max(disk-freed.disk, 0)}
	return pslot, victims, held, nil
}
