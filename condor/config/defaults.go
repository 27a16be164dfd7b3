package config

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/pond-htc/pond/condor/hostinfo"
)

// HostInfo holds the facts HTCondor predefines as macros.
type HostInfo struct {
	Hostname       string // HOSTNAME (short)
	FullHostname   string // FULL_HOSTNAME
	IPAddress      string // IP_ADDRESS
	CPUs           int    // DETECTED_CPUS / DETECTED_CORES
	MemoryMB       int    // DETECTED_MEMORY, in MiB
	Username       string // USERNAME
	OpSys, Arch    string // OPSYS, ARCH as HTCondor spells them (LINUX, X86_64)
	ReleaseDirPath string // RELEASE_DIR
}

// DetectHost returns the facts of the machine it runs on.
func DetectHost() HostInfo { return HostInfo{}.detect() }

func (h HostInfo) detect() HostInfo {
	if h.FullHostname == "" {
		h.FullHostname, _ = os.Hostname()
		if h.FullHostname == "" {
			h.FullHostname = "localhost"
		}
	}
	if h.Hostname == "" {
		h.Hostname, _, _ = strings.Cut(h.FullHostname, ".")
	}
	if h.IPAddress == "" {
		h.IPAddress = "127.0.0.1"
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
					h.IPAddress = ipn.IP.String()
					break
				}
			}
		}
	}
	if h.CPUs == 0 {
		h.CPUs = hostinfo.CPUs()
	}
	if h.MemoryMB == 0 {
		h.MemoryMB = 1024 // when the machine does not say
		if mib, err := hostinfo.TotalMemoryMiB(); err == nil && mib > 0 {
			h.MemoryMB = int(mib)
		}
	}
	if h.Username == "" {
		h.Username = os.Getenv("USER")
		if h.Username == "" {
			h.Username = "nobody"
		}
	}
	if h.OpSys == "" {
		h.OpSys = hostinfo.OpSys()
	}
	if h.Arch == "" {
		h.Arch = hostinfo.Arch()
	}
	if h.ReleaseDirPath == "" {
		h.ReleaseDirPath = "/usr"
	}
	return h
}

// Resources are the cpus and memory a startd offers to jobs, all its slots
// together.
type Resources struct {
	CPUs      int // NUM_CPUS, at least 1
	MemoryMiB int // MEMORY, in MiB
}

// Resources returns the cpus and memory a startd configured by c offers:
// NUM_CPUS and MEMORY, which default to the detected DETECTED_CPUS and
// DETECTED_MEMORY. A machine ad that should agree with the startd's slots
// (such as a pond agent's) reads them here.
func (c *Config) Resources() (Resources, error) {
	cpus, err := c.Int("NUM_CPUS", c.opts.Host.CPUs)
	if err != nil {
		return Resources{}, err
	}
	mem, err := c.Int("MEMORY", c.opts.Host.MemoryMB)
	if err != nil {
		return Resources{}, err
	}
	return Resources{CPUs: max(cpus, 1), MemoryMiB: mem}, nil
}

// defaultTable lists the knobs pond honours with HTCondor 25's defaults.
func defaultTable(h HostInfo) [][2]string {
	return append([][2]string{
		// Predefined facts.
		{"HOSTNAME", h.Hostname},
		{"FULL_HOSTNAME", h.FullHostname},
		{"IP_ADDRESS", h.IPAddress},
		{"DETECTED_CPUS", strconv.Itoa(h.CPUs)},
		{"DETECTED_CORES", strconv.Itoa(h.CPUs)},
		{"DETECTED_PHYSICAL_CPUS", strconv.Itoa(h.CPUs)},
		{"DETECTED_MEMORY", strconv.Itoa(h.MemoryMB)},
		{"USERNAME", h.Username},
		{"OPSYS", h.OpSys},
		{"ARCH", h.Arch},
		{"RELEASE_DIR", h.ReleaseDirPath},
		{"TILDE", os.Getenv("HOME")},
		{"MINUTE", "60"},
		{"HOUR", "3600"},
		{"DAY", "86400"},
		{"DOLLAR", "$"},

		// Configuration sources.
		{"LOCAL_CONFIG_FILE", ""},
		{"LOCAL_CONFIG_DIR", ""},
		{"LOCAL_CONFIG_DIR_EXCLUDE_REGEXP", defaultExcludeRegexp},

		// Pool topology.
		{"CONDOR_HOST", h.FullHostname},
		{"COLLECTOR_HOST", "$(CONDOR_HOST)"},
		{"NEGOTIATOR_HOST", "$(CONDOR_HOST)"},
		{"COLLECTOR_PORT", "9618"},
		{"SHARED_PORT_PORT", "9618"},
		{"USE_SHARED_PORT", "True"},
		{"DAEMON_LIST", "MASTER"},
		{"FLOCK_TO", ""},
		{"FLOCK_FROM", ""},
		{"FLOCK_COLLECTOR_HOSTS", "$(FLOCK_TO)"},
		{"FLOCK_NEGOTIATOR_HOSTS", "$(FLOCK_TO)"},
		{"FLOCK_INCREMENT", "1"},
		{"FLOCK_IDLE_TIME", "10"},
		{"UID_DOMAIN", "$(FULL_HOSTNAME)"},
		{"FILESYSTEM_DOMAIN", "$(FULL_HOSTNAME)"},
		{"ALLOW_READ", "*"},
		{"ALLOW_WRITE", "$(CONDOR_HOST) $(IP_ADDRESS)"},
		{"ALLOW_NEGOTIATOR", "$(CONDOR_HOST) $(IP_ADDRESS)"},
		{"ALLOW_ADMINISTRATOR", "$(CONDOR_HOST) $(IP_ADDRESS)"},

		// Directories.
		{"LOCAL_DIR", "/var"},
		{"LOG", "$(LOCAL_DIR)/log"},
		{"SPOOL", "$(LOCAL_DIR)/spool"},
		{"EXECUTE", "$(LOCAL_DIR)/execute"},
		{"HISTORY", "$(SPOOL)/history"},
		{"JOB_QUEUE_LOG", "$(SPOOL)/job_queue.db"},

		// Collector and daemon updates.
		{"UPDATE_INTERVAL", "300"},
		{"MASTER_UPDATE_INTERVAL", "300"},
		{"CLASSAD_LIFETIME", "900"},
		// A running job's claim lease (startd.ClaimLease): renewed every
		// ALIVE_INTERVAL, lost after MAX_CLAIM_ALIVES_MISSED missed
		// renewals. HTCondor renews every 300 s and gives up after 6; pond
		// brings a lost node's jobs back within seconds.
		{"ALIVE_INTERVAL", "2"},
		{"MAX_CLAIM_ALIVES_MISSED", "5"},
		// A running job's job lease (startd.JobLease), HTCondor's: how
		// long a worker that cannot reach the job's schedd keeps the job,
		// and a schedd that cannot reach a worker it does not know dead
		// waits before it runs the job elsewhere. A job's
		// job_lease_duration overrides it.
		{"JOB_LEASE_DURATION", "2400"},

		// Negotiator.
		{"NEGOTIATOR_INTERVAL", "60"},
		{"NEGOTIATOR_MIN_INTERVAL", "5"},
		{"NEGOTIATOR_USE_SLOT_WEIGHTS", "True"},
		{"NEGOTIATOR_CONSIDER_PREEMPTION", "True"},
		{"PREEMPTION_REQUIREMENTS", "False"},
		{"PREEMPTION_RANK", ""},
		{"NEGOTIATOR_MAX_TIME_PER_CYCLE", "1200"},
		{"PRIORITY_HALFLIFE", "86400"},
		{"DEFAULT_PRIO_FACTOR", "1000.0"},
		{"NICE_USER_PRIO_FACTOR", "10000000000"},

		// Startd policy.
		{"START", "TRUE"},
		{"RANK", "0"},
		{"SUSPEND", "False"},
		{"CONTINUE", "True"},
		{"PREEMPT", "False"},
		{"KILL", "False"},
		{"WANT_SUSPEND", "False"},
		{"WANT_VACATE", "True"},
		{"IS_OWNER", "False"},
		{"MAXJOBRETIREMENTTIME", "0"},
		{"CLAIM_WORKLIFE", "1200"},
		{"STARTD_ATTRS", ""},
		{"STARTD_EXPRS", ""},
		{"NUM_CPUS", "$(DETECTED_CPUS)"},
		{"MEMORY", "$(DETECTED_MEMORY)"},
		{"NUM_SLOTS", "$(NUM_CPUS)"},
		{"STARTER_UPDATE_INTERVAL", "300"},
		// The shared temporary directories each job gets a private one of
		// (startd.DefaultMountUnderScratch); empty for none.
		{"MOUNT_UNDER_SCRATCH", "/tmp,/var/tmp,/dev/shm"},
		{"JOB_RENICE_INCREMENT", "0"},
	}, scheddDefaults()...)
}

// scheddDefaults lists the schedd's knobs with HTCondor 25's defaults.
func scheddDefaults() [][2]string {
	return [][2]string{
		{"MAX_JOBS_RUNNING", "10000"},
		{"MAX_JOBS_SUBMITTED", "2147483647"},
		{"MAX_JOBS_PER_OWNER", "100000"},
		{"SCHEDD_INTERVAL", "300"},
		{"JOB_START_DELAY", "0"},
		{"JOB_START_COUNT", "1"},
		{"MAX_HISTORY_LOG", "20971520"},
		{"MAX_HISTORY_ROTATIONS", "2"},
		{"JOB_DEFAULT_REQUESTCPUS", "1"},
		{"JOB_DEFAULT_REQUESTMEMORY", "128"},
		{"JOB_DEFAULT_REQUESTDISK", "MAX({1024, (TransferInputSizeMB+1) * 1.25}) * 1024"},
		{"SUBMIT_ATTRS", ""},
		{"SYSTEM_PERIODIC_HOLD", ""},
		{"SYSTEM_PERIODIC_RELEASE", ""},
		{"SYSTEM_PERIODIC_REMOVE", ""},
		{"PERIODIC_EXPR_INTERVAL", "60"},
		{"MAX_PERIODIC_EXPR_INTERVAL", "1200"},
		{"PERIODIC_EXPR_TIMESLICE", "0.01"},
		// How many job outputs the schedd receives at once; each holds
		// one transfer chunk in memory.
		{"MAX_CONCURRENT_DOWNLOADS", "100"},
	}
}

// metaknob returns the configuration text of the template cat:tmpl, where
// tmpl may carry arguments, e.g. "PartitionableSlot(1, 50%)".
func metaknob(cat, tmpl string) (string, error) {
	name, args := tmpl, []string(nil)
	if i := strings.IndexByte(tmpl, '('); i >= 0 {
		if !strings.HasSuffix(tmpl, ")") {
			return "", fmt.Errorf("template arguments must end with ): %q", tmpl)
		}
		name = strings.TrimSpace(tmpl[:i])
		for _, a := range splitArgs(tmpl[i+1 : len(tmpl)-1]) {
			args = append(args, strings.TrimSpace(a))
		}
	}
	arg := func(i int, def string) string {
		if i < len(args) && args[i] != "" {
			return args[i]
		}
		return def
	}
	key := strings.ToUpper(cat) + ":" + strings.ToUpper(name)
	switch key {
	case "ROLE:PERSONAL":
		return "CONDOR_HOST = 127.0.0.1\nCOLLECTOR_HOST = $(CONDOR_HOST):0\n" +
			"DAEMON_LIST = MASTER COLLECTOR NEGOTIATOR STARTD SCHEDD\n", nil
	case "ROLE:CENTRALMANAGER":
		return "DAEMON_LIST = $(DAEMON_LIST) COLLECTOR NEGOTIATOR\n", nil
	case "ROLE:SUBMIT":
		return "DAEMON_LIST = $(DAEMON_LIST) SCHEDD\n", nil
	case "ROLE:EXECUTE":
		return "DAEMON_LIST = $(DAEMON_LIST) STARTD\n", nil
	case "POLICY:ALWAYS_RUN_JOBS":
		return "START = True\nSUSPEND = False\nCONTINUE = True\nPREEMPT = False\nKILL = False\n" +
			"WANT_SUSPEND = False\nWANT_VACATE = False\n", nil
	case "FEATURE:PARTITIONABLESLOT":
		n := arg(0, "1")
		if _, err := strconv.Atoi(n); err != nil {
			return "", fmt.Errorf("slot type %q is not a number", n)
		}
		return fmt.Sprintf("SLOT_TYPE_%s = %s\nSLOT_TYPE_%s_PARTITIONABLE = True\nNUM_SLOTS_TYPE_%s = 1\n",
			n, arg(1, "100%"), n, n), nil
	case "FEATURE:STATICSLOTS":
		n := arg(0, "1")
		if _, err := strconv.Atoi(n); err != nil {
			return "", fmt.Errorf("slot type %q is not a number", n)
		}
		return fmt.Sprintf("SLOT_TYPE_%s = %s\nSLOT_TYPE_%s_PARTITIONABLE = False\nNUM_SLOTS_TYPE_%s = %s\n",
			n, arg(2, "cpus=1"), n, n, arg(1, "$(NUM_CPUS)")), nil
	}
	switch strings.ToUpper(cat) {
	case "ROLE", "POLICY", "FEATURE":
		return "", fmt.Errorf("unknown %s template %q", strings.ToUpper(cat), name)
	}
	return "", fmt.Errorf("unknown metaknob category %q (known: ROLE, POLICY, FEATURE)", cat)
}
