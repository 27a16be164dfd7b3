// Package planner turns a configuration, the stored state and what providers
// observe into a plan, and applies plans by walking the dependency graph.
package planner
