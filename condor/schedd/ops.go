package schedd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/condor/joblog"
	"github.com/pond-htc/pond/condor/jobqueue"
	"github.com/pond-htc/pond/condor/submit"
	"github.com/pond-htc/pond/condor/wire"
)

// Submit stores a cluster in one transaction, writes its submit events and
// asks the negotiator for a cycle. When Submit answers, the jobs are durable.
func (s *Schedd) Submit(ctx context.Context, req *wire.SubmitRequest) (*wire.SubmitResponse, error) {
	var f *submit.File
	if req.File != "" {
		var err error
		if f, err = submit.Parse(firstNonEmpty(req.FileName, "submit"), []byte(req.File)); err != nil {
			return nil, fmt.Errorf("%w: %w", wire.ErrBadRequest, err)
		}
	} else if len(req.Jobs) == 0 {
		return nil, fmt.Errorf("%w: submit of no jobs", wire.ErrBadRequest)
	}
	var built []jobqueue.Ad
	cluster, err := s.q.SubmitFunc(ctx, func(cluster int) ([]jobqueue.Ad, error) {
		built = built[:0]
		if f == nil {
			for i, j := range req.Jobs {
				if _, ok := j["Owner"]; !ok {
					return nil, fmt.Errorf("%w: job %d has no Owner", wire.ErrBadRequest, i)
				}
				a := make(jobqueue.Ad, len(j)+2)
				for k, v := range j {
					a[k] = v
				}
				a["GlobalJobId"] = strconv.Quote(fmt.Sprintf("%s#%d.%d#%d", s.opts.Name, cluster, i, s.now().Unix()))
				built = append(built, a)
			}
			return built, nil
		}
		fs, _ := s.opts.Config.Get("FILESYSTEM_DOMAIN")
		jobs, err := f.Jobs(ctx, submit.Options{ClusterID: cluster, Owner: req.Owner, UIDDomain: s.uid,
			SubmitDir: req.SubmitDir, Env: req.Env, Macros: req.Macros, ScheddName: s.opts.Name,
			FileSystemDomain: firstNonEmpty(fs, s.opts.Name),
			LookupEnv: func(name string) (string, bool) {
				for _, e := range req.Env {
					if k, v, ok := strings.Cut(e, "="); ok && k == name {
						return v, true
					}
				}
				return "", false
			}})
		if err != nil {
			return nil, fmt.Errorf("%w: %w", wire.ErrBadRequest, err)
		}
		built = append(built, jobs...)
		return built, nil
	})
	if err != nil {
		return nil, fmt.Errorf("submitting: %w", err)
	}
	jobs, err := s.q.Query(ctx, jobqueue.ClusterJobs(cluster), nil)
	if err != nil {
		return nil, fmt.Errorf("reading submitted cluster %d: %w", cluster, err)
	}
	for _, j := range jobs {
		ij, err := newIdleJob(j)
		if err != nil {
			continue
		}
		s.writeEvent(ctx, j.ID, ij.ad, joblog.Event{Type: joblog.Submit, Host: "<" + s.opts.Address + ">"})
		if j.Status == jobqueue.Idle {
			s.mu.Lock()
			s.idle.put(j.ID, ij)
			s.mu.Unlock()
		}
	}
	s.markDirty()
	s.reschedule()
	return &wire.SubmitResponse{Cluster: cluster, Jobs: len(jobs)}, nil
}

func selectors(args []string, constraint string) ([]jobqueue.Selector, error) {
	match, err := wire.Constraint(constraint)
	if err != nil {
		return nil, err
	}
	cons := func(j jobqueue.Job) bool {
		ad, err := wire.ToClassAd(j.Ad)
		return err == nil && match(ad)
	}
	if strings.TrimSpace(constraint) == "" {
		cons = nil
	}
	if len(args) == 0 {
		return []jobqueue.Selector{{All: true, Constraint: cons}}, nil
	}
	var sels []jobqueue.Selector
	for _, a := range args {
		sel, err := jobqueue.ParseSelector(a)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", wire.ErrBadRequest, err)
		}
		sel.Constraint = cons
		sels = append(sels, sel)
	}
	return sels, nil
}

// QueryJobs answers condor_q.
func (s *Schedd) QueryJobs(ctx context.Context, req *wire.QueryJobsRequest) (*wire.QueryJobsResponse, error) {
	sels, err := selectors(req.Args, req.Constraint)
	if err != nil {
		return nil, err
	}
	out := &wire.QueryJobsResponse{Jobs: []wire.Job{}}
	seen := map[jobqueue.JobID]bool{}
	for _, sel := range sels {
		jobs, err := s.q.Query(ctx, sel, nil)
		if err != nil {
			return nil, fmt.Errorf("querying jobs: %w", err)
		}
		for _, j := range jobs {
			if !seen[j.ID] {
				seen[j.ID] = true
				out.Jobs = append(out.Jobs, wire.Job{ID: j.ID.String(), Ad: wire.Project(j.Ad, req.Projection)})
			}
		}
	}
	return out, nil
}

// History answers condor_history, most recent first.
func (s *Schedd) History(ctx context.Context, req *wire.QueryJobsRequest) (*wire.QueryJobsResponse, error) {
	sels, err := selectors(req.Args, req.Constraint)
	if err != nil {
		return nil, err
	}
	out := &wire.QueryJobsResponse{Jobs: []wire.Job{}}
	for _, sel := range sels {
		jobs, err := s.q.History(ctx, jobqueue.HistoryQuery{Sel: sel, Limit: req.Limit})
		if err != nil {
			return nil, fmt.Errorf("reading history: %w", err)
		}
		for _, j := range jobs {
			out.Jobs = append(out.Jobs, wire.Job{ID: j.ID.String(), Ad: wire.Project(j.Ad, req.Projection)})
		}
	}
	return out, nil
}

// Act runs condor_rm, condor_hold or condor_release.
func (s *Schedd) Act(ctx context.Context, req *wire.ActRequest) (*wire.ActResponse, error) {
	if len(req.Args) == 0 && strings.TrimSpace(req.Constraint) == "" && !req.All {
		return nil, fmt.Errorf("%w: no jobs selected (give job ids, owners, a constraint or all)", wire.ErrBadRequest)
	}
	sels, err := selectors(req.Args, req.Constraint)
	if err != nil {
		return nil, err
	}
	out := &wire.ActResponse{Changed: []string{}}
	for _, sel := range sels {
		var changed []jobqueue.Changed
		switch req.Action {
		case wire.ActRemove:
			changed, err = s.q.Remove(ctx, sel, firstNonEmpty(req.Reason, "via condor_rm"))
		case wire.ActHold:
			changed, err = s.q.Hold(ctx, sel, firstNonEmpty(req.Reason, "via condor_hold"), 1, 0)
		case wire.ActRelease:
			changed, err = s.q.Release(ctx, sel, firstNonEmpty(req.Reason, "via condor_release"))
		default:
			return nil, fmt.Errorf("%w: unknown action %q", wire.ErrBadRequest, req.Action)
		}
		if errors.Is(err, jobqueue.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", req.Action, err)
		}
		for _, c := range changed {
			out.Changed = append(out.Changed, c.ID.String())
			s.afterAct(ctx, req, c)
		}
	}
	s.markDirty()
	return out, nil
}

func (s *Schedd) afterAct(ctx context.Context, req *wire.ActRequest, c jobqueue.Changed) {
	s.mu.Lock()
	s.idle.delete(c.ID)
	cl := s.active[c.ID]
	s.mu.Unlock()
	switch req.Action {
	case wire.ActRemove:
		s.writeEvent(ctx, c.ID, nil, joblog.Event{Type: joblog.Aborted, Message: firstNonEmpty(req.Reason, "via condor_rm")})
	case wire.ActHold:
		s.writeEvent(ctx, c.ID, nil, joblog.Event{Type: joblog.Held, Message: firstNonEmpty(req.Reason, "via condor_hold"), HoldCode: 1})
	case wire.ActRelease:
		s.writeEvent(ctx, c.ID, nil, joblog.Event{Type: joblog.Released, Message: firstNonEmpty(req.Reason, "via condor_release")})
		s.addIdle(ctx, c.ID)
		return
	}
	if cl != nil && c.From == jobqueue.Running && cl.startd != "" {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			vctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := wire.NewStartd(cl.startd, s.opts.Token).Vacate(vctx, &wire.VacateRequest{ClaimID: cl.id, JobID: c.ID.String()})
			if err != nil {
				s.log.Warn("vacating job", "job", c.ID, "err", err)
				s.finishClaim(cl)
			}
		}()
	}
}

// Idle answers the negotiator: idle jobs not being started.
func (s *Schedd) Idle(ctx context.Context, req *wire.IdleRequest) (*wire.IdleResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &wire.IdleResponse{Jobs: []wire.Job{}}
	s.idle.each(func(id jobqueue.JobID, ij *idleJob) bool {
		if req.Owner == "" || ij.owner == req.Owner {
			out.Jobs = append(out.Jobs, wire.Job{ID: id.String(), Ad: ij.w})
		}
		return true
	})
	return out, nil
}

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
	resp, err := wire.NewStartd(m.Startd, s.opts.Token).Claim(ctx,
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
	files, err := inputFiles(ij.ad)
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
	err = wire.NewStartd(c.startd, s.opts.Token).Activate(ctx,
		&wire.ActivateRequest{ClaimID: c.id, JobID: id.String(), Job: ij.w, Files: files})
	if err != nil {
		s.log.Warn("activating claim", "slot", c.slotName, "job", id, "err", err)
		if terr := s.q.Transition(ctx, id, jobqueue.Idle, nil); terr == nil {
			s.writeEvent(ctx, id, ij.ad, joblog.Event{Type: joblog.ShadowException, Message: "Can no longer talk to condor_starter"})
		}
		s.finishClaim(c)
		s.release(c)
		s.addIdle(ctx, id)
	}
}

// inputFiles reads the files a job transfers in: its executable (unless
// transfer_executable is false), its stdin and transfer_input_files.
func inputFiles(job *classad.Ad) (map[string][]byte, error) {
	iwd, _ := job.EvalAttr("Iwd").StringValue()
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(iwd, p)
	}
	files := map[string][]byte{}
	if te, ok := job.EvalAttr("TransferExecutable").BoolValue(); !ok || te {
		cmd, _ := job.EvalAttr("Cmd").StringValue()
		b, err := os.ReadFile(abs(cmd))
		if err != nil {
			return nil, fmt.Errorf("reading executable: %w", err)
		}
		files["condor_exec.exe"] = b
	}
	if in, _ := job.EvalAttr("In").StringValue(); in != "" && in != "/dev/null" {
		b, err := os.ReadFile(abs(in))
		if err != nil {
			return nil, fmt.Errorf("reading input: %w", err)
		}
		files[filepath.Base(in)] = b
	}
	if list, ok := job.EvalAttr("TransferInput").StringValue(); ok {
		for _, f := range config.SplitList(list) {
			b, err := os.ReadFile(abs(f))
			if err != nil {
				return nil, fmt.Errorf("transfer input file %s: %w", f, err)
			}
			files[filepath.Base(f)] = b
		}
	}
	return files, nil
}

func (s *Schedd) hold(ctx context.Context, id jobqueue.JobID, ad *classad.Ad, reason string, code, sub int) {
	if _, err := s.q.Hold(ctx, jobqueue.OneJob(id), reason, code, sub); err != nil {
		s.log.Warn("holding job", "job", id, "err", err)
		return
	}
	s.writeEvent(ctx, id, ad, joblog.Event{Type: joblog.Held, Message: reason, HoldCode: code, HoldSubCode: sub})
	s.markDirty()
}

// JobReport takes a starter's report on a job.
func (s *Schedd) JobReport(ctx context.Context, r *wire.JobReport) (struct{}, error) {
	id, err := parseJobID(r.JobID)
	if err != nil {
		return struct{}{}, err
	}
	s.mu.Lock()
	c := s.claims[r.ClaimID]
	if c != nil && c.job != id {
		c = nil
	}
	if c != nil && r.Kind == wire.ReportUpdate && !c.deadline.IsZero() {
		c.deadline = s.now().Add(s.lease)
	}
	s.mu.Unlock()
	if c == nil {
		return struct{}{}, fmt.Errorf("%w: no claim %s for job %s", wire.ErrNotFound, r.SlotName, r.JobID)
	}
	if r.Kind == wire.ReportUpdate {
		return struct{}{}, nil
	}
	s.mu.Lock()
	ad := c.ad
	s.mu.Unlock()
	freeClaim := func() (struct{}, error) {
		// Removed or held while running: the claim is free again.
		s.mu.Lock()
		if s.active[id] == c {
			delete(s.active, id)
		}
		s.mu.Unlock()
		s.reuseAsync(c)
		return struct{}{}, nil
	}
	if ad == nil {
		job, err := s.q.Get(ctx, id)
		if err != nil || job.Status != jobqueue.Running {
			return freeClaim()
		}
		if ad, err = wire.ToClassAd(job.Ad); err != nil {
			return struct{}{}, fmt.Errorf("job %s: %w", id, err)
		}
	}
	if c.slot == nil {
		// A claim recovered after a restart: learn the slot from the job.
		c.slotName = firstNonEmpty(c.slotName, r.SlotName)
	}
	usage := joblog.Usage{User: secs(r.UserCPU), Sys: secs(r.SysCPU)}
	attrs := jobqueue.Ad{
		"RemoteWallClockTime": strconv.FormatFloat(r.WallClock, 'f', 3, 64),
		"RemoteUserCpu":       strconv.FormatFloat(r.UserCPU, 'f', 3, 64),
		"RemoteSysCpu":        strconv.FormatFloat(r.SysCPU, 'f', 3, 64),
		"ImageSize":           strconv.FormatInt(max(r.ImageSizeKB, 1), 10),
		"ResidentSetSize":     strconv.FormatInt(r.ResidentKB, 10),
		"MemoryUsage":         strconv.FormatInt((r.ResidentKB+1023)/1024, 10),
	}
	switch r.Kind {
	case wire.ReportExited:
		if err := writeOutputs(ad, r); err != nil {
			s.hold(ctx, id, ad, "Error from shadow: "+err.Error(), 12, 2)
			break
		}
		s.writeEvent(ctx, id, ad, joblog.Event{Type: joblog.ImageSize, ImageSizeKB: max(r.ImageSizeKB, 1),
			MemoryUsageMB: (r.ResidentKB + 1023) / 1024, ResidentSetSizeKB: r.ResidentKB})
		attrs["ExitBySignal"] = strconv.FormatBool(r.Signal != 0)
		if r.Signal != 0 {
			attrs["ExitSignal"] = strconv.Itoa(r.Signal)
		} else {
			attrs["ExitCode"] = strconv.Itoa(r.ExitCode)
		}
		attrs["ExitStatus"] = strconv.Itoa(r.ExitCode)
		var sent int64
		for _, b := range r.Files {
			sent += int64(len(b))
		}
		ev := joblog.Event{Type: joblog.Terminated, TerminatedNormally: r.Signal == 0, ReturnValue: r.ExitCode,
			Signal: r.Signal, RunRemote: usage, TotalRemote: usage, SentBytes: sent, TotalSentBytes: sent}
		if holdExpr(ad, "OnExitHold", attrs) {
			s.hold(ctx, id, ad, "The job attribute OnExitHold expression evaluated to TRUE", 3, 0)
			break
		}
		if err := s.q.Transition(ctx, id, jobqueue.Completed, attrs); gone(err) {
			return freeClaim()
		} else if err != nil {
			return struct{}{}, fmt.Errorf("completing job %s: %w", id, err)
		}
		s.writeEvent(ctx, id, ad, ev)
	case wire.ReportHold:
		if err := s.q.SetAttrs(ctx, id, attrs); gone(err) {
			return freeClaim()
		} else if err != nil {
			s.log.Warn("recording usage", "job", id, "err", err)
		}
		s.hold(ctx, id, ad, r.HoldReason, r.HoldCode, r.HoldSubCode)
	case wire.ReportEvicted:
		// A job held or removed while it ran was evicted because of that:
		// it stays as it is rather than going back to the idle queue.
		if j, err := s.q.Get(ctx, id); err == nil && j.Status != jobqueue.Running {
			if err := s.q.SetAttrs(ctx, id, attrs); err != nil && !gone(err) {
				s.log.Warn("recording usage", "job", id, "err", err)
			}
			s.mu.Lock()
			delete(s.active, id)
			s.mu.Unlock()
			return freeClaim()
		}
		if err := s.q.Transition(ctx, id, jobqueue.Idle, attrs); gone(err) {
			return freeClaim()
		} else if err != nil {
			return struct{}{}, fmt.Errorf("requeueing job %s: %w", id, err)
		}
		s.writeEvent(ctx, id, ad, joblog.Event{Type: joblog.Evicted, RunRemote: usage, TotalRemote: usage})
		s.mu.Lock()
		delete(s.active, id)
		s.mu.Unlock()
		s.addIdle(ctx, id)
		s.releaseAsync(c)
		return struct{}{}, nil
	default:
		return struct{}{}, fmt.Errorf("%w: unknown report kind %q", wire.ErrBadRequest, r.Kind)
	}
	s.mu.Lock()
	delete(s.active, id)
	s.mu.Unlock()
	s.markDirty()
	s.reuseAsync(c)
	return struct{}{}, nil
}

// gone reports whether a queue error says the job is no longer running
// (removed or held meanwhile).
func gone(err error) bool {
	var te *jobqueue.TransitionError
	return errors.Is(err, jobqueue.ErrNotFound) || errors.As(err, &te)
}

func secs(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

func holdExpr(ad *classad.Ad, name string, attrs jobqueue.Ad) bool {
	e, ok := ad.Lookup(name)
	if !ok {
		return false
	}
	tmp := ad.Copy()
	for k, v := range attrs {
		_ = tmp.SetExpr(k, v)
	}
	return classad.EvalWith(e, tmp, nil).IsTrue()
}

// writeOutputs stores the job's stdout, stderr and output files in its Iwd.
func writeOutputs(ad *classad.Ad, r *wire.JobReport) error {
	iwd, _ := ad.EvalAttr("Iwd").StringValue()
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(iwd, p)
	}
	write := func(attr string, data []byte) error {
		p, _ := ad.EvalAttr(attr).StringValue()
		if p == "" || p == "/dev/null" {
			return nil
		}
		if err := os.WriteFile(abs(p), data, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", attr, err)
		}
		return nil
	}
	if err := errors.Join(write("Out", r.Stdout), write("Err", r.Stderr)); err != nil {
		return err
	}
	remaps := map[string]string{}
	if m, ok := ad.EvalAttr("TransferOutputRemaps").StringValue(); ok {
		for _, pair := range strings.Split(m, ";") {
			if k, v, ok := strings.Cut(pair, "="); ok {
				remaps[strings.TrimSpace(k)] = strings.TrimSpace(v)
			}
		}
	}
	for name, data := range r.Files {
		dst := firstNonEmpty(remaps[name], name)
		if err := os.WriteFile(abs(dst), data, 0o644); err != nil {
			return fmt.Errorf("writing output file %s: %w", name, err)
		}
	}
	return nil
}

func (s *Schedd) reuseAsync(c *claim) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.reuse(c)
	}()
}

func (s *Schedd) releaseAsync(c *claim) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.finishClaim(c)
		s.release(c)
	}()
}

// reuse runs the next idle job that fits the claimed slot, or releases the
// claim.
func (s *Schedd) reuse(c *claim) {
	s.mu.Lock()
	if s.active[c.job] == c {
		delete(s.active, c.job)
	}
	c.busy, c.deadline = false, time.Time{}
	var next jobqueue.JobID
	var ij *idleJob
	if c.slot != nil && !s.stopped {
		s.idle.each(func(id jobqueue.JobID, j *idleJob) bool {
			if fits(j.ad, c.slot) {
				next, ij = id, j
				return false
			}
			return true
		})
	}
	if ij == nil {
		delete(s.claims, c.id)
		s.mu.Unlock()
		s.release(c)
		return
	}
	s.idle.delete(next)
	c.job, c.busy = next, true
	s.active[next] = c
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s.run(ctx, c, next, ij)
}

func (s *Schedd) release(c *claim) {
	if c.id == "" || c.startd == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := wire.NewStartd(c.startd, s.opts.Token).Release(ctx, &wire.ReleaseRequest{ClaimID: c.id}); err != nil {
		s.log.Debug("releasing claim", "slot", c.slotName, "err", err)
	}
}

// writeEvent appends an event to the job's UserLog, if it has one.
func (s *Schedd) writeEvent(ctx context.Context, id jobqueue.JobID, ad *classad.Ad, ev joblog.Event) {
	if ad == nil {
		j, err := s.q.Get(ctx, id)
		if err != nil {
			hist, herr := s.q.History(ctx, jobqueue.HistoryQuery{Sel: jobqueue.OneJob(id), Limit: 1})
			if herr != nil || len(hist) == 0 {
				return
			}
			j = hist[0]
		}
		if ad, err = wire.ToClassAd(j.Ad); err != nil {
			return
		}
	}
	path, ok := ad.EvalAttr("UserLog").StringValue()
	if !ok || path == "" {
		return
	}
	if !filepath.IsAbs(path) {
		iwd, _ := ad.EvalAttr("Iwd").StringValue()
		path = filepath.Join(iwd, path)
	}
	ev.Cluster, ev.Proc = id.Cluster, id.Proc
	if ev.Time.IsZero() {
		ev.Time = s.now()
	}
	s.logMu.Lock()
	w := s.logs[path]
	if w == nil {
		w = joblog.NewWriter(path, joblog.WriterOptions{})
		s.logs[path] = w
	}
	s.logMu.Unlock()
	if err := w.Write(ev); err != nil {
		s.log.Warn("writing job event log", "path", path, "err", err)
	}
}
