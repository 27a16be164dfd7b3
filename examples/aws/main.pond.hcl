# A local pool burst onto EC2: each glidein is one instance whose user data
# starts `pondctl agent`; the agent fetches its short-lived credential from
# SSM Parameter Store with the instance's role (never from its user data),
# joins the campus pool, and the instance terminates itself when the agent
# ends (idle, lifetime). Point it at moto with one variable:
#
#   moto_server -p 5000 &
#   AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test \
#     pondctl apply -var endpoint=http://127.0.0.1:5000 -var ami=ami-...
#
# (moto runs no VM: see docs/aws.md for running the instances' user data
# locally.)

pond {
  backend "local" {
    path = "pond.state"
  }
}

variable "endpoint" {
  type        = string
  default     = null
  description = "Endpoint URL of EC2 and SSM, such as a moto server's http://127.0.0.1:5000 (default: AWS's)."
}

variable "region" {
  type    = string
  default = "us-east-1"
}

variable "ami" {
  type        = string
  default     = "ami-0123456789abcdef0"
  description = "Image with pondctl at /usr/local/bin/pondctl that runs its user data (cloud-init)."
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
  endpoint             = var.endpoint
  ami                  = var.ami
  instance_types       = ["c7i.large", "c6i.large", "m7i.large"]
  subnets              = var.subnets
  iam_instance_profile = var.instance_profile
  spot                 = true
  tags                 = { Project = "campus-burst" }
  encrypt              = var.gossip_key
}

pool "campus" {
  provider = provider.local
  nodes    = 1
}

glidein "burst" {
  provider     = provider.aws
  pool         = pool.campus.central_manager
  nodes        = 10
  lifetime     = "4h"
  idle_timeout = "20m"
  attributes   = { Site = "aws" }
}

output "instances" {
  description = "Each glidein: its ID, instance ID, private address and state."
  value       = glidein.burst.glideins
}
