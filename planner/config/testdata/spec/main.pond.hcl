pond {
  backend "local" { path = "pond.state" }        # or backend "s3" { bucket, key, region, endpoint }
  sea { address = "127.0.0.1:7946" }             # any agent's API, for queries; optional
}

variable "workers" { type = number; default = 4 }

provider "local" {}                               # embedded default: agents as local processes

pool "campus" {
  provider   = provider.local
  nodes      = var.workers
  slots      = 2
  attributes = { HasMatlab = true, Site = "campus" }   # extra startd ClassAd attributes
  config     = { NEGOTIATOR_INTERVAL = "5" }           # HTCondor configuration knobs
}

pool "sea" {                                      # free nodes, released into the sea
  provider = provider.local
  nodes    = 16
  free     = true
}

pond "burst" {
  central_manager = pool.campus.central_manager
  requirements    = "Memory >= 1024 && HasMatlab =!= true"
  rank            = "Memory + KeyboardIdle * 10"
  count           = 4
  mode            = "best-rank"                   # or "first-fit"
  redundant       = true
}

data "sea_query" "big" {
  requirements = "Cpus >= 2"
  rank         = "Memory"
  k            = 10
}

output "burst_members" { value = pond.burst.members }
