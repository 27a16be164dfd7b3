package startd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/pond-htc/pond/condor/classad"
	"github.com/pond-htc/pond/condor/internal/plainfile"
)

// The files of the job's and its slot's ads the starter writes into the
// scratch directory, as HTCondor's starter does; they are never sent back
// as output.
const (
	JobAdFile     = ".job.ad"
	MachineAdFile = ".machine.ad"
)

// condorEnv adds to env the variables HTCondor's starter gives a job:
// _CONDOR_SLOT (its slot's name without the machine, slot1 or slot1_1),
// _CONDOR_JOB_AD and _CONDOR_MACHINE_AD (files of the job's ad and its
// slot's, machineAd, written into the scratch directory dir). fresh says
// dir was made empty for this start: nothing can be in the files' way,
// and one that is is an error rather than removed.
// _CONDOR_SCRATCH_DIR is jobCommand's.
func condorEnv(env []string, dir string, fresh bool, job, machineAd *classad.Ad, slotName string) ([]string, error) {
	jobAd, machineAdFile := filepath.Join(dir, JobAdFile), filepath.Join(dir, MachineAdFile)
	if err := writeNew(jobAd, job.String(), !fresh); err != nil {
		return nil, err
	}
	if err := writeNew(machineAdFile, machineAd.String(), !fresh); err != nil {
		return nil, err
	}
	slotName, _, _ = strings.Cut(slotName, "@")
	return append(env, "_CONDOR_SLOT="+slotName, "_CONDOR_JOB_AD="+jobAd, "_CONDOR_MACHINE_AD="+machineAdFile), nil
}

// writeNew writes text to a file at path that it creates, in one write,
// never following a link; with replace, it removes what was there first,
// else a file already there is an error. It is not synced: the file
// serves the job about to start, and a startd that dies takes its jobs
// with it.
func writeNew(path, text string, replace bool) error {
	if replace {
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("writing %s: %w", filepath.Base(path), err)
		}
	}
	f, err := plainfile.Open(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("writing %s: %w", filepath.Base(path), err)
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", filepath.Base(path), err)
	}
	return nil
}
