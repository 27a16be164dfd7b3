// Package kinds is the table of the kinds of sites pondctl is built
// with. A new kind of site is one package (see overlay/glidein.Kind and
// docs/contributing.md) and one entry here: the provider of its name, its
// block's schema, and the pilot factory's entries of its kind all follow
// from it.
package kinds

import (
	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/ec2"
	"github.com/pond-htc/pond/overlay/glidein/gridengine"
	"github.com/pond-htc/pond/overlay/glidein/slurm"
	"github.com/pond-htc/pond/overlay/glidein/ssh"
)

// Registry returns the kinds of sites pondctl is built with.
func Registry() *glidein.Registry {
	return glidein.NewRegistry(
		slurm.Kind(),
		gridengine.Kind(),
		ssh.Kind(),
		ec2.Kind(),
	)
}
