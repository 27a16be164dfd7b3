# A local pool burst onto EC2: each glidein is one spot instance whose user
# data starts `pondctl agent`; the agent fetches its short-lived credential
# from SSM Parameter Store with the instance's role (never from its user
# data), joins the campus pool, drains at once on a spot interruption
# notice or a rebalance recommendation, and the instance terminates itself
# when the agent ends (idle, lifetime, interrupted); the next apply
# replaces what ended. Every instance is tagged pond:managed-by = pondctl,
# pond:lineage (the state's) and pond:address (glidein.burst). See
# README.md for the variables to set on AWS, and for trying it on this
# machine with moto (scripts/moto-ec2.sh).

pond {
  backend "local" {
    path = "pond.state"
  }
}

variable "endpoint" {
  type        = string
  default     = null
  description = "Endpoint URL of EC2 and SSM, such as a moto server's http://127.0.0.1:5000; empty or null is AWS itself."
}

variable "region" {
  type    = string
  default = "us-east-1"
}

variable "nodes" {
  type        = number
  default     = 3
  description = "Instances to keep running in the pool."
}

variable "ami" {
  type        = string
  default     = "ami-0123456789abcdef0"
  description = "Image with pondctl at agent_binary that runs its user data (cloud-init)."
}

variable "agent_binary" {
  type        = string
  default     = "/usr/local/bin/pondctl"
  description = "Where pondctl is on the image."
}

variable "base_dir" {
  type        = string
  default     = "/var/lib/pond"
  description = "Directory on the instances under which each glidein's own is made."
}

variable "instance_types" {
  type        = list(string)
  default     = ["c7i.large", "c6i.large", "m7i.large"]
  description = "Instance types to launch, in order of preference: the next when EC2 has no capacity for one."
}

variable "subnets" {
  type    = list(string)
  default = []
}

variable "instance_profile" {
  type        = string
  default     = null
  description = "Instance profile whose role may read and delete the SSM parameters under /pond (see docs/aws.md)."
}

variable "idle_timeout" {
  type        = string
  default     = "20m"
  description = "How long an instance stays without a job before it ends itself."
}

variable "gossip_key" {
  type        = string
  default     = null
  sensitive   = true
  description = "A gossip key of your own (pondctl sea keygen) for the pool and the instances; by default the working directory's sea key (.pond/auth/gossip.key, made on first use), since they gossip over the network."
}

provider "local" {
  bind_address = "0.0.0.0"
  encrypt      = var.gossip_key
}

provider "aws" {
  region               = var.region
  endpoint             = var.endpoint == "" ? null : var.endpoint
  ami                  = var.ami
  instance_types       = var.instance_types
  subnets              = var.subnets
  iam_instance_profile = var.instance_profile
  spot                 = true
  agent_binary         = var.agent_binary
  base_dir             = var.base_dir
  tags                 = { Project = "campus-burst" }
  encrypt              = var.gossip_key
}

pool "campus" {
  provider = provider.local
  nodes    = 1
  config   = { NEGOTIATOR_INTERVAL = "2" }
}

glidein "burst" {
  provider     = provider.aws
  pool         = pool.campus.central_manager
  nodes        = var.nodes
  lifetime     = "4h"
  idle_timeout = var.idle_timeout
  attributes   = { Site = "aws" }
}

output "central_manager" {
  description = "The -pool address of the campus pool's central manager."
  value       = pool.campus.central_manager
}

output "instance_types" {
  description = "The instance types the instances are launched as, in order of preference."
  value       = var.instance_types
}

output "instance_ids" {
  description = "The EC2 instance IDs of the glideins queued or running."
  value       = [for g in glidein.burst.glideins : g.site_id if g.state == "queued" || g.state == "running"]
}

output "instances" {
  description = "Each glidein: its ID, instance ID, private address and state."
  value       = glidein.burst.glideins
}
