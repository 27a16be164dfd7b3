# A local pool of four nodes on this machine. Every node is a real
# "pondctl agent" process; everything it owns lives under .pond/ in this
# directory. See README.md.

pond {
  backend "local" {
    path = "pond.state"
  }
}

variable "workers" {
  type        = number
  default     = 4
  description = "Nodes in the campus pool, the central manager included."

  validation {
    condition     = var.workers >= 1 && var.workers <= 32
    error_message = "The campus pool needs between 1 and 32 nodes."
  }
}

provider "local" {}

pool "campus" {
  provider   = provider.local
  nodes      = var.workers
  slots      = 2
  attributes = { HasMatlab = true, Site = "campus" }
  config     = { NEGOTIATOR_INTERVAL = "5" }
}

output "central_manager" {
  description = "The -pool address of the campus pool's central manager."
  value       = pool.campus.central_manager
}

output "sea" {
  description = "An agent API address in the sea, for -sea."
  value       = pool.campus.sea
}

output "members" {
  description = "The names of the campus pool's nodes."
  value       = pool.campus.members
}

output "processes" {
  description = "Each node's name and process ID, one node a line, as pond recorded them at the last apply or refresh."
  value       = join("\n", [for n in pool.campus.node_details : "${n.name} ${n.pid}"])
}
