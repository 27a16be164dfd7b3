package slurm

import (
	"context"
	"encoding/json"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/batch"
)

// Kind is the kind "slurm": the provider "slurm" block, and a factory
// entry's Slurm site made again from its Config.
func Kind() glidein.Kind {
	return glidein.Kind{
		Name: "slurm",
		Provider: glidein.Block{
			Description: "Starts glideins as Slurm batch jobs.",
			Settings: map[string]glidein.Setting{
				"partition":    {Type: cty.String, Description: "Slurm partition (sbatch --partition; default: the cluster's default)."},
				"account":      {Type: cty.String, Description: "Slurm account charged (sbatch --account)."},
				"qos":          {Type: cty.String, Description: "Slurm quality of service (sbatch --qos)."},
				"time_limit":   {Type: cty.String, Description: "Most a glidein job may run, as a duration (default: the glidein's lifetime plus a margin to drain)."},
				"constraints":  {Type: cty.String, Description: "Node features the job needs (sbatch --constraint)."},
				"extra_sbatch": {Type: cty.List(cty.String), Description: "Further #SBATCH lines, each an sbatch option such as \"--exclusive\"."},
				"work_dir":     {Type: cty.String, Required: true, Description: "Absolute directory that this machine and the cluster's nodes share, under which each glidein gets its own."},
				"commands":     {Type: cty.Map(cty.String), Description: "Paths of the Slurm commands: sbatch, squeue, sacct, scancel, scontrol, sacctmgr (default: found in PATH)."},
			},
			Blocks: map[string]glidein.NestedBlock{
				"login": batch.LoginBlock("the Slurm commands"),
			},
		},
		New:  newFromSettings,
		Open: glidein.OpenConfig(New),
	}
}

// settings is a provider "slurm" block's own arguments.
type settings struct {
	Partition   string               `json:"partition"`
	Account     string               `json:"account"`
	QOS         string               `json:"qos"`
	TimeLimit   string               `json:"time_limit"`
	Constraints string               `json:"constraints"`
	ExtraSbatch []string             `json:"extra_sbatch"`
	WorkDir     string               `json:"work_dir"`
	Commands    map[string]string    `json:"commands"`
	Login       *batch.LoginSettings `json:"login"`
}

// newFromSettings makes the site of a provider "slurm" block.
func newFromSettings(_ context.Context, raw json.RawMessage, _ glidein.KindEnv) (glidein.Site, error) {
	var s settings
	if err := glidein.DecodeSettings(raw, &s); err != nil {
		return nil, err
	}
	limit, err := glidein.DurationSetting("time_limit", s.TimeLimit, 0, time.Minute)
	if err != nil {
		return nil, err
	}
	var cmd Commands
	if err := batch.SetCommands("Slurm", s.Commands, cmd.list()...); err != nil {
		return nil, err
	}
	login, err := s.Login.Login()
	if err != nil {
		return nil, err
	}
	return glidein.SiteOrNil(New(Config{
		Login:      login,
		WorkDir:    s.WorkDir,
		Partition:  s.Partition,
		Account:    s.Account,
		QOS:        s.QOS,
		Constraint: s.Constraints,
		TimeLimit:  limit,
		Extra:      s.ExtraSbatch,
		Commands:   cmd,
	}))
}
