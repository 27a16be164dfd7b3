package ssh

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/overlay/glidein"
)

// maxSlots bounds slots_per_host.
const maxSlots = 1024

// Kind is the kind "ssh": the provider "ssh" block, and a factory
// entry's SSH site made again from its Config.
func Kind() glidein.Kind {
	return glidein.Kind{
		Name: "ssh",
		Provider: glidein.Block{
			Description: "Starts glideins on a list of hosts over SSH.",
			Settings: map[string]glidein.Setting{
				"hosts":            {Type: cty.List(cty.String), Required: true, Description: "Hosts the glideins run on, as [USER@]HOST[:PORT] (port 22 by default; an IPv6 address in brackets, [::1]:22); USER logs in on that host instead of user. Each address once."},
				"user":             {Type: cty.String, Description: "Remote user on the hosts whose entry names none (default: the local user)."},
				"private_key_file": {Type: cty.String, Description: "Private key to authenticate with (default: the SSH agent)."},
				"known_hosts_file": {Type: cty.String, Description: "known_hosts file the host keys are checked against (default ~/.ssh/known_hosts)."},
				"remote_dir":       {Type: cty.String, Description: "Directory on each host under which each glidein gets its own (default .pond/glideins in the remote user's home)."},
				"slots_per_host":   {Type: cty.Number, Description: "Most glideins on one host at once (default 1)."},
			},
		},
		New:  newFromSettings,
		Open: glidein.OpenConfig(New),
	}
}

// settings is a provider "ssh" block's own arguments.
type settings struct {
	Hosts          []string     `json:"hosts"`
	User           string       `json:"user"`
	PrivateKeyFile string       `json:"private_key_file"`
	KnownHostsFile string       `json:"known_hosts_file"`
	RemoteDir      string       `json:"remote_dir"`
	SlotsPerHost   *json.Number `json:"slots_per_host"`
}

// newFromSettings makes the site of a provider "ssh" block. Its
// known_hosts file is ~/.ssh/known_hosts unless the block names one; a
// leading ~/ of a file is the home directory.
func newFromSettings(_ context.Context, raw json.RawMessage, env glidein.KindEnv) (glidein.Site, error) {
	var s settings
	if err := glidein.DecodeSettings(raw, &s); err != nil {
		return nil, err
	}
	slots := 1
	if n := s.SlotsPerHost; n != nil {
		i, err := n.Int64()
		if err != nil {
			return nil, glidein.SettingErrorf("slots_per_host", "%s is not a whole number", n)
		}
		if i < 1 || i > maxSlots {
			return nil, glidein.SettingErrorf("slots_per_host", "%s is out of range: want %d to %d", n, 1, maxSlots)
		}
		slots = int(i)
	}
	if len(s.Hosts) == 0 {
		return nil, glidein.SettingErrorf("hosts", "want at least one host")
	}
	known := s.KnownHostsFile
	if known == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, err
		}
		known = filepath.Join(home, ".ssh", "known_hosts")
	}
	key, err := expandHome(s.PrivateKeyFile)
	if err != nil {
		return nil, err
	}
	if known, err = expandHome(known); err != nil {
		return nil, err
	}
	return glidein.SiteOrNil(New(Config{
		Hosts:      s.Hosts,
		User:       s.User,
		KeyFile:    key,
		KnownHosts: known,
		BaseDir:    s.RemoteDir,
		Slots:      slots,
		Binary:     env.Binary,
	}))
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
