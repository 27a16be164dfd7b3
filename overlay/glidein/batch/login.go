package batch

import (
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/remote"
)

// Login is a cluster's login node, reached over SSH, where a batch
// site's commands run and its work directory is. Its JSON is a site's
// description's "Login". Errors about it name the attribute as
// login.NAME.
type Login struct {
	// Host (host) is the login node's name or address; required.
	Host string
	// Port (port) is its SSH port; default 22.
	Port int `json:",omitempty"`
	// User (user) logs in; default: the local user.
	User string `json:",omitempty"`
	// PrivateKeyFile (private_key_file) is the key to log in with;
	// empty: the SSH agent's keys ($SSH_AUTH_SOCK).
	PrivateKeyFile string `json:",omitempty"`
	// KnownHostsFile (known_hosts_file) is the known_hosts file the
	// login node's key, and the jump host's, are checked against; an
	// unknown host or a changed key is refused. Required.
	KnownHostsFile string
	// JumpHost (jump_host) is a host the connection goes through, as
	// [USER@]HOST[:PORT], logged in with the same key; empty for none.
	JumpHost string `json:",omitempty"`
}

// LoginBlock is the provider block's nested block "login" of a batch
// system whose commands are named commands ("the Grid Engine commands").
func LoginBlock(commands string) glidein.NestedBlock {
	return glidein.NestedBlock{Block: glidein.Block{
		Description: "The cluster's login node, reached over SSH: " + commands + " run there and work_dir is its directory (absent: they run on this machine).",
		Settings: map[string]glidein.Setting{
			"host":             {Type: cty.String, Required: true, Description: "Login node's name or address."},
			"port":             {Type: cty.Number, Description: "SSH port (default 22)."},
			"user":             {Type: cty.String, Description: "Remote user the glideins are submitted as (default: the local user)."},
			"private_key_file": {Type: cty.String, Description: "Private key to authenticate with (default: the SSH agent)."},
			"known_hosts_file": {Type: cty.String, Description: "known_hosts file the login node's key (and the jump host's) is checked against; an unknown host is refused (default ~/.ssh/known_hosts)."},
			"jump_host":        {Type: cty.String, Description: "Host the connection goes through, as [USER@]HOST[:PORT], with the same key (default: none)."},
		},
	}}
}

// LoginSettings is a provider block's login block, as a Kind's New is
// given it.
type LoginSettings struct {
	Host           string       `json:"host"`
	Port           *json.Number `json:"port"`
	User           string       `json:"user"`
	PrivateKeyFile string       `json:"private_key_file"`
	KnownHostsFile string       `json:"known_hosts_file"`
	JumpHost       string       `json:"jump_host"`
}

// Login makes the Login of a login block (nil for none): its known_hosts
// file is ~/.ssh/known_hosts unless it names one; a leading ~/ of a file
// is the home directory. An error is a *glidein.SettingError about
// "login".
func (l *LoginSettings) Login() (*Login, error) {
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
	known, err := ExpandHome(known)
	if err != nil {
		return nil, loginErrorf("known_hosts_file", "%v", err)
	}
	key, err := ExpandHome(l.PrivateKeyFile)
	if err != nil {
		return nil, loginErrorf("private_key_file", "%v", err)
	}
	return &Login{Host: l.Host, Port: port, User: l.User, PrivateKeyFile: key, KnownHostsFile: known, JumpHost: l.JumpHost}, nil
}

// ExpandHome replaces a leading ~/ in path with the home directory.
func ExpandHome(path string) (string, error) {
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

func loginErrorf(name, format string, args ...any) error {
	return &glidein.SettingError{Setting: "login", Err: fmt.Errorf("login."+name+": "+format, args...)}
}

// Connect returns where a site's commands run and its work directory
// workDir is: this machine when login is nil, else the login node over
// one SSH connection (made on the first command). A login without a
// user is filled in with the local user's name. It runs nothing.
func Connect(workDir string, login *Login) (remote.Runner, FS, error) {
	if login == nil {
		return remote.Local{}, NewLocalFS(workDir), nil
	}
	if login.User == "" {
		u, err := user.Current()
		if err != nil {
			return nil, nil, fmt.Errorf("login.user is not set, and the current user is unknown: %w", err)
		}
		login.User = u.Username
	}
	r, err := remote.NewSSH(remote.SSHConfig{
		Host: login.Host, Port: login.Port, User: login.User, KeyFile: login.PrivateKeyFile,
		KnownHosts: login.KnownHostsFile, Jump: login.JumpHost,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("login: %w", err)
	}
	return r, NewRemoteFS(workDir, r), nil
}
