package agent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/pond-htc/pond/condor/auth"
	condorconfig "github.com/pond-htc/pond/condor/config"
	"github.com/pond-htc/pond/overlay/api"
	"github.com/pond-htc/pond/overlay/glidein"
	"github.com/pond-htc/pond/overlay/glidein/ec2"
	"github.com/pond-htc/pond/overlay/gossip"
	"github.com/pond-htc/pond/overlay/knobs"
	"github.com/pond-htc/pond/overlay/machinead"
	"github.com/pond-htc/pond/overlay/reach"
)

// Config is everything an agent is started with: command-line flags merged
// over the knobs of an HTCondor-syntax configuration file.
type Config struct {
	// Name is the node's name in the sea (default: the host name).
	Name string
	// Bind is the gossip address, IP:PORT; port 0 picks a free port.
	Bind string
	// Advertise is the gossip address others should use, if not Bind.
	Advertise string
	// API is the HTTP API address, IP:PORT; port 0 picks a free port.
	API string
	// Join lists gossip addresses of agents to join.
	Join []string
	// DataDir holds agent.json, the serf snapshot and keyring; empty
	// means nothing is persisted.
	DataDir string
	// Encrypt is the base64 gossip encryption key, if any.
	Encrypt string
	// InsecureAPI serves the API to every caller, unauthenticated, when
	// the agent trusts no token keys; without it such an agent refuses to
	// start.
	InsecureAPI bool
	// InsecureGossip allows unencrypted gossip on an address that is not
	// a loopback one; without it the agent refuses to start so.
	InsecureGossip bool
	// GossipProfile is "lan", "wan", "local" or "fast".
	GossipProfile string
	// NoGossipCompression turns off the compression of gossip messages
	// (see sea.Config.NoCompression).
	NoGossipCompression bool
	// Pool is the pool the node belongs to; empty for a free node.
	Pool string
	// Pond is the pond the node serves, if any.
	Pond string
	// CondorHost is the API address of the node's central manager; empty
	// means the node is its own.
	CondorHost string
	// Role is "cm" or "node".
	Role string
	// Reach is how other nodes reach this one: ReachDirect, ReachRelay
	// (or its synonym ReachReverse) or ReachAuto (the default, decided
	// at start).
	Reach string
	// Relay is the API address of the agent that relays for this node in
	// relay mode (default: CondorHost).
	Relay string
	// LogLevel is debug, info, warn or error.
	LogLevel string
	// EnableDebug serves Go's profiler under /debug/pprof/ on the API.
	EnableDebug bool
	// TrustedKeys is a PEM file of the public keys whose tokens the API
	// accepts; empty leaves the API open.
	TrustedKeys string
	// TokenIssuer is the issuer accepted tokens must name.
	TokenIssuer string
	// TokenFile holds the token the agent presents to other agents.
	TokenFile string
	// HTCondorKey is the file of the pool signing key of HTCondor-format
	// tokens (auth.ReadHTCondorKey): with it the CEDAR listener accepts
	// IDTOKENS of the TokenIssuer's trust domain. A shared secret: whoever
	// holds it can make such tokens.
	HTCondorKey string
	// TLSCert, TLSKey and TLSCA are the node's certificate, its key and
	// the sea's CA certificates (PEM files): with them the API and the
	// tree queries speak only TLS, and the agent calls other agents with
	// its certificate (mutual TLS). All three or none.
	TLSCert, TLSKey, TLSCA string
	// FactoryKey is the delegated signing key (auth.Authority.Delegate)
	// with which the pilot factory of a central manager gives its
	// glideins node tokens.
	FactoryKey string
	// FactoryCA is the delegated CA's certificate and key
	// (auth.Authority.DelegateCA) with which the pilot factory gives its
	// glideins certificates, in a sea that speaks TLS.
	FactoryCA string
	// Attrs are the machine ClassAd attributes given with -attr or
	// STARTD_ATTRS, typed: int64, float64, bool or string.
	Attrs map[string]any
	// Knobs are the configuration file's NAME = value settings.
	Knobs map[string]string
	// Notices is a cloud glidein's watch on its instance metadata service
	// (-spot-notices, POND_SPOT_NOTICES).
	Notices ec2.Notices
	// ConfigFile is the path given with -config.
	ConfigFile string
	// Credentials names where the node's credential is fetched from
	// into DataDir before ConfigFile is read (-credentials ssm:/PATH).
	Credentials string
	// Condor is the parsed configuration file (nil without -config), for
	// the daemons the agent hosts.
	Condor *condorconfig.Config

	// Glidein is the agent's glidein ID when it runs as a glidein
	// (-glidein); the other glidein fields apply only then.
	Glidein string
	// Started is when the agent started: a glidein's lifetime counts from
	// it (now when zero).
	Started time.Time
	// Lifetime is how long the glidein lives (0: no limit), and EndTime
	// when the node goes away (-end-time, POND_END_TIME): a glidein's
	// batch job's end, a cloud lease's (zero: unknown).
	Lifetime time.Duration
	EndTime  time.Time
	// Grace is how long before its end the glidein starts draining; 0
	// picks glidein.DefaultGrace.
	Grace time.Duration
	// IdleTimeout is how long the glidein may have no claimed slot, and
	// CMTimeout how long its central manager may not answer, before it
	// leaves (0: no limit).
	IdleTimeout, CMTimeout time.Duration
	// MaxJobs is the most jobs the glidein runs before it leaves (0: no
	// limit); its startd has it as POND_MAX_JOBS.
	MaxJobs int
	// Validate is the validation file, and Checks the checks it holds.
	Validate string
	Checks   []api.ValidationCheck
	// StatusFile is where the glidein writes its status (default:
	// glidein.StatusFile in DataDir).
	StatusFile string
}

// Default addresses.
const (
	DefaultBind = gossip.DefaultBindAddr
	DefaultAPI  = "127.0.0.1:7947"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// ParseArgs parses the agent's command line (and the -config file it names)
// into a Config. Flags override configuration file knobs.
func ParseArgs(args []string, stderr io.Writer) (*Config, error) {
	fs := flag.NewFlagSet("pondctl agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg   Config
		joins listFlag
		attrs listFlag
		gf    = glidein.Flags{Env: os.LookupEnv}
		nf    ec2.NoticeFlags
	)
	cfg.Started = time.Now()
	cfg.defineFlags(fs, &joins, &attrs)
	gf.Define(fs, &cfg.Glidein, &cfg.Validate, &cfg.StatusFile)
	nf.Define(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if cfg.Credentials != "" {
		if err := ec2.WriteCredentials(context.Background(), cfg.Credentials, cfg.DataDir, stderr); err != nil {
			return nil, err
		}
	}
	cfg.Join = joins
	cfg.Attrs = map[string]any{}
	cfg.Knobs = map[string]string{}
	if cfg.ConfigFile != "" {
		cc, knobs, err := loadConfigFile(cfg.ConfigFile)
		if err != nil {
			return nil, err
		}
		cfg.Condor, cfg.Knobs = cc, knobs
		if err := cfg.applyKnobs(); err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.ConfigFile, err)
		}
	}
	if err := cfg.parseAttrs(attrs); err != nil {
		return nil, err
	}
	if err := cfg.fillDefaults(); err != nil {
		return nil, err
	}
	if err := cfg.checkFlags(); err != nil {
		return nil, err
	}
	if err := cfg.applyGlideinFlags(&gf); err != nil {
		return nil, err
	}
	var err error
	if cfg.Notices, err = nf.Read(cfg.Knobs, cfg.Glidein); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// defineFlags defines on fs the agent's own flags, which set c's fields,
// and the repeatable -join and -attr, which append to joins and attrs.
func (c *Config) defineFlags(fs *flag.FlagSet, joins, attrs *listFlag) {
	fs.StringVar(&c.ConfigFile, "config", "", "HTCondor-syntax configuration `file` (NAME = value lines)")
	fs.StringVar(&c.Name, "name", "", "node `name` in the sea (default: host name)")
	fs.StringVar(&c.Bind, "bind", "", "gossip `address` IP:PORT (default "+DefaultBind+"; port 0 picks one)")
	fs.StringVar(&c.Advertise, "advertise", "", "gossip `address` IP:PORT advertised to others")
	fs.StringVar(&c.API, "api", "", "HTTP API `address` IP:PORT (default "+DefaultAPI+"; port 0 picks one)")
	fs.Var(joins, "join", "gossip `address` of an agent to join (repeatable)")
	fs.StringVar(&c.DataDir, "data-dir", "", "data `directory` (agent.json, serf snapshot, keyring)")
	fs.Var(attrs, "attr", "machine ClassAd attribute `K=V` (repeatable)")
	fs.StringVar(&c.Encrypt, "encrypt", "", "base64 gossip encryption `key` (16, 24 or 32 bytes; pondctl sea keygen makes one)")
	fs.BoolVar(&c.InsecureAPI, "insecure-api", false, "serve the API without authentication when given no -trusted-keys: anyone who reaches it may change the sea")
	fs.BoolVar(&c.InsecureGossip, "insecure-gossip", false, "allow unencrypted gossip on an address that is not a loopback one")
	fs.StringVar(&c.GossipProfile, "gossip-profile", "", "gossip timing `profile`: lan, wan, local or fast (default lan)")
	fs.BoolFunc("gossip-compress", "compress gossip messages: true (default) or false; false saves CPU on loopback", func(v string) error {
		on, err := strconv.ParseBool(v)
		c.NoGossipCompression = !on
		return err
	})
	fs.StringVar(&c.Pool, "pool", "", "`name` of the pool the node belongs to (empty: free)")
	fs.StringVar(&c.Pond, "pond", "", "`name` of the pond the node serves")
	fs.StringVar(&c.CondorHost, "condor-host", "", "API `address` of the central manager (default: itself)")
	fs.StringVar(&c.Role, "role", "", "`role`: cm or node (default node, cm if DAEMON_LIST has COLLECTOR)")
	fs.StringVar(&c.Reach, "reach", "", "how other nodes reach this one: `mode` direct, relay or its synonym reverse (through -relay, when it accepts no inbound connection) or auto (default: relay when the relay cannot connect back)")
	fs.StringVar(&c.Relay, "relay", "", "API `address` of the agent that relays for this node in relay mode (default: -condor-host)")
	fs.StringVar(&c.LogLevel, "log-level", "", "log `level`: debug, info, warn, error (default info)")
	fs.BoolVar(&c.EnableDebug, "enable-debug", false, "serve Go's profiler under /debug/pprof/ on the API address")
	fs.StringVar(&c.TrustedKeys, "trusted-keys", "", "PEM `file` of the public keys whose tokens the API accepts (default: the API is open)")
	fs.StringVar(&c.TokenIssuer, "token-issuer", "", "`issuer` the accepted tokens must name")
	fs.StringVar(&c.TokenFile, "token-file", "", "`file` of the token the agent presents to other agents")
	fs.StringVar(&c.HTCondorKey, "htcondor-key", "", "`file` (mode 0600) of the pool signing key of HTCondor-format tokens: HTCondor's clients may then authenticate with IDTOKENS of -token-issuer")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "PEM `file` of the node's certificate: the API and tree queries then speak TLS (with -tls-key and -tls-ca)")
	fs.StringVar(&c.TLSKey, "tls-key", "", "PEM `file` of the key of -tls-cert")
	fs.StringVar(&c.FactoryKey, "factory-key", "", "`file` of the delegated key the pilot factory signs its glideins' tokens with")
	fs.StringVar(&c.FactoryCA, "factory-ca", "", "`file` of the delegated CA (certificate and key) the pilot factory issues its glideins' certificates with")
	fs.StringVar(&c.TLSCA, "tls-ca", "", "PEM `file` of the sea's CA certificates, which peers' certificates must come from")
	fs.StringVar(&c.Credentials, "credentials", "", "fetch the node's credential into -data-dir before reading -config: `ssm:/PATH`, the SecureString parameters under PATH in SSM Parameter Store, read with the instance's role and deleted once read")
}

// parseAttrs adds to c.Attrs the machine ClassAd attributes of the -attr
// flags, each NAME=VALUE.
func (c *Config) parseAttrs(attrs []string) error {
	for _, a := range attrs {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return fmt.Errorf("-attr %q: want NAME=VALUE", a)
		}
		k = strings.TrimSpace(k)
		if !api.ValidAttrName(k) {
			return fmt.Errorf("-attr %q: %q is not a valid ClassAd attribute name", a, k)
		}
		c.Attrs[k] = api.ParseAttrValue(v)
	}
	return nil
}

// fillDefaults sets the name, gossip and API addresses and role that
// neither a flag nor a knob set.
func (c *Config) fillDefaults() error {
	if c.Name == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("no -name and no host name: %w", err)
		}
		c.Name = h
	}
	if c.Bind == "" {
		c.Bind = DefaultBind
	}
	if c.API == "" {
		c.API = DefaultAPI
	}
	if c.Role == "" {
		c.Role = "node"
	}
	return nil
}

// checkFlags refuses a role, TLS files, token settings, reach mode or
// gossip profile that are invalid or incomplete together, and sets
// c.Reach to its canonical mode.
func (c *Config) checkFlags() error {
	if c.Role != "cm" && c.Role != "node" {
		return fmt.Errorf("-role %q: want cm or node", c.Role)
	}
	if n := countSet(c.TLSCert, c.TLSKey, c.TLSCA); n != 0 && n != 3 {
		return fmt.Errorf("-tls-cert %q, -tls-key %q, -tls-ca %q: give all three (or none, for plain HTTP)", c.TLSCert, c.TLSKey, c.TLSCA)
	}
	if c.TrustedKeys != "" && c.TokenIssuer == "" {
		return fmt.Errorf("-trusted-keys %s: name the tokens' issuer with -token-issuer", c.TrustedKeys)
	}
	if c.HTCondorKey != "" {
		if c.TokenIssuer == "" {
			return fmt.Errorf("-htcondor-key %s: name the tokens' trust domain with -token-issuer", c.HTCondorKey)
		}
		if _, err := auth.ReadHTCondorKey(c.HTCondorKey, auth.HTCondorPoolKey); err != nil {
			return fmt.Errorf("-htcondor-key: %w", err)
		}
	}
	mode, ok := reach.Mode(c.Reach)
	if !ok {
		return fmt.Errorf("-reach %q: want auto, direct or relay (or its synonym reverse)", c.Reach)
	}
	c.Reach = mode
	if c.Reach == ReachRelay && c.Relay == "" && c.CondorHost == "" {
		return errors.New("-reach relay: name the relay with -relay ADDR (or the central manager with -condor-host, which then relays)")
	}
	switch c.GossipProfile {
	case "", "lan", "wan", "local", "fast":
	default:
		return fmt.Errorf("-gossip-profile %q: want lan, wan, local or fast", c.GossipProfile)
	}
	return nil
}

// applyKnobs fills the fields still unset by flags from the configuration
// file's knobs (see package knobs).
func (c *Config) applyKnobs() error {
	set := func(dst *string, knob string) {
		if v, ok := c.Knobs[knob]; ok && *dst == "" {
			*dst = v
		}
	}
	set(&c.Name, knobs.Name)
	set(&c.Bind, knobs.Bind)
	set(&c.Advertise, knobs.Advertise)
	set(&c.API, knobs.API)
	set(&c.DataDir, knobs.DataDir)
	set(&c.Encrypt, knobs.Encrypt)
	set(&c.GossipProfile, knobs.GossipProfile)
	set(&c.Pool, knobs.Pool)
	set(&c.Pond, knobs.Pond)
	set(&c.CondorHost, "CONDOR_HOST")
	set(&c.Role, knobs.Role)
	set(&c.Reach, knobs.Reach)
	set(&c.Relay, knobs.Relay)
	set(&c.TrustedKeys, knobs.TrustedKeys)
	set(&c.TokenIssuer, knobs.TokenIssuer)
	set(&c.TokenFile, knobs.TokenFile)
	set(&c.HTCondorKey, knobs.HTCondorKey)
	set(&c.TLSCert, knobs.TLSCert)
	set(&c.TLSKey, knobs.TLSKey)
	set(&c.TLSCA, knobs.TLSCA)
	set(&c.FactoryKey, knobs.FactoryKey)
	set(&c.FactoryCA, knobs.FactoryCA)
	set(&c.Glidein, knobs.Glidein)
	set(&c.Validate, knobs.GlideinValidate)
	set(&c.StatusFile, knobs.GlideinStatusFile)
	if v, ok := c.Knobs[knobs.Join]; ok {
		c.Join = append(c.Join, knobs.ParseList(v)...)
	}
	if c.Role == "" {
		for _, d := range splitList(c.Knobs["DAEMON_LIST"]) {
			if strings.EqualFold(d, "COLLECTOR") {
				c.Role = "cm"
			}
		}
	}
	if err := machinead.RefuseSecretAttrs(func(k string) (string, bool) { v, ok := c.Knobs[k]; return v, ok }); err != nil {
		return err
	}
	for _, name := range splitList(c.Knobs["STARTD_ATTRS"]) {
		if !api.ValidAttrName(name) {
			return fmt.Errorf("STARTD_ATTRS: %q is not a valid ClassAd attribute name", name)
		}
		if v, ok := c.Knobs[strings.ToUpper(name)]; ok {
			c.Attrs[name] = api.ParseAttrValue(v)
		}
	}
	return nil
}

// countSet counts the non-empty strings of ss.
func countSet(ss ...string) int {
	n := 0
	for _, s := range ss {
		if s != "" {
			n++
		}
	}
	return n
}

// splitList splits an HTCondor list value on commas and white space.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
}

// loadConfigFile reads an HTCondor-syntax configuration file and returns
// the parsed configuration and the knobs the file itself sets (defaults
// left out), macros expanded.
func loadConfigFile(path string) (*condorconfig.Config, map[string]string, error) {
	cc, err := condorconfig.Load(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading configuration: %w", err)
	}
	knobs := map[string]string{}
	for _, name := range cc.Names() {
		if src, ok := cc.Source(name); ok && src.File == "<default>" {
			continue
		}
		v, _, err := cc.Lookup(name)
		if err != nil {
			return nil, nil, fmt.Errorf("reading configuration: %w", err)
		}
		knobs[strings.ToUpper(name)] = v
	}
	return cc, knobs, nil
}

// Knob returns a setting of the agent's configuration file, with macros
// expanded.
func (c *Config) Knob(name string) (string, bool) {
	if c.Condor != nil {
		return c.Condor.Get(name)
	}
	v, ok := c.Knobs[name]
	return v, ok
}
