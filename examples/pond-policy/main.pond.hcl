# A pond policy: a submit node whose queue grows a pond by itself.
#
# The submit node runs a schedd, a collector and a negotiator but no startd,
# so no slot of its own can run a job. When jobs wait in its queue, it
# groups them (jobs with the same Requirements, Rank and resource requests
# form one group), runs one tree query per group over the sea, invites the
# best matching free nodes (at most max_members in all), and negotiates at
# once. When the queue has drained for the grace period, it releases them
# back to the sea. No pondctl needs to run meanwhile.
#
#   pondctl apply
#   pondctl condor submit -pool "$(pondctl output -raw submit)" jobs.sub
#   pondctl sea members -sea "$(pondctl output -raw submit)"
#   pondctl destroy

pool "submit" {
  nodes      = 1
  attributes = { Role = "submit" }
  config     = { DAEMON_LIST = "MASTER COLLECTOR NEGOTIATOR SCHEDD" }

  pond_policy {
    max_members    = 3    # members of all this node's ponds together
    max_ponds      = 2    # groups of alike jobs with a pond at once
    query_interval = "1s" # at most one tree query a second
    grace          = "3s" # release members 3 s after the queue drains
  }
}

# Free nodes, each its own central manager, waiting in the sea.
pool "sea" {
  for_each = {
    small = { nodes = 2, memory = 2048 }
    large = { nodes = 4, memory = 16384 }
  }
  nodes = each.value.nodes
  slots = 4
  free  = true
  attributes = {
    SizeClass        = each.key
    AdvertisedMemory = each.value.memory
  }
  # A member whose central manager has been gone this long returns to the
  # sea on its own.
  config = { POND_ORPHAN_TIMEOUT = "5s" }
}

output "submit" {
  value = pool.submit.central_manager
}
