# A local pool whose central manager grows it onto a Slurm cluster by
# itself: instead of a fixed number of glideins, the glidein resource has
# a factory block, and the pool's central-manager agent runs a pilot
# factory that submits glideins while jobs wait for them (jobs that only a
# glidein of this entry can run: here, Site == "hpc"), within the block's
# limits, with no pondctl running. Idle glideins leave by themselves;
# destroy removes the factory's entry and cancels the glideins it has.
# README.md has the commands, and a one-host Slurm to try it with
# (scripts/slurm-one-host.sh).
#
#   pondctl apply -var partition=short -var work_dir=/scratch/$USER/pond
#   pondctl condor submit -pool "$(pondctl output -raw central_manager)" job.sub
#   pondctl refresh && pondctl show     # the entry's funnel
#
# The local provider gives the central manager the factory's credentials
# (a delegated signing key and CA, limited to the pool's glideins) because
# a glidein with a factory block joins the pool: no `pondctl cert factory`.
# Run pondctl where sbatch, squeue, sacct and scancel reach the cluster:
# the central manager's agent runs them too, with pondctl's environment.

pond {
  backend "local" {
    path = "pond.state"
  }
}

variable "partition" {
  type        = string
  default     = "debug"
  description = "The Slurm partition the glideins queue in (sinfo lists them)."
}

variable "work_dir" {
  type        = string
  default     = "/tmp/pond-slurm"
  description = "An absolute directory this machine and the cluster's nodes share: each glidein's credentials go there, mode 0700."
}

variable "idle_timeout" {
  type        = string
  default     = "2m"
  description = "How long a glidein stays without a job before it leaves."
}

variable "max_jobs" {
  type        = number
  default     = 0
  description = "Most jobs a glidein runs before it leaves (1: a glidein per job; 0: no limit)."
}

variable "max_running" {
  type        = number
  default     = 4
  description = "Most glideins queued and running at once."
}

provider "local" {
  bind_address = "127.0.0.1"
}

provider "slurm" {
  work_dir     = var.work_dir
  partition    = var.partition
  time_limit   = "2h"
  extra_sbatch = ["--nodes=1"]
  bind_address = "127.0.0.1"
}

pool "campus" {
  provider = provider.local
  nodes    = 1
  config = {
    NEGOTIATOR_INTERVAL   = "2"
    POND_FACTORY_INTERVAL = "2s"
  }
}

glidein "hpc" {
  provider     = provider.slurm
  pool         = pool.campus.central_manager
  lifetime     = "1h"
  idle_timeout = var.idle_timeout
  max_jobs     = var.max_jobs
  cm_timeout   = "2m"
  slots        = 1
  memory       = "1GB"
  attributes   = { Site = "hpc", HasSlurm = true }

  validate {
    disk    = "100MB"
    command = ["/bin/true"]
  }

  factory {
    max_queued           = 2
    max_running          = var.max_running
    max_submit_per_cycle = 2
    ramp                 = "exponential"
    breaker_failures     = 3
    breaker_window       = "10m"
    breaker_backoff      = "5m"
  }
}

output "central_manager" {
  description = "The -pool address of the campus pool's central manager."
  value       = pool.campus.central_manager
}

output "funnel" {
  description = "The factory entry's funnel at the last refresh."
  value       = glidein.hpc.funnel
}
