# Two pools in one sea: "busy" has one slot, "spare" four. The flock lets
# busy's schedd send the jobs its own slot cannot take soon to spare: each
# pool's central manager announces its spare capacity over the sea, busy
# keeps the pools willing to take its jobs, nearest first, and its schedd
# advertises its idle jobs to their collectors once they have waited
# FLOCK_IDLE_TIME seconds. A flocked job runs in spare (its RemoteHost is
# slotN@spare-M) and once only; destroying the flock stops the flocking,
# and what runs in spare finishes there. The willing list busy observes:
# `pondctl state show flock.overflow` after a refresh, or
# `pondctl sea flock -sea "$(pondctl output -raw busy)"`.

pond {
  backend "local" {
    path = "pond.state"
  }
}

provider "local" {}

pool "busy" {
  provider = provider.local
  nodes    = 1
  slots    = 1
  config   = { NEGOTIATOR_INTERVAL = "5", FLOCK_IDLE_TIME = "5" }
}

pool "spare" {
  provider = provider.local
  nodes    = 2
  slots    = 2
  config   = { NEGOTIATOR_INTERVAL = "5" }
}

flock "overflow" {
  from = [pool.busy.central_manager]
  to   = [pool.spare.central_manager]

  # Any job may flock; at most eight of busy's at once in spare.
  max_jobs = 8
}

output "busy" {
  description = "The -pool address of the busy pool's central manager."
  value       = pool.busy.central_manager
}

output "spare" {
  description = "The -pool address of the spare pool's central manager."
  value       = pool.spare.central_manager
}
