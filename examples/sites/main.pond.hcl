# One pool per site with for_each, sized from a map, plus two burst pools
# (count) that carry the first site's central manager address as their
# HomePool attribute; each is a pool of its own. See README.md.

variable "sites" {
  type = map(object({
    nodes = number
    slots = optional(number, 1)
  }))
  default = {
    north = { nodes = 2 }
    south = { nodes = 1, slots = 2 }
  }
}

locals {
  first_site = sort(keys(var.sites))[0]
}

pool "site" {
  for_each   = var.sites
  nodes      = each.value.nodes
  slots      = each.value.slots
  attributes = { Site = each.key }
}

pool "burst" {
  count      = 2
  nodes      = 1
  attributes = { Burst = true, Index = count.index, HomePool = pool.site[local.first_site].central_manager }
  depends_on = [pool.site]
}

output "central_managers" {
  value = { for name, p in pool.site : name => p.central_manager }
}

output "burst_members" {
  value = flatten([for p in pool.burst : p.members])
}
