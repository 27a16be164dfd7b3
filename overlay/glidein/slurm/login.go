package slurm

import (
	"github.com/pond-htc/pond/overlay/glidein/batch"
	"github.com/pond-htc/pond/overlay/glidein/remote"
)

// system is Slurm as batch.Submit needs it: squeue finds a job by its
// name, sbatch --parsable prints its ID.
type system struct{ cfg *Config }

var _ batch.System = system{}

// FindCmd implements batch.System.
func (y system) FindCmd(tag string) remote.Cmd {
	return remote.Cmd{Path: y.cfg.Commands.Squeue, Args: []string{"--noheader", "--me", "--states=all", "--name=" + tag, "--format=%i"}}
}

// ParseSubmit implements batch.System.
func (system) ParseSubmit(out []byte) (string, error) { return parseJobID(out) }
