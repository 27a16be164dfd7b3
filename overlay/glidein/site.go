// Package glidein defines the places glideins are started on (sites: a
// batch system such as Slurm, a list of SSH hosts) and what a glidein is
// to pond: a `pondctl agent` started there for a while, which joins a pool
// with a short-lived credential and runs itself down.
//
// A site is driven only through Site. Every submission carries an ID that
// the caller records in its journal before Submit is called, and the site
// stores that ID with the glidein (a Slurm job name, a marker file on an SSH
// host), so that a caller that died between sending and recording finds
// the glidein again with List and adopts it instead of submitting twice.
package glidein

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"time"

	"github.com/pond-htc/pond/overlay/api"
)

// IDPrefix starts the ID of every glidein pond submits (the agent's wire
// format, api.GlideinIDPrefix); List filters on it, and what does not
// carry it is never touched.
const IDPrefix = api.GlideinIDPrefix

// Site is a place glideins run. Its methods may be called concurrently.
// A site that holds resources between calls (the SSH site's connections)
// also implements io.Closer, and its user closes it when done with it.
type Site interface {
	// Kind names the kind of site: "slurm", "ssh".
	Kind() string
	// Check verifies that the site can take glideins as configured (the
	// commands answer, the partition and account exist, the hosts are
	// reachable with the given keys and have the binary's architecture),
	// without starting anything. Its error says what is wrong and where.
	Check(ctx context.Context) error
	// Submit starts one glidein. It is not retried by the site: a failed
	// Submit may still have started the glidein, which List then shows.
	// Submitting an ID that the site already has is an error
	// (ErrDuplicate) and starts nothing.
	Submit(ctx context.Context, req Request) (Glidein, error)
	// List reports every glidein of the site whose ID starts with prefix,
	// whatever its state, as far as the site still remembers it.
	List(ctx context.Context, prefix string) ([]Glidein, error)
	// Cancel ends the glidein with this ID and removes what it left on
	// the site. Cancelling an ID the site does not know, or a glidein that
	// already ended, is not an error.
	Cancel(ctx context.Context, id string) error
}

// Errors of Submit.
var (
	// ErrDuplicate is returned by Submit for an ID the site already has.
	ErrDuplicate = errors.New("a glidein with this id exists")
	// ErrFull is returned (wrapped) by Submit when the site has no room
	// for another glidein now, such as SSH hosts that all run as many
	// glideins as they may: nothing was started, and the same ID may be
	// submitted again once a glidein ended.
	ErrFull = errors.New("no room for another glidein")
)

// SettingError is an error of a site about one setting of its
// configuration, named as the site's provider block spells it
// ("partition", "account"), so that the caller can point at that setting.
// Its text is Err's, which names the setting already.
type SettingError struct {
	Setting string
	Err     error
}

func (e *SettingError) Error() string { return e.Err.Error() }
func (e *SettingError) Unwrap() error { return e.Err }

// EndEnv is the environment variable a site sets in a glidein's
// environment to when the batch system ends it, in seconds since 1970
// (Slurm's end of the job); the agent takes it as its end time when
// given no -end-time and no POND_END_TIME knob.
const EndEnv = "POND_GLIDEIN_END"

// Forgetter is implemented by a site that keeps something of its own for
// each glidein beyond the glidein itself (the EC2 site's credential in
// SSM). The caller calls Forget before it forgets a glidein that has none
// running on the site: one that ended, one the site no longer lists, one
// whose submission never reached it. Forget of an ID the site knows
// nothing of is not an error.
type Forgetter interface {
	Forget(ctx context.Context, id string) error
}

// Describer is implemented by a site that another process can make
// again from a description: its Kind and its configuration as JSON (the
// site package's Config), which is what a pilot factory's entry names its
// site by (overlay/api.FactorySite), and which the kind's Open makes
// the site again from.
type Describer interface {
	Describe() (json.RawMessage, error)
}

// Local is implemented by a site that knows where its glideins run
// relative to the machine that starts them.
type Local interface {
	// OnThisMachine reports whether every glidein of the site runs on
	// this machine (SSH hosts on loopback; an EC2 endpoint on loopback,
	// an emulator whose instances run here): only then may a glidein be
	// told to reach its central manager at a loopback address.
	OnThisMachine() bool
}

// IsLoopbackHost reports whether host (an IP address, or a name) is a
// loopback one: 127.0.0.0/8, ::1 or "localhost".
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && ip.Unmap().IsLoopback()
}

// Request is one glidein to start.
type Request struct {
	// ID names the glidein for good: IDPrefix, then letters, digits and
	// '-' only, at most 64 characters. It is recorded before Submit.
	ID string
	// Binary is the local path of the pondctl binary, which the site
	// copies to the far side (or finds there, with the same checksum).
	Binary string
	// Args are the arguments of `pondctl` on the far side, such as
	// ["agent", "-pool", "campus", ...]. "{dir}" in an argument is
	// replaced by the glidein's directory on the far side, where Files are.
	Args []string
	// Env is added to the glidein's environment.
	Env map[string]string
	// Files are written into the glidein's directory (mode 0600, the
	// directory 0700) before the agent starts: its token, certificate,
	// configuration. They never appear on a command line.
	Files map[string][]byte
	// Lifetime is the most the glidein may live: the batch job's time
	// limit. Zero leaves it to the site's default.
	Lifetime time.Duration
	// CPUs and MemoryMB are what the glidein asks of the site (0: the
	// site's default).
	CPUs     int
	MemoryMB int
	// Offers, on a site that is an Offerer, names the offers to start
	// the glidein on, in order: the site tries each while it has no
	// capacity for those before it (EC2's insufficient capacity). Empty
	// means all of the site's own, in its order.
	Offers []string
	// Lineage and Address name the state and the resource address the
	// glidein belongs to. A site that labels what it starts (the EC2
	// site's tags) records them, and List reports the lineage; others
	// ignore them.
	Lineage, Address string
	// New reports that no Submit of ID can have happened before: the
	// caller recorded the ID just now, for the first time. A site may then
	// skip looking for an earlier launch of it (the EC2 site's
	// DescribeInstances by tag, which costs a scan of every instance on
	// an emulator); a retried Submit leaves it false.
	New bool
}

// State is where a glidein is in its life, as its site reports it.
type State string

// The states of a glidein.
const (
	// Queued: submitted, waiting for resources.
	Queued State = "queued"
	// Running: its agent process runs.
	Running State = "running"
	// Done: it ended by itself (idle, lifetime) with success.
	Done State = "done"
	// Failed: it ended with an error, was killed by its time limit, or
	// its node failed.
	Failed State = "failed"
	// Cancelled: Cancel or someone on the site (scancel, kill) ended it.
	Cancelled State = "cancelled"
	// Finishing: it no longer runs jobs and the site is ending it (Slurm's
	// COMPLETING), but does not say yet how it ended: done, failed or
	// cancelled comes next.
	Finishing State = "finishing"
)

// Ended reports whether s is an end: a final state, or Finishing, whose
// glidein no longer runs but whose final state is not known yet (see
// Final).
func (s State) Ended() bool { return s == Done || s == Failed || s == Cancelled || s == Finishing }

// Final reports whether s is a final state, which tells how the glidein
// ended.
func (s State) Final() bool { return s.Ended() && s != Finishing }

// Glidein is one glidein as its site reports it.
type Glidein struct {
	ID string
	// SiteID is the site's own name for it: the Slurm job id, HOST:PID.
	SiteID string
	// Host is the machine it runs (or ran) on, when known.
	Host   string
	State  State
	Reason string
	// Submitted, Started and Ended are zero when unknown.
	Submitted time.Time
	Started   time.Time
	Ended     time.Time
	// Lineage is the state lineage the site recorded with the glidein
	// (Request.Lineage); empty when it records none.
	Lineage string
}

// FileWriter is a Site that can replace files in a running glidein's
// directory, such as its token file, which the agent reads again: a
// factory refreshes credentials with it without restarting the glidein.
type FileWriter interface {
	// WriteFiles writes each file (a base name, no directory) into the
	// glidein's directory with mode 0600, each through a rename so that
	// a reader sees the old content or the new. A glidein the site does
	// not know, or that ended, is an error.
	WriteFiles(ctx context.Context, id string, files map[string][]byte) error
}
