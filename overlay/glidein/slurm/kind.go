package slurm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/overlay/glidein"
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
				"login": {Block: glidein.Block{
					Description: "The cluster's login node, reached over SSH: the Slurm commands run there and work_dir is its directory (absent: they run on this machine).",
					Settings: map[string]glidein.Setting{
						"host":             {Type: cty.String, Required: true, Description: "Login node's name or address."},
						"port":             {Type: cty.Number, Description: "SSH port (default 22)."},
						"user":             {Type: cty.String, Description: "Remote user the glideins are submitted as (default: the local user)."},
						"private_key_file": {Type: cty.String, Description: "Private key to authenticate with (default: the SSH agent)."},
						"known_hosts_file": {Type: cty.String, Description: "known_hosts file the login node's key (and the jump host's) is checked against; an unknown host is refused (default ~/.ssh/known_hosts)."},
						"jump_host":        {Type: cty.String, Description: "Host the connection goes through, as [USER@]HOST[:PORT], with the same key (default: none)."},
					},
				}},
			},
		},
		New: newFromSettings,
		Open: func(_ context.Context, config json.RawMessage, _ glidein.KindEnv) (glidein.Site, error) {
			var c Config
			if err := glidein.DecodeConfig(config, &c); err != nil {
				return nil, err
			}
			return siteOrNil(New(c))
		},
	}
}

// settings is a provider "slurm" block's own arguments.
type settings struct {
	Partition   string            `json:"partition"`
	Account     string            `json:"account"`
	QOS         string            `json:"qos"`
	TimeLimit   string            `json:"time_limit"`
	Constraints string            `json:"constraints"`
	ExtraSbatch []string          `json:"extra_sbatch"`
	WorkDir     string            `json:"work_dir"`
	Commands    map[string]string `json:"commands"`
	Login       *loginSettings    `json:"login"`
}

// loginSettings is a provider "slurm" block's login block.
type loginSettings struct {
	Host           string       `json:"host"`
	Port           *json.Number `json:"port"`
	User           string       `json:"user"`
	PrivateKeyFile string       `json:"private_key_file"`
	KnownHostsFile string       `json:"known_hosts_file"`
	JumpHost       string       `json:"jump_host"`
}

// login makes the Login of a login block: its known_hosts file is
// ~/.ssh/known_hosts unless it names one; a leading ~/ of a file is the
// home directory.
func (l *loginSettings) login() (*Login, error) {
	if l == nil {
		return nil, nil
	}
	if l.Host == "" {
		return nil, loginErrorf("host", "the login node's name or address is required")
	}
	port := 0
	if l.Port != nil {
		n, err := l.Port.Int64()
		if err != nil || n < 1 || n > 65535 {
			return nil, loginErrorf("port", "%s is not a port number from 1 to 65535", l.Port)
		}
		port = int(n)
	}
	known := l.KnownHostsFile
	if known == "" {
		known = "~/.ssh/known_hosts"
	}
	known, err := expandHome(known)
	if err != nil {
		return nil, loginErrorf("known_hosts_file", "%v", err)
	}
	key, err := expandHome(l.PrivateKeyFile)
	if err != nil {
		return nil, loginErrorf("private_key_file", "%v", err)
	}
	return &Login{Host: l.Host, Port: port, User: l.User, PrivateKeyFile: key, KnownHostsFile: known, JumpHost: l.JumpHost}, nil
}

// expandHome replaces a leading ~/ in path with the home directory.
func expandHome(path string) (string, error) {
	rest, ok := strings.CutPrefix(path, "~/")
	if !ok {
		return path, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, rest), nil
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
	for k, v := range s.Commands {
		var to *string
		switch k {
		case "sbatch":
			to = &cmd.Sbatch
		case "squeue":
			to = &cmd.Squeue
		case "sacct":
			to = &cmd.Sacct
		case "scancel":
			to = &cmd.Scancel
		case "scontrol":
			to = &cmd.Scontrol
		case "sacctmgr":
			to = &cmd.Sacctmgr
		default:
			return nil, glidein.SettingErrorf("commands", "%q is not a Slurm command pond uses (sbatch, squeue, sacct, scancel, scontrol, sacctmgr)", k)
		}
		*to = v
	}
	login, err := s.Login.login()
	if err != nil {
		return nil, err
	}
	return siteOrNil(New(Config{
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

// siteOrNil returns s as a glidein.Site, or a nil Site with err: a nil
// *Site in a Site is not a nil Site.
func siteOrNil(s *Site, err error) (glidein.Site, error) {
	if err != nil {
		return nil, err
	}
	return s, nil
}

// loginErrorf is an error about the argument name of the login block.
func loginErrorf(name, format string, args ...any) error {
	return &glidein.SettingError{Setting: "login", Err: fmt.Errorf("login."+name+": "+format, args...)}
}
