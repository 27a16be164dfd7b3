package gridengine

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/batch"
)

// Kind is the kind "gridengine": the provider "gridengine" block, and a
// factory entry's Grid Engine site made again from its Config.
func Kind() glidein.Kind {
	return glidein.Kind{
		Name: KindName,
		Provider: glidein.Block{
			Description: "Starts glideins as Grid Engine batch jobs.",
			Settings: map[string]glidein.Setting{
				"queue":                {Type: cty.String, Description: "Cluster queue, or several separated by commas (qsub -q; default: the scheduler chooses)."},
				"project":              {Type: cty.String, Description: "Project the jobs are charged to (qsub -P)."},
				"parallel_environment": {Type: cty.String, Description: "Parallel environment a glidein of more than one CPU takes its slots from (qsub -pe NAME CPUS)."},
				"walltime":             {Type: cty.String, Description: "Most a glidein job may run, as a duration (h_rt; default: the glidein's lifetime, else the queue's limit)."},
				"cpus":                 {Type: cty.Number, Description: "CPUs of a glidein whose request does not say (default 1 slot)."},
				"memory_mb":            {Type: cty.Number, Description: "Memory of a glidein whose request does not say, in MB (default: the queue's)."},
				"memory_resource":      {Type: cty.String, Description: "Resource memory is asked with, per slot (qsub -l NAME=...M; default mem_free)."},
				"extra_qsub":           {Type: cty.List(cty.String), Description: "Further #$ lines, each a qsub option such as \"-l gpu=1\"."},
				"work_dir":             {Type: cty.String, Required: true, Description: "Absolute directory that the submit host and the execution hosts share, under which each glidein gets its own."},
				"env":                  {Type: cty.Map(cty.String), Description: "Environment of the Grid Engine commands, such as SGE_ROOT, SGE_CELL, SGE_QMASTER_PORT (default: pondctl's, or the login node's)."},
				"commands":             {Type: cty.Map(cty.String), Description: "Paths of the Grid Engine commands: qsub, qstat, qdel, qacct, qconf (default: found in PATH)."},
				"history":              {Type: cty.String, Description: "How far back ended glideins are looked for in qacct, as a duration (default 168h)."},
			},
			Blocks: map[string]glidein.NestedBlock{
				"login": batch.LoginBlock("the Grid Engine commands"),
			},
		},
		New:  newFromSettings,
		Open: glidein.OpenConfig(New),
	}
}

// settings is a provider "gridengine" block's own arguments.
type settings struct {
	Queue          string               `json:"queue"`
	Project        string               `json:"project"`
	PE             string               `json:"parallel_environment"`
	Walltime       string               `json:"walltime"`
	CPUs           *json.Number         `json:"cpus"`
	MemoryMB       *json.Number         `json:"memory_mb"`
	MemoryResource string               `json:"memory_resource"`
	ExtraQsub      []string             `json:"extra_qsub"`
	WorkDir        string               `json:"work_dir"`
	Env            map[string]string    `json:"env"`
	Commands       map[string]string    `json:"commands"`
	History        string               `json:"history"`
	Login          *batch.LoginSettings `json:"login"`
}

// newFromSettings makes the site of a provider "gridengine" block.
func newFromSettings(_ context.Context, raw json.RawMessage, _ glidein.KindEnv) (glidein.Site, error) {
	var s settings
	if err := glidein.DecodeSettings(raw, &s); err != nil {
		return nil, err
	}
	walltime, err := glidein.DurationSetting("walltime", s.Walltime, 0, time.Second)
	if err != nil {
		return nil, err
	}
	history, err := glidein.DurationSetting("history", s.History, 0, time.Hour)
	if err != nil {
		return nil, err
	}
	cpus, err := intSetting("cpus", s.CPUs)
	if err != nil {
		return nil, err
	}
	mem, err := intSetting("memory_mb", s.MemoryMB)
	if err != nil {
		return nil, err
	}
	var cmd Commands
	if err := batch.SetCommands("Grid Engine", s.Commands, cmd.list()...); err != nil {
		return nil, err
	}
	env := make([]string, 0, len(s.Env))
	for k, v := range s.Env {
		if !batch.IsEnvName(k) {
			return nil, glidein.SettingErrorf("env", "%q is not a variable name", k)
		}
		env = append(env, k+"="+v)
	}
	login, err := s.Login.Login()
	if err != nil {
		return nil, err
	}
	return glidein.SiteOrNil(New(Config{
		WorkDir:        s.WorkDir,
		Queue:          s.Queue,
		Project:        s.Project,
		PE:             s.PE,
		Walltime:       walltime,
		CPUs:           cpus,
		MemoryMB:       mem,
		MemoryResource: s.MemoryResource,
		Extra:          s.ExtraQsub,
		Env:            sortedEnv(env),
		Commands:       cmd,
		History:        history,
		Login:          login,
	}))
}

// intSetting reads a whole, non-negative number setting; nil is 0.
func intSetting(name string, n *json.Number) (int, error) {
	if n == nil {
		return 0, nil
	}
	v, err := strconv.ParseInt(n.String(), 10, 32)
	if err != nil || v < 0 {
		return 0, glidein.SettingErrorf(name, "%s is not a whole number of 0 or more", n)
	}
	return int(v), nil
}

// sortedEnv is env sorted, so that a site's description does not change
// with a map's order.
func sortedEnv(env []string) []string {
	slices.Sort(env)
	return env
}
