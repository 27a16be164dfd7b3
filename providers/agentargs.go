package providers

import "strconv"

// AgentArgs are the arguments of `pondctl agent` a provider starts a node
// with: the local provider's processes and the glideins of the slurm and
// ssh providers. Empty fields are left out.
type AgentArgs struct {
	// Config is the node's HTCondor-syntax configuration file.
	Config  string
	Name    string
	Bind    string // gossip IP:PORT
	API     string // API IP:PORT
	DataDir string
	// GossipProfile is lan, wan, local or fast.
	GossipProfile string
	// NoGossipCompress turns gossip compression off (agents on one host).
	NoGossipCompress bool
	Role             string
	// Pool, CondorHost: the pool the node belongs to and its central
	// manager's API address.
	Pool       string
	CondorHost string
	// Reach is how the node is reached: direct, relay or auto (empty:
	// the agent's default).
	Reach string
	Join  []string // gossip addresses to join
	Attrs []string // K=V machine ad attributes
	// TrustedKeys, TokenIssuer, TokenFile: the authority whose tokens the
	// node accepts, and its own token.
	TrustedKeys string
	TokenIssuer string
	TokenFile   string
	// TLSCert, TLSKey, TLSCA: its certificate of the sea's CA.
	TLSCert string
	TLSKey  string
	TLSCA   string
}

// Args returns the arguments, "agent" first.
func (a AgentArgs) Args() []string {
	args := []string{"agent"}
	add := func(flag, v string) {
		if v != "" {
			args = append(args, flag, v)
		}
	}
	add("-config", a.Config)
	add("-name", a.Name)
	add("-bind", a.Bind)
	add("-api", a.API)
	add("-data-dir", a.DataDir)
	add("-gossip-profile", a.GossipProfile)
	if a.NoGossipCompress {
		args = append(args, "-gossip-compress="+strconv.FormatBool(false))
	}
	add("-role", a.Role)
	add("-pool", a.Pool)
	add("-condor-host", a.CondorHost)
	add("-reach", a.Reach)
	for _, j := range a.Join {
		add("-join", j)
	}
	for _, at := range a.Attrs {
		add("-attr", at)
	}
	add("-trusted-keys", a.TrustedKeys)
	add("-token-issuer", a.TokenIssuer)
	add("-token-file", a.TokenFile)
	add("-tls-cert", a.TLSCert)
	add("-tls-key", a.TLSKey)
	add("-tls-ca", a.TLSCA)
	return args
}
