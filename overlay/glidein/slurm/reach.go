package slurm

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"
)

// DefaultConf is where the Slurm commands read their configuration when
// SLURM_CONF is not set (Debian's and Slurm's own default).
const DefaultConf = "/etc/slurm/slurm.conf"

// unreachableSigns are what the Slurm commands say when they cannot reach
// the controller: it does not answer, its name does not resolve, or there
// is no configuration to find it in (Slurm then asks DNS for it).
var unreachableSigns = []string{
	"Unable to contact slurm controller",
	"Socket timed out on send/recv operation",
	"Communication connection failure",
	"Could not establish a configuration source",
	"DNS SRV lookup failed",
	"resolve_ctls_from_dns_srv",
	"Unable to resolve",
	"getaddrinfo",
	"Name or service not known",
	"Temporary failure in name resolution",
	"Unable to process configuration file",
}

// controllerUnreachable reports whether a Slurm command's output says that
// it could not reach the controller.
func controllerUnreachable(said string) bool {
	for _, s := range unreachableSigns {
		if strings.Contains(said, s) {
			return true
		}
	}
	return false
}

// confPath returns the slurm.conf the site's commands read, and how it
// was chosen: SLURM_CONF in the site's Env, else in pond's environment
// (set is true), else the default.
func (s *Site) confPath() (path string, set bool) {
	for i := len(s.cfg.Env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(s.cfg.Env[i], "SLURM_CONF="); ok && v != "" {
			return v, true
		}
	}
	if v := os.Getenv("SLURM_CONF"); v != "" {
		return v, true
	}
	return DefaultConf, false
}

// describeController says where the Slurm commands look for the
// controller: the configuration file, and the SlurmctldHost and
// SlurmctldPort it names when it can be read.
func (s *Site) describeController() string {
	if s.remoteLogin() {
		return "the Slurm commands ran on the " + s.runner.Where() + ", whose slurm.conf (or SLURM_CONF in its environment) names the controller"
	}
	path, set := s.confPath()
	conf := "SLURM_CONF=" + path
	if !set {
		conf = "SLURM_CONF is not set, and " + path
	}
	data, err := os.ReadFile(path)
	switch {
	case os.IsNotExist(err) && !set:
		return conf + " does not exist, so Slurm looked for its controller in DNS (SRV records _slurmctld._tcp): set SLURM_CONF to the cluster's slurm.conf"
	case os.IsNotExist(err):
		return conf + " does not exist: set SLURM_CONF to the cluster's slurm.conf"
	case err != nil:
		return fmt.Sprintf("%s cannot be read (%v)", conf, err)
	}
	hosts, port := controllerOf(data)
	if len(hosts) == 0 {
		return conf + " names no SlurmctldHost"
	}
	addrs := make([]string, len(hosts))
	for i, h := range hosts {
		addrs[i] = h + ":" + port
	}
	return fmt.Sprintf("%s names the controller %s (SlurmctldHost, SlurmctldPort)", conf, strings.Join(addrs, ", then "))
}

// controllerOf reads, from a slurm.conf, the controller's hosts (the
// address in SlurmctldHost=NAME(ADDRESS) when given, else the name; the
// older ControlMachine and ControlAddr too) and its port (SlurmctldPort,
// 6817 when not set).
func controllerOf(conf []byte) (hosts []string, port string) {
	port = "6817"
	var machine, addr string
	sc := bufio.NewScanner(bytes.NewReader(conf))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "slurmctldhost":
			if name, a, ok := strings.Cut(v, "("); ok {
				if a = strings.TrimSuffix(a, ")"); a != "" {
					v = a
				} else {
					v = name
				}
			}
			if v = strings.TrimSpace(v); v != "" {
				hosts = append(hosts, v)
			}
		case "controlmachine":
			machine = v
		case "controladdr":
			addr = v
		case "slurmctldport":
			port = v
		}
	}
	if len(hosts) == 0 {
		switch {
		case addr != "":
			hosts = []string{addr}
		case machine != "":
			hosts = []string{machine}
		}
	}
	return hosts, port
}
