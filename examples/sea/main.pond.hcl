# A sea of free nodes: each is its own central manager, announced in the
# sea with its attributes, ready to be invited into a pond.

variable "free_nodes" {
  type    = number
  default = 6
}

pool "sea" {
  nodes = var.free_nodes
  free  = true
  attributes = {
    Site    = "sea"
    HasGPU  = false
    Rack    = "r1"
  }
}

pool "gpu" {
  nodes = 2
  free  = true
  attributes = {
    Site   = "sea"
    HasGPU = true
    Rack   = "r2"
  }
}

output "sea" {
  value = pool.sea.sea
}

output "free_nodes" {
  value = concat(pool.sea.members, pool.gpu.members)
}
