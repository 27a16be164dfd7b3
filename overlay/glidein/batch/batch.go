// Package batch holds what the glidein sites of batch systems share,
// whatever the system (Slurm; Grid Engine, PBS and LSF alike): the work
// directory where each glidein gets its own, on this machine or on a
// login node (FS), and exactly-once submission of a job tagged with the
// glidein's ID (Submit), which a lost connection does not break, what a
// request may hold (CheckRequest), its batch script (Script), and the
// removal of a cancelled glidein's directory (RemoveDir). The commands
// themselves run through a remote.Runner: on this machine, or on the
// login node over SSH.
//
// A site of another batch system is one more package beside
// overlay/glidein/slurm: its System (how to find a job by its tag, how
// to read what its submit command prints), its options and the extra
// lines of its batch script, and its List and Cancel over its own status
// commands; the transport, the staging of files and binary, the script,
// and the exactly-once guarantee are these.
package batch
