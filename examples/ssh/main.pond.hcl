# A local pool on this machine grown onto SSH hosts: a glidein is
# `pondctl agent`, copied to a host and started there over SSH, that joins
# the campus pool for its lifetime and leaves when idle. Host keys are
# checked against known_hosts.

pond {
  backend "local" {
    path = "pond.state"
  }
}

variable "hosts" {
  type        = list(string)
  default     = ["127.0.0.1:2222"]
  description = "SSH hosts the glideins run on, as HOST or HOST:PORT."
}

variable "gossip_key" {
  type        = string
  sensitive   = true
  description = "The sea's gossip key (pondctl sea keygen): glideins on other hosts gossip over the network."
}

provider "local" {
  bind_address = "0.0.0.0"
  encrypt      = var.gossip_key
}

provider "ssh" {
  hosts            = var.hosts
  user             = "pond"
  private_key_file = pathexpand("~/.ssh/id_ed25519")
  known_hosts_file = pathexpand("~/.ssh/known_hosts")
  remote_dir       = "/tmp/pond-glidein"
  slots_per_host   = 1
  encrypt          = var.gossip_key
}

pool "campus" {
  provider = provider.local
  nodes    = 1
}

glidein "hosts" {
  provider     = provider.ssh
  pool         = pool.campus.central_manager
  nodes        = length(var.hosts)
  lifetime     = "30m"
  idle_timeout = "5m"
  attributes   = { Site = "ssh" }

  validate {
    memory = "512MB"
  }
}

output "glideins" {
  description = "Each glidein: its ID, host:pid, host and state."
  value       = glidein.hosts.glideins
}
