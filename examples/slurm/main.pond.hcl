# A local pool on this machine whose central manager takes glideins from a
# Slurm cluster: each glidein is a batch job running `pondctl agent`, which
# joins the campus pool for its lifetime and leaves when idle. Run pondctl
# where sbatch, squeue, sacct and scancel reach the cluster (a login node):
#
#   pondctl apply -var partition=short -var work_dir=/scratch/$USER/pond
#
# On a real cluster, whose nodes are other machines, also set the local
# provider's bind_address to this machine's address the nodes reach, and
# remove the slurm provider's bind_address (the glideins then listen on
# every address of their node and tell the pool the one they reach it
# from; their gossip and the pool's is encrypted with the working
# directory's sea key, .pond/auth/gossip.key). See README.md.

pond {
  backend "local" {
    path = "pond.state"
  }
}

variable "glideins" {
  type        = number
  default     = 2
  description = "Glideins to keep queued or running on the cluster."
}

variable "partition" {
  type        = string
  default     = "debug"
  description = "The Slurm partition the glideins queue in (sinfo lists them)."
}

variable "work_dir" {
  type        = string
  default     = "/tmp/pond-slurm"
  description = "An absolute directory this machine and the cluster's nodes share (a home or scratch file system on a real cluster): each glidein's credentials go there, mode 0700."
}

variable "idle_timeout" {
  type        = string
  default     = "10m"
  description = "How long a glidein stays without a job before it leaves."
}

provider "local" {
  # The glideins run on the cluster's nodes: the pool must listen where
  # they reach it. On a single machine (a test cluster), 127.0.0.1 will do.
  bind_address = "127.0.0.1"
}

provider "slurm" {
  # A directory this machine and the cluster's nodes share.
  work_dir     = var.work_dir
  partition    = var.partition
  time_limit   = "2h"
  extra_sbatch = ["--nodes=1"]
  bind_address = "127.0.0.1"
}

pool "campus" {
  provider = provider.local
  nodes    = 1
  config   = { NEGOTIATOR_INTERVAL = "5" }
}

glidein "hpc" {
  provider     = provider.slurm
  pool         = pool.campus.central_manager
  nodes        = var.glideins
  lifetime     = "1h"
  idle_timeout = var.idle_timeout
  cm_timeout   = "2m"
  slots        = 2
  memory       = "2GB"
  attributes   = { Site = "hpc", HasSlurm = true }

  validate {
    disk    = "1GB"
    command = ["/bin/true"]
  }
}

output "central_manager" {
  description = "The -pool address of the campus pool's central manager."
  value       = pool.campus.central_manager
}

output "glideins" {
  description = "Each glidein: its ID, Slurm job id, host and state."
  value       = glidein.hpc.glideins
}
