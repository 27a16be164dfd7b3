# A local pool on this machine grown onto SSH hosts: a glidein is
# `pondctl agent`, copied to a host and started there over SSH, that joins
# the campus pool for its lifetime and leaves when idle. Host keys are
# checked against known_hosts.
#
#   pondctl apply -var 'hosts=["pond@node1:22", "pond@node2:2222"]' \
#     -var pool_address=10.0.0.5
#
# pool_address is this machine's address the hosts reach: the pool's
# central manager listens there. The glideins listen on every address of
# their host and tell the pool the one they reach it from; their gossip,
# and the pool's, is encrypted with the working directory's sea key
# (.pond/auth/gossip.key, made on first use). With the default
# pool_address, 127.0.0.1, only hosts on this machine reach the pool, and
# everything gossips in the clear on loopback. See README.md.

pond {
  backend "local" {
    path = "pond.state"
  }
}

variable "hosts" {
  type        = list(string)
  default     = ["127.0.0.1:2222"]
  description = "SSH hosts the glideins run on, as \"user@host:port\" (user@ and :port may be left out: the user variable and port 22; an IPv6 address in brackets, \"user@[::1]:22\")."
}

variable "user" {
  type        = string
  default     = null
  description = "The user pond logs in as on the hosts whose entry names none (default: the local user)."
}

variable "private_key_file" {
  type        = string
  default     = "~/.ssh/id_ed25519"
  description = "The private key pond logs in with (without a passphrase)."
}

variable "known_hosts_file" {
  type        = string
  default     = "~/.ssh/known_hosts"
  description = "The known_hosts file the hosts' keys are checked against: ssh to each host once, or ssh-keyscan."
}

variable "remote_dir" {
  type        = string
  default     = "/tmp/pond-glidein"
  description = "The directory on each host under which each glidein gets its own."
}

variable "pool_address" {
  type        = string
  default     = "127.0.0.1"
  description = "This machine's address the hosts reach, where the pool listens."
}

variable "gossip_key" {
  type        = string
  default     = null
  sensitive   = true
  description = "A gossip key of your own (pondctl sea keygen) for the pool and the glideins; by default the working directory's sea key."
}

variable "idle_timeout" {
  type        = string
  default     = "5m"
  description = "How long a glidein stays without a job before it leaves."
}

provider "local" {
  bind_address = var.pool_address
  encrypt      = var.gossip_key
}

provider "ssh" {
  hosts            = var.hosts
  user             = var.user
  private_key_file = pathexpand(var.private_key_file)
  known_hosts_file = pathexpand(var.known_hosts_file)
  remote_dir       = var.remote_dir
  slots_per_host   = 1
  encrypt          = var.gossip_key
}

pool "campus" {
  provider = provider.local
  nodes    = 1
  config   = { NEGOTIATOR_INTERVAL = "5" }
}

glidein "hosts" {
  provider     = provider.ssh
  pool         = pool.campus.central_manager
  nodes        = length(var.hosts)
  lifetime     = "30m"
  idle_timeout = var.idle_timeout
  attributes   = { Site = "ssh" }

  validate {
    memory = "512MB"
  }
}

output "central_manager" {
  description = "The -pool address of the campus pool's central manager."
  value       = pool.campus.central_manager
}

output "glideins" {
  description = "Each glidein: its ID, host:pid, host and state."
  value       = glidein.hosts.glideins
}
