# The pool a CI job stands up, runs a workload on, and tears down: a
# local pool whose central manager runs on the CI runner, grown onto a
# Slurm cluster reached over SSH through its login node. Each glidein is a
# Slurm job running `pondctl agent`, which joins the pool for its lifetime
# and leaves when idle. pipeline.sh drives it; the variables come from the
# CI job's environment (POND_VAR_login_host and so on), so the same files
# run against a real cluster and against a test cluster on one machine.
#
# pool_address is the runner's address the cluster's nodes reach: the
# pool's central manager listens there. The glideins listen on every
# address of their node, and their gossip and the pool's is encrypted
# with the working directory's sea key (.pond/auth/gossip.key, made on
# first use). On a test cluster whose nodes are this machine, set both
# pool_address and glidein_bind_address to 127.0.0.1. See README.md.

pond {
  backend "local" {
    path = "pond.state"
  }
}

variable "login_host" {
  type        = string
  description = "The cluster's login node: its name or address."
}

variable "login_port" {
  type        = number
  default     = 22
  description = "The login node's SSH port."
}

variable "login_user" {
  type        = string
  default     = null
  description = "The user the glideins are submitted as on the cluster (default: the user running pondctl)."
}

variable "private_key_file" {
  type        = string
  default     = "~/.ssh/id_ed25519"
  description = "The private key (without a passphrase) pond logs in to the login node with."
}

variable "known_hosts_file" {
  type        = string
  default     = "~/.ssh/known_hosts"
  description = "The known_hosts file holding the login node's key: an unknown or changed key is refused."
}

variable "partition" {
  type        = string
  default     = "debug"
  description = "The Slurm partition the glideins queue in (sinfo lists them)."
}

variable "work_dir" {
  type        = string
  default     = "/tmp/pond-ci"
  description = "An absolute directory of the login node that the cluster's nodes share (home or scratch): each glidein's credentials go there, mode 0700."
}

variable "glideins" {
  type        = number
  default     = 2
  description = "Glideins to keep queued or running on the cluster while the workload runs."

  validation {
    condition     = var.glideins >= 1 && var.glideins <= 16
    error_message = "A CI pool takes between 1 and 16 glideins."
  }
}

variable "pool_address" {
  type        = string
  description = "The runner's address the cluster's nodes reach, where the pool's central manager listens."
}

variable "glidein_bind_address" {
  type        = string
  default     = ""
  description = "The address the glideins listen on: empty for every address of their node, 127.0.0.1 on a test cluster whose nodes are this machine."
}

provider "local" {
  bind_address = var.pool_address
}

provider "slurm" {
  partition    = var.partition
  work_dir     = var.work_dir
  time_limit   = "1h"
  bind_address = var.glidein_bind_address == "" ? null : var.glidein_bind_address

  login {
    host             = var.login_host
    port             = var.login_port
    user             = var.login_user
    private_key_file = var.private_key_file
    known_hosts_file = var.known_hosts_file
  }
}

pool "ci" {
  provider = provider.local
  nodes    = 1
  config   = { NEGOTIATOR_INTERVAL = "2", NEGOTIATOR_MIN_INTERVAL = "1" }
}

glidein "burst" {
  provider     = provider.slurm
  pool         = pool.ci.central_manager
  nodes        = var.glideins
  lifetime     = "50m"
  idle_timeout = "10m"
  cm_timeout   = "2m"
  slots        = 2
  memory       = "1GB"
  attributes   = { Site = "ci-burst" }
}

output "central_manager" {
  description = "The -pool address of the pool's central manager."
  value       = pool.ci.central_manager
}

output "glideins" {
  description = "Each glidein: its ID, Slurm job id, host and state."
  value       = glidein.burst.glideins
}
