# Run by pipeline.sh before anything is applied: the configuration plans
# against the real login node (plan reaches it over SSH, checks sbatch
# --test-only, the partition and the work directory), with what the CI
# job's variables ask for. Plan runs only: they start nothing.

run "plans_the_pool" {
  command = plan

  assert {
    condition     = pool.ci.nodes == 1
    error_message = "the pool plans ${pool.ci.nodes} nodes, want its central manager alone"
  }
  assert {
    condition     = glidein.burst.nodes == var.glideins
    error_message = "the burst plans ${glidein.burst.nodes} glideins, want ${var.glideins}"
  }
}

run "refuses_no_glideins" {
  command = plan

  variables {
    glideins = 0
  }
  expect_failures = [var.glideins]
}
