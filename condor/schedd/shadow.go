package schedd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/internal/asuser"
	"github.com/pond-htc/pond/condor/internal/confine"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/wire"
)

// Matches takes the negotiator's matches and starts a shadow for each.
func (s *Schedd) Matches(ctx context.Context, req *wire.MatchesRequest) (struct{}, error) {
	for _, m := range req.Matches {
		id, err := parseJobID(m.JobID)
		if err != nil {
			return struct{}{}, err
		}
		s.mu.Lock()
		ij := s.idle.get(id)
		stopped := s.stopped
		if ij != nil && !stopped {
			s.idle.delete(id)
			s.active[id] = &claim{startd: m.Startd, slotName: m.SlotName, job: id, busy: true}
		}
		s.mu.Unlock()
		if ij == nil || stopped {
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.shadow(id, ij, m)
		}()
	}
	return struct{}{}, nil
}

// shadow claims the matched slot and runs the job on it.
func (s *Schedd) shadow(id jobqueue.JobID, ij *idleJob, m wire.Match) {
	s.sem <- struct{}{}
	defer func() { <-s.sem }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := s.peer(m.Startd).Startd().Claim(ctx,
		&wire.ClaimRequest{ClaimID: m.ClaimID, Job: ij.w, Schedd: s.opts.Address, ScheddName: s.opts.Name})
	if err != nil {
		s.log.Debug("claiming slot", "slot", m.SlotName, "job", id, "err", err)
		s.mu.Lock()
		delete(s.active, id)
		s.idle.put(id, ij)
		s.mu.Unlock()
		s.reschedule()
		return
	}
	slot, err := wire.ToClassAd(resp.Slot)
	if err != nil {
		slot = classad.NewAd()
	}
	c := &claim{id: resp.ClaimID, startd: m.Startd, slotName: firstNonEmpty(strings.Trim(resp.Slot["Name"], `"`), m.SlotName), slot: slot, job: id, busy: true}
	s.mu.Lock()
	s.claims[c.id] = c
	s.active[id] = c
	s.mu.Unlock()
	s.run(ctx, c, id, ij)
}

// run activates claim c with job id.
func (s *Schedd) run(ctx context.Context, c *claim, id jobqueue.JobID, ij *idleJob) {
	acct, err := s.jobAccount(ij.ad)
	var files map[string][]byte
	if err == nil {
		files, err = inputFiles(ij.ad, acct)
	}
	if err != nil {
		s.hold(ctx, id, ij.ad, "Error from shadow: "+err.Error(), 13, 2)
		s.reuse(c)
		return
	}
	attrs := jobqueue.Ad{"RemoteHost": strconv.Quote(c.slotName), "PondClaimId": strconv.Quote(c.id),
		"PondStartd": strconv.Quote(c.startd), "LastRemoteHost": strconv.Quote(c.slotName)}
	if err := s.q.Transition(ctx, id, jobqueue.Running, attrs); err != nil {
		// Removed or held in the meantime.
		s.log.Debug("starting job", "job", id, "err", err)
		s.reuse(c)
		return
	}
	s.mu.Lock()
	c.ad = ij.ad
	s.mu.Unlock()
	s.writeEvent(ctx, id, ij.ad, joblog.Event{Type: joblog.Execute, Host: "<" + c.startd + ">", SlotName: c.slotName})
	s.markDirty()
	err = s.peer(c.startd).Startd().Activate(ctx,
		&wire.ActivateRequest{ClaimID: c.id, JobID: id.String(), Job: ij.w, Files: files})
	if err != nil {
		s.activationFailed(ctx, c, id, ij, err)
		return
	}
	// The claim's lease runs from here: the startd started its own when
	// it took the job, earlier.
	s.mu.Lock()
	if s.claims[c.id] == c {
		c.contact = s.now()
	}
	s.mu.Unlock()
}

// activationFailed requeues a job whose claim could not be activated. A
// startd that refused the job (it drains, retires before its end time, is
// quarantined, or no longer knows the claim) says nothing of the job: the
// job goes back to the queue as it was. Any other failure is a shadow
// exception, counted in the job's NumShadowExceptions; a job whose shadow
// failed more than MAX_SHADOW_EXCEPTIONS times is held.
func (s *Schedd) activationFailed(ctx context.Context, c *claim, id jobqueue.JobID, ij *idleJob, err error) {
	s.finishClaim(c)
	defer s.release(c)
	var we *wire.Error
	if errors.As(err, &we) && (we.Status == http.StatusConflict || we.Status == http.StatusNotFound) {
		s.log.Info("the startd refused the job", "slot", c.slotName, "job", id, "err", err)
		if terr := s.q.Transition(ctx, id, jobqueue.Idle, nil); terr == nil {
			s.writeEvent(ctx, id, ij.ad, joblog.Event{Type: joblog.ShadowException,
				Message: "Request to run on " + c.slotName + " <" + c.startd + "> was REFUSED: " + we.Msg})
			s.addIdle(ctx, id)
		}
		return
	}
	s.log.Warn("activating claim", "slot", c.slotName, "job", id, "err", err)
	j, gerr := s.q.Get(ctx, id)
	if gerr != nil || j.Status != jobqueue.Running {
		return // removed or held meanwhile
	}
	n, _ := strconv.Atoi(j.Ad["NumShadowExceptions"])
	n++
	if terr := s.q.Transition(ctx, id, jobqueue.Idle, jobqueue.Ad{"NumShadowExceptions": strconv.Itoa(n)}); terr != nil {
		return
	}
	s.writeEvent(ctx, id, ij.ad, joblog.Event{Type: joblog.ShadowException, Message: "Can no longer talk to condor_starter"})
	if n > s.maxExceptions {
		reason := fmt.Sprintf("The job's shadow failed %d times, more than MAX_SHADOW_EXCEPTIONS (%d); the last: %v", n, s.maxExceptions, err)
		if _, herr := s.q.Hold(ctx, jobqueue.OneJob(id), reason, holdCodeShadowExceptions, 0); herr == nil {
			s.writeEvent(ctx, id, ij.ad, joblog.Event{Type: joblog.Held, Message: reason, HoldCode: holdCodeShadowExceptions})
			s.markDirty()
			return
		}
	}
	s.addIdle(ctx, id)
}

// holdCodeShadowExceptions is the HoldReasonCode of a job held for too
// many shadow exceptions or lost nodes: HTCondor's JobPolicy, the code of
// a hold by the job's or the pool's policy.
const holdCodeShadowExceptions = 3

// inputFiles reads the files a job transfers in: its executable (unless
// transfer_executable is false), its stdin and transfer_input_files. It
// reads them with the rights of acct (the job's owner, see jobAccount), or
// the schedd's own when acct is nil; with an acct it opens the job's Iwd
// first, so that a job whose owner cannot read its Iwd (or that has none)
// is refused before it runs. A
// relative name stays inside the Iwd: a name with "..", or a symbolic link
// on the way that leads out of it, is refused. An absolute name is read as
// it is. Directories and special files are refused either way.
func inputFiles(job *classad.Ad, acct *asuser.Account) (map[string][]byte, error) {
	files := map[string][]byte{}
	err := asuser.Do(acct, func() error {
		iwd, _ := job.EvalAttr("Iwd").StringValue()
		var root *os.Root
		defer func() {
			if root != nil {
				root.Close()
			}
		}()
		openIwd := func() error {
			if root != nil {
				return nil
			}
			if iwd == "" && acct != nil {
				return errors.New("the job has no Iwd (initial directory) to find its files in")
			}
			var err error
			if root, err = os.OpenRoot(firstNonEmpty(iwd, ".")); err != nil {
				return fmt.Errorf("opening the job's initial directory%s: %w", as(acct), err)
			}
			return nil
		}
		if acct != nil {
			// Whatever the job's files, its owner must be able to open
			// its initial directory.
			if err := openIwd(); err != nil {
				return err
			}
		}
		read := func(p string) ([]byte, error) {
			if filepath.IsAbs(p) {
				return confine.ReadPath(p)
			}
			rel, err := confine.Local(iwd, p)
			if err != nil {
				return nil, err
			}
			if err := openIwd(); err != nil {
				return nil, err
			}
			return confine.ReadFile(root, rel)
		}
		if te, ok := job.EvalAttr("TransferExecutable").BoolValue(); !ok || te {
			cmd, _ := job.EvalAttr("Cmd").StringValue()
			b, err := read(cmd)
			if err != nil {
				return fmt.Errorf("reading executable%s: %w", as(acct), err)
			}
			files["condor_exec.exe"] = b
		}
		if in, _ := job.EvalAttr("In").StringValue(); in != "" && in != "/dev/null" {
			b, err := read(in)
			if err != nil {
				return fmt.Errorf("reading input%s: %w", as(acct), err)
			}
			files[filepath.Base(in)] = b
		}
		if list, ok := job.EvalAttr("TransferInput").StringValue(); ok {
			for _, f := range config.SplitFileList(list) {
				b, err := read(f)
				if err != nil {
					return fmt.Errorf("transfer input file %s%s: %w", f, as(acct), err)
				}
				files[filepath.Base(f)] = b
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return files, nil
}

// as is " as USER" for messages about what was done with acct's rights.
func as(acct *asuser.Account) string {
	if acct == nil {
		return ""
	}
	return " as " + acct.Name
}

// jobAccount returns the local account whose rights the schedd reads and
// writes a job's files with (its input files, Iwd, output, error and event
// log): the job's Owner's when the schedd runs as root. A schedd that does
// not run as root can act only as itself, and jobAccount returns nil. An
// Owner with no local account is refused with an error that names it.
func (s *Schedd) jobAccount(ad *classad.Ad) (*asuser.Account, error) {
	if !s.asRoot {
		return nil, nil
	}
	owner, _ := ad.EvalAttr("Owner").StringValue()
	acct, err := s.opts.Account(owner)
	switch {
	case errors.Is(err, asuser.ErrNoAccount):
		return nil, fmt.Errorf("the job's owner %q has no account on this machine, and the schedd runs as root: it reads and writes a job's files only with its owner's rights", owner)
	case err != nil:
		return nil, err
	case acct != nil && acct.UID == 0:
		return nil, nil // root's rights are the schedd's
	}
	return acct, nil
}
