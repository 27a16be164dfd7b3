# A local pool whose central manager bursts onto EC2 by itself: the
# glidein resource has a factory block instead of a count, so the pool's
# central-manager agent runs a pilot factory that launches instances
# while jobs wait that no slot can run (here, jobs that ask for
# Site == "aws"), each of the cheapest instance type whose CPUs and
# memory fit the job's request_cpus and request_memory. A job that asks
# for more than every type has launches nothing. Idle instances end
# themselves (idle_timeout) once the queue drains; destroy removes the
# factory's entry and terminates what it launched. Every instance is
# tagged pond:managed-by = pondctl, pond:lineage (the state's) and
# pond:address (glidein.burst), as those of examples/aws.
#
# See README.md for the variables to set on AWS, and for trying it on
# this machine with moto (scripts/moto-ec2.sh).
#
# The central manager's agent calls EC2 and SSM with its own credentials
# (the SDK's default chain where it runs: the environment pondctl runs
# with, or its instance role); see docs/aws.md.

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
  default     = ["c7i.large", "m7i.large", "r6i.large"]
  description = "Instance types the factory may launch: each job gets the cheapest whose CPUs and memory fit it."
}

variable "instance_profile" {
  type        = string
  default     = null
  description = "Instance profile whose role may read and delete the instance's own SSM parameters (see docs/aws.md)."
}

variable "idle_timeout" {
  type        = string
  default     = "5m"
  description = "How long an instance stays without a job before it ends itself."
}

variable "max_running" {
  type        = number
  default     = 10
  description = "Most instances pending and running at once."
}

variable "max_hourly_cost" {
  type        = number
  default     = 5
  description = "Most the instances may cost together, in US dollars an hour."
}

provider "local" {
  bind_address = "0.0.0.0"
}

provider "aws" {
  region               = var.region
  endpoint             = var.endpoint == "" ? null : var.endpoint
  ami                  = var.ami
  instance_types       = var.instance_types
  iam_instance_profile = var.instance_profile
  spot                 = true
  agent_binary         = var.agent_binary
  base_dir             = var.base_dir
  tags                 = { Project = "campus-burst" }
}

pool "campus" {
  provider = provider.local
  nodes    = 1
  config = {
    NEGOTIATOR_INTERVAL   = "2"
    POND_FACTORY_INTERVAL = "2s"
  }
}

glidein "burst" {
  provider        = provider.aws
  pool            = pool.campus.central_manager
  lifetime        = "4h"
  idle_timeout    = var.idle_timeout
  attributes      = { Site = "aws" }
  max_hourly_cost = var.max_hourly_cost

  factory {
    max_queued  = min(4, var.max_running)
    max_running = var.max_running
  }
}

output "central_manager" {
  description = "The -pool address of the campus pool's central manager."
  value       = pool.campus.central_manager
}

output "funnel" {
  description = "The factory entry's funnel at the last refresh."
  value       = glidein.burst.funnel
}
