package config

import "github.com/hashicorp/hcl/v2"

// Validate checks the references of the configuration.
func (c *Config) Validate() hcl.Diagnostics { return nil }
