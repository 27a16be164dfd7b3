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
    Site   = "sea"
    HasGPU = false
    Rack   = "r1"
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

# A tree query over the sea: read during apply the first time (it depends
# on pools being created), at plan time afterwards.
data "sea_query" "gpus" {
  sea          = pool.gpu.sea
  requirements = "HasGPU == true"
  rank         = "Memory"
  k            = 5
  attrs        = ["Rack"]
  depends_on   = [pool.gpu]
}

output "gpu_nodes" {
  value = [for m in data.sea_query.gpus.matches : m.name]
}
