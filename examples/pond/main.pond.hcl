# A pond: a central manager of its own, a sea of free nodes with varied
# attributes, and a pool on demand formed from the best of them.
#
#   pondctl plan    shows which sea nodes the tree query would invite
#   pondctl apply   invites them; they set CONDOR_HOST to the manager
#   pondctl destroy releases them back to the sea

variable "pond_size" {
  type    = number
  default = 3
}

# The pond's central manager. It runs no startd: jobs sent to the pond run
# on its members only.
pool "manager" {
  nodes      = 1
  attributes = { Role = "manager" }
  config     = { DAEMON_LIST = "MASTER COLLECTOR NEGOTIATOR SCHEDD" }
}

# Free nodes, each its own central manager, waiting in the sea.
pool "sea" {
  for_each = {
    small = { nodes = 3, memory = 2048 }
    large = { nodes = 4, memory = 16384 }
  }
  nodes = each.value.nodes
  free  = true
  attributes = {
    SizeClass        = each.key
    AdvertisedMemory = each.value.memory
    HasMatlab        = false
  }
  # A member whose central manager has been gone this long returns to the
  # sea on its own.
  config = { POND_ORPHAN_TIMEOUT = "5s" }
}

pond "burst" {
  central_manager = pool.manager.central_manager
  requirements    = "SizeClass == \"large\" && HasMatlab =!= true"
  rank            = "AdvertisedMemory"
  size            = var.pond_size
  attributes      = { Project = "\"burst-demo\"" }
  # On destroy, members take no new job and let running ones finish (up to
  # drain_timeout, then evict them); drain = "evict" hands them back at once.
  drain         = "wait"
  drain_timeout = "5m"
  depends_on    = [pool.sea]
}

output "central_manager" {
  value = pool.manager.central_manager
}

output "members" {
  value = pond.burst.members
}
