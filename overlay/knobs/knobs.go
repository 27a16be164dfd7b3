// Package knobs is the one table of the POND_* configuration knobs a node
// agent reads from its HTCondor-syntax configuration file (pondctl agent
// -config): each knob's name, type, default and meaning, and the typed
// parsing every reader of a knob goes through, so that a bad value is
// refused the same way, naming the knob, wherever it is read. docs/knobs.md
// is generated from the table.
package knobs

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/pond-htc/pond/condor/classad"
)

// Type is the kind of value a knob holds.
type Type string

// The types of knobs.
const (
	// TypeString is text taken as it is, such as an address or a name.
	TypeString Type = "string"
	// TypeBool is true or false (see ParseBool).
	TypeBool Type = "bool"
	// TypeInt is a whole number (see ParseInt).
	TypeInt Type = "int"
	// TypeDuration is a length of time (see ParseDuration).
	TypeDuration Type = "duration"
	// TypeList is a list separated by commas or white space (see ParseList).
	TypeList Type = "list"
	// TypeExpr is a ClassAd expression.
	TypeExpr Type = "expression"
)

// Knob describes one configuration knob.
type Knob struct {
	// Name is the knob's name, POND_ and upper case.
	Name string
	// Type is the kind of value it holds.
	Type Type
	// Default is the value of the knob when it is not set or set to
	// nothing, written as in the configuration file; empty when there
	// is none or it is worked out at start (Doc says how).
	Default string
	// Positive says that a number or duration must be more than zero
	// (otherwise it must not be negative).
	Positive bool
	// Flag is the agent's command-line flag that overrides the knob, if
	// any.
	Flag string
	// Doc says what the knob does, in one line.
	Doc string
	// Secret says that the value must never be shown: the agent leaves it
	// out of everything it answers.
	Secret bool
}

// The knobs' names.
const (
	// The agent.
	Name          = "POND_NAME"
	Bind          = "POND_BIND"
	Advertise     = "POND_ADVERTISE"
	API           = "POND_API"
	DataDir       = "POND_DATA_DIR"
	Encrypt       = "POND_ENCRYPT"
	GossipProfile = "POND_GOSSIP_PROFILE"
	Pool          = "POND_POOL"
	Pond          = "POND_POND"
	Role          = "POND_ROLE"
	Join          = "POND_JOIN"

	// How the node is reached, and the node as a relay for others.
	Reach           = "POND_REACH"
	Relay           = "POND_RELAY"
	RelayMaxWorkers = "POND_RELAY_MAX_WORKERS"
	RelayGrace      = "POND_RELAY_GRACE"

	// Authentication of the agent's API.
	TrustedKeys = "POND_TRUSTED_KEYS"
	TokenIssuer = "POND_TOKEN_ISSUER"
	TokenFile   = "POND_TOKEN_FILE"
	TLSCert     = "POND_TLS_CERT"
	TLSKey      = "POND_TLS_KEY"
	TLSCA       = "POND_TLS_CA"
	FactoryKey  = "POND_FACTORY_KEY"
	FactoryCA   = "POND_FACTORY_CA"
	HTCondorKey = "POND_HTCONDOR_KEY"

	// The pilot factory of a central manager.
	FactoryInterval       = "POND_FACTORY_INTERVAL"
	FactorySubmitGrace    = "POND_FACTORY_SUBMIT_GRACE"
	FactoryHeartbeatGrace = "POND_FACTORY_HEARTBEAT_GRACE"
	FactoryJoinTimeout    = "POND_FACTORY_JOIN_TIMEOUT"
	FactoryMaxQueued      = "POND_FACTORY_MAX_QUEUED"
	FactoryMaxRunning     = "POND_FACTORY_MAX_RUNNING"

	// Flocking: a central manager's announcements.
	FlockInterval = "POND_FLOCK_INTERVAL"
	FlockTTL      = "POND_FLOCK_TTL"
	// A pool's startds prefer its own jobs to flocked-in ones.
	LendersFirst = "POND_LENDERS_FIRST"

	// Knobs whose values the agent never shows.
	SecretKnobs = "POND_SECRET_KNOBS"

	// Central-manager fail-over (package failover).
	CMReplicas          = "POND_CM_REPLICAS"
	CMTakeoverStep      = "POND_CM_TAKEOVER_STEP"
	CMReplicateInterval = "POND_CM_REPLICATE_INTERVAL"
	CMHandbackHoldDown  = "POND_CM_HANDBACK_HOLD_DOWN"
	CMEpoch             = "POND_CM_EPOCH"

	// Pond membership.
	JoinPolicy    = "POND_JOIN_POLICY"
	OrphanTimeout = "POND_ORPHAN_TIMEOUT"

	// The pond policy (package autoscale).
	Policy                      = "POND_POLICY"
	PolicyMaxMembers            = "POND_POLICY_MAX_MEMBERS"
	PolicyMaxPonds              = "POND_POLICY_MAX_PONDS"
	PolicyQueryInterval         = "POND_POLICY_QUERY_INTERVAL"
	PolicyGrace                 = "POND_POLICY_GRACE"
	PolicyCheckInterval         = "POND_POLICY_CHECK_INTERVAL"
	PolicyNegotiatorMinInterval = "POND_POLICY_NEGOTIATOR_MIN_INTERVAL"
	PolicyRequirements          = "POND_POLICY_REQUIREMENTS"

	// A glidein's life (package glidein).
	Glidein            = "POND_GLIDEIN"
	GlideinLifetime    = "POND_GLIDEIN_LIFETIME"
	GlideinGrace       = "POND_GLIDEIN_GRACE"
	GlideinIdleTimeout = "POND_GLIDEIN_IDLE_TIMEOUT"
	GlideinCMTimeout   = "POND_GLIDEIN_CM_TIMEOUT"
	GlideinMaxJobs     = "POND_GLIDEIN_MAX_JOBS"
	GlideinValidate    = "POND_GLIDEIN_VALIDATE"
	GlideinStatusFile  = "POND_GLIDEIN_STATUS_FILE"

	// A cloud glidein's notices from its instance metadata service.
	SpotNotices  = "POND_SPOT_NOTICES"
	IMDSEndpoint = "POND_IMDS_ENDPOINT"
	IMDSInterval = "POND_IMDS_INTERVAL"

	// The worker's health and end (read by its startd, package
	// condor/startd).
	BlackholeFailures = "POND_BLACKHOLE_FAILURES"
	QuarantineTime    = "POND_QUARANTINE_TIME"
	EndTime           = "POND_END_TIME"
	EndGrace          = "POND_END_GRACE"
	MaxJobs           = "POND_MAX_JOBS"

	// The central manager's history (package condor/collector/history).
	HistoryRetention         = "POND_HISTORY_RETENTION"
	HistoryMaxRows           = "POND_HISTORY_MAX_ROWS"
	HistorySnapshotInterval  = "POND_HISTORY_SNAPSHOT_INTERVAL"
	HistorySnapshotRetention = "POND_HISTORY_SNAPSHOT_RETENTION"
	HistorySnapshotMaxBytes  = "POND_HISTORY_SNAPSHOT_MAX_BYTES"

	// The schedd's job notifications (package condor/schedd).
	NotifyWebhookURL = "POND_NOTIFY_WEBHOOK_URL"
	NotifyWebhookKey = "POND_NOTIFY_WEBHOOK_KEY"
	// The processes a job may have at once in its cgroup.
	JobMaxPids = "POND_JOB_MAX_PIDS"
	// How a job's supervisor is started.
	JobSupervisor = "POND_JOB_SUPERVISOR"

	// The alarms before the node's credentials expire (package
	// overlay/tokenwatch).
	CredentialAlarms = "POND_CREDENTIAL_ALARMS"
)

// table is every knob, in the order docs/knobs.md lists them.
var table = [...]Knob{
	{Name: Name, Type: TypeString, Flag: "-name",
		Doc: "The node's name in the sea (default: the host name)."},
	{Name: Bind, Type: TypeString, Default: "127.0.0.1:7946", Flag: "-bind",
		Doc: "Gossip address, IP:PORT; port 0 picks a free port. Gossip on an address other than a loopback one must be encrypted (`-encrypt`), or allowed in the clear with `-insecure-gossip`."},
	{Name: Advertise, Type: TypeString, Flag: "-advertise",
		Doc: "Gossip address, IP:PORT, the other agents should use, when not the bound one."},
	{Name: API, Type: TypeString, Default: "127.0.0.1:7947", Flag: "-api",
		Doc: "HTTP API address, IP:PORT; port 0 picks a free port."},
	{Name: DataDir, Type: TypeString, Flag: "-data-dir",
		Doc: "Directory of agent.json, the serf snapshot and keyring, and the daemons' state; none keeps nothing."},
	{Name: Encrypt, Type: TypeString, Flag: "-encrypt", Secret: true,
		Doc: "Base64 gossip encryption key of 16, 24 or 32 bytes; never shown."},
	{Name: GossipProfile, Type: TypeString, Default: "lan", Flag: "-gossip-profile",
		Doc: "Gossip timing: lan, wan, local (agents on one host) or fast (tests)."},
	{Name: Pool, Type: TypeString, Flag: "-pool",
		Doc: "The pool the node belongs to; none makes it a free node of the sea."},
	{Name: Pond, Type: TypeString, Flag: "-pond",
		Doc: "The pond the node serves, if any."},
	{Name: Role, Type: TypeString, Default: "node", Flag: "-role",
		Doc: "cm (a central manager) or node; cm when DAEMON_LIST names COLLECTOR."},
	{Name: Join, Type: TypeList, Flag: "-join",
		Doc: "Gossip addresses of agents to join, added to those of -join."},
	{Name: Reach, Type: TypeString, Default: "auto", Flag: "-reach",
		Doc: "How other nodes reach this one: direct (it listens on its own addresses), relay or its synonym reverse (it accepts no inbound connection and keeps one to its relay, which listens on its behalf; the sea shows its reach as reverse), or auto (direct when the relay can connect back to it, relay otherwise)."},
	{Name: Relay, Type: TypeString, Flag: "-relay",
		Doc: "API address, HOST:PORT, of the agent that relays for this node in relay mode (default: its central manager, CONDOR_HOST)."},
	{Name: RelayMaxWorkers, Type: TypeInt, Default: "256", Positive: true,
		Doc: "Most workers this agent relays for at once; more are refused."},
	{Name: RelayGrace, Type: TypeDuration, Default: "2m", Positive: true,
		Doc: "How long this agent keeps the addresses of a worker whose tunnel dropped, for the worker to come back to them."},
	{Name: TrustedKeys, Type: TypeString, Flag: "-trusted-keys",
		Doc: "PEM file of the public keys whose tokens the agent's API accepts; with it every route but /v1/health needs a token of its scope."},
	{Name: TokenIssuer, Type: TypeString, Flag: "-token-issuer",
		Doc: "The issuer (iss) the accepted tokens must name; required with POND_TRUSTED_KEYS."},
	{Name: TokenFile, Type: TypeString, Flag: "-token-file",
		Doc: "File of the token the agent presents when it calls other agents (invitations, releases)."},
	{Name: HTCondorKey, Type: TypeString, Flag: "-htcondor-key",
		Doc: "File (mode 0600) of the pool signing key of HTCondor-format tokens, in HTCondor's password file format (the authority's passwords.d/POOL): with it the agent's CEDAR listener accepts IDTOKENS of the authority (POND_TOKEN_ISSUER) from HTCondor's own clients. Whoever holds it can make such tokens: give it only to the agents HTCondor's clients reach."},
	{Name: SecretKnobs, Type: TypeList,
		Doc: "Names of the configuration's knobs that hold secrets (the local provider lists those set from sensitive values): the agent never shows them, nor those whose names say they hold a secret."},
	{Name: TLSCert, Type: TypeString, Flag: "-tls-cert",
		Doc: "PEM file of the node's certificate (pondctl's authority issues it); with POND_TLS_KEY and POND_TLS_CA the API and the tree queries speak only TLS. Read again when it changes (looked at once a second at most)."},
	{Name: TLSKey, Type: TypeString, Flag: "-tls-key",
		Doc: "PEM file of the key of POND_TLS_CERT (mode 0600)."},
	{Name: TLSCA, Type: TypeString, Flag: "-tls-ca",
		Doc: "PEM file of the sea's CA certificates: peers (other agents, the daemons of other nodes) must present a certificate they signed."},
	{Name: FactoryKey, Type: TypeString, Flag: "-factory-key",
		Doc: "File of the delegated signing key (pondctl's authority makes it) with which the pilot factory of a central manager signs its glideins' node tokens, within the limits the trusted keys give it."},
	{Name: FactoryCA, Type: TypeString, Flag: "-factory-ca",
		Doc: "File of the delegated CA (certificate and key; pondctl's authority makes it) with which the pilot factory of a central manager issues its glideins' certificates, for names under its prefix only, in a sea that speaks TLS."},
	{Name: FactoryInterval, Type: TypeDuration, Default: "5s", Positive: true,
		Doc: "Time between the pilot factory's cycles (a central manager's agent)."},
	{Name: FactorySubmitGrace, Type: TypeDuration, Default: "30s", Positive: true,
		Doc: "How long a glidein the factory journaled may stay unseen at its site before it is submitted again, with the same ID."},
	{Name: FactoryHeartbeatGrace, Type: TypeDuration, Default: "90s", Positive: true,
		Doc: "How long a glidein that joined may be missing from the collector, its site showing it running, before the factory counts it lost and cancels it."},
	{Name: FactoryJoinTimeout, Type: TypeDuration, Default: "10m", Positive: true,
		Doc: "How long a running glidein may take to join the pool before the factory counts it failed and cancels it."},
	{Name: FactoryMaxQueued, Type: TypeInt, Default: "0",
		Doc: "The most glideins queued at all the factory's entries together (0: only each entry's limit)."},
	{Name: FactoryMaxRunning, Type: TypeInt, Default: "0",
		Doc: "The most glideins queued or running at all the factory's entries together (0: only each entry's limit)."},
	{Name: CMReplicas, Type: TypeInt, Default: "0",
		Doc: "How many of the pool's members keep a replica of its central manager's state (the pool's replicas argument); 0 for no fail-over. The manager picks the nearest members in the overlay; when it is gone, the first live replica takes over with the next epoch and the pool's members follow it."},
	{Name: CMTakeoverStep, Type: TypeDuration, Default: "5s", Positive: true,
		Doc: "How much longer a replica waits per replica before it in the take-over order, once the central manager's loss is confirmed, while one of those is alive (it should take over first); a replica with none alive before it takes over at once."},
	{Name: CMReplicateInterval, Type: TypeDuration, Default: "1s", Positive: true,
		Doc: "How often the acting central manager of a pool with replicas sends them its state (negotiator accounting, collector and negotiator knobs, epoch)."},
	{Name: CMHandbackHoldDown, Type: TypeDuration, Default: "10s",
		Doc: "How long the pool's declared central manager, back while a replica acts for it (restarted, or a partition healed), follows that replica before it takes the pool back: a manager that flaps (restarted or cut off again meanwhile starts the wait again) never takes it back. 0 takes it back at once."},
	{Name: CMEpoch, Type: TypeInt, Default: "0",
		Doc: "Set by the agent, not by hand: the epoch of the central manager the node's daemons follow. The negotiator stamps its matches with it; the startd refuses claims of a lower epoch than the highest it has seen."},
	{Name: FlockInterval, Type: TypeDuration, Default: "5s", Positive: true,
		Doc: "How often a central manager's agent renews the announcement of its pool's spare capacity to the sea."},
	{Name: FlockTTL, Type: TypeDuration, Default: "20s", Positive: true,
		Doc: "How long an announcement of spare capacity counts unless renewed: once it passed, the pool vanishes from every willing list. More than POND_FLOCK_INTERVAL."},
	{Name: LendersFirst, Type: TypeBool, Default: "true",
		Doc: "On a pool's node: its startd's Rank adds 1000 for a job of the pool (PondSubmitPool, which every schedd stamps with its pool on the job ads it sends), so that the pool's own jobs preempt jobs flocked in from other pools within a negotiation cycle; added to the configured RANK. false leaves RANK alone."},
	{Name: JoinPolicy, Type: TypeExpr,
		Doc: "Invitations to a pond the node accepts: MY is its machine ad, TARGET the invitation; none accepts every one."},
	{Name: OrphanTimeout, Type: TypeDuration, Default: "30s",
		Doc: "How long a pond member's central manager may be gone before the node leaves the pond on its own."},
	{Name: Policy, Type: TypeBool, Default: "false",
		Doc: "Turns on the pond policy: the node grows ponds from the sea for its queue's idle jobs."},
	{Name: PolicyMaxMembers, Type: TypeInt, Default: "16", Positive: true,
		Doc: "Most members of all the policy's ponds together."},
	{Name: PolicyMaxPonds, Type: TypeInt, Default: "4", Positive: true,
		Doc: "Most ponds at once, one per group of alike jobs."},
	{Name: PolicyQueryInterval, Type: TypeDuration, Default: "2s",
		Doc: "Least time between two tree queries: the policy's highest query rate."},
	{Name: PolicyGrace, Type: TypeDuration, Default: "30s",
		Doc: "How long a pond's jobs must have been gone from the queue before its members are released."},
	{Name: PolicyCheckInterval, Type: TypeDuration, Default: "1s", Positive: true,
		Doc: "How often the queue is examined."},
	{Name: PolicyNegotiatorMinInterval, Type: TypeDuration, Default: "0s",
		Doc: "The negotiator's NEGOTIATOR_MIN_INTERVAL while a pond exists, so that jobs start as soon as members join."},
	{Name: PolicyRequirements, Type: TypeExpr,
		Doc: "ClassAd expression every candidate member must also satisfy: which part of the sea to draw from."},
	{Name: Glidein, Type: TypeString, Flag: "-glidein",
		Doc: "The glidein ID of a node started as a glidein: it validates before it joins, runs itself down, advertises IsGlidein and GlideinID, and writes its status file (see docs/glideins.md); needs POND_POOL and CONDOR_HOST."},
	{Name: GlideinLifetime, Type: TypeDuration, Default: "0", Flag: "-lifetime",
		Doc: "How long a glidein lives from its start, draining before the end; 0 is no limit."},
	{Name: GlideinGrace, Type: TypeDuration, Default: "0", Flag: "-grace",
		Doc: "How long before its end a glidein starts draining (its jobs may finish until a third of it before the end, at most 30s); 0 is a tenth of its life, at most 5m."},
	{Name: GlideinIdleTimeout, Type: TypeDuration, Default: "0", Flag: "-idle-timeout",
		Doc: "How long a glidein may have no claimed slot before it leaves; 0 is no limit."},
	{Name: GlideinCMTimeout, Type: TypeDuration, Default: "5m", Flag: "-cm-timeout",
		Doc: "How long a glidein's central manager may not answer an authenticated call before the glidein leaves (its dead-man switch); 0 is no limit."},
	{Name: GlideinMaxJobs, Type: TypeInt, Default: "0", Flag: "-max-jobs",
		Doc: "The most jobs a glidein runs (a glidein entry's max_jobs): the agent gives its startd POND_MAX_JOBS, and the glidein leaves (reason max-jobs, exit 0) once the last has ended; 0 is no limit."},
	{Name: GlideinValidate, Type: TypeString, Flag: "-validate",
		Doc: "JSON file of the checks a glidein must pass before it joins (disk, memory, cpus, arch, os, central_manager, command; see docs/glideins.md)."},
	{Name: GlideinStatusFile, Type: TypeString, Flag: "-status-file",
		Doc: "Where a glidein writes its status as JSON at each change of phase (default: glidein.status in the data directory)."},
	{Name: SpotNotices, Type: TypeBool, Default: "false", Flag: "-spot-notices",
		Doc: "A glidein on an EC2 instance polls the instance metadata service (IMDSv2, read only) for a spot interruption notice or a rebalance recommendation; on either it drains at once (no new job, running jobs evicted back to their queues), says why in its machine ad (PondDrainReason, PondDrainMessage), status and log, and ends. The EC2 glidein site sets it."},
	{Name: IMDSEndpoint, Type: TypeString,
		Doc: "Endpoint URL of the instance metadata service POND_SPOT_NOTICES polls (default: the SDK's, AWS_EC2_METADATA_SERVICE_ENDPOINT or http://169.254.169.254)."},
	{Name: IMDSInterval, Type: TypeDuration, Default: "5s", Positive: true,
		Doc: "How often POND_SPOT_NOTICES polls the instance metadata service."},
	{Name: BlackholeFailures, Type: TypeInt, Default: "5",
		Doc: "How many jobs in a row the node must fail to start through its own fault (its scratch directory or a job's input files cannot be written, a transferred executable cannot be exec'd there, it runs out of memory; not the host's process ids running out, EAGAIN, a shortage the running jobs free as they end: such a job goes back to the queue and the log says why) before it is quarantined as a black hole: its START is false, its slots show State Owner, its machine ad says why (PondQuarantined, PondQuarantineReason), and condor status, sea members and /v1/self show it. A job that ran, whatever its exit code or the signal that ended it, is the job's own outcome: it never counts, and starts the count again. 0 never quarantines."},
	{Name: QuarantineTime, Type: TypeDuration, Default: "30m",
		Doc: "How long a quarantine lasts, unless an administrator lifts it first (pondctl condor quarantine -lift)."},
	{Name: EndTime, Type: TypeString, Default: "0", Flag: "-end-time",
		Doc: "When the node goes away (a glidein's batch job's end, a cloud lease's), RFC 3339 or seconds since 1970; 0 for never. The agent gives its daemons the node's end under this name in seconds since 1970 (for a glidein, this or its lifetime, the sooner, with the glidein's grace as POND_END_GRACE) and may change it at run time. The machine ad shows it (PondEndTime), and the node takes only jobs whose declared runtime (allowed_job_duration, else AllowedExecuteDuration or MaxJobRetirementTime) ends before it."},
	{Name: EndGrace, Type: TypeDuration, Default: "5m",
		Doc: "How long before POND_END_TIME the node takes no more jobs; the jobs still running at POND_END_TIME are vacated and go back to their queues."},
	{Name: MaxJobs, Type: TypeInt, Default: "0",
		Doc: "The most jobs the node's startd starts in its life; 0 is no limit. After the last it takes no claim, activation or input file (a schedd whose match or claim came late gets a refusal and its job goes back to idle, to run elsewhere), ends each claim with its job, and its slot ads show Draining, PondMaxJobs and PondJobStarts, with a START that matches no job. A glidein's is POND_GLIDEIN_MAX_JOBS."},
	{Name: HistoryRetention, Type: TypeDuration, Default: "720h", Positive: true,
		Doc: "How long the central manager's history (its slots' states over time and its configuration changes, shown by pondctl condor pool-history) keeps a row; older rows are pruned every ten minutes."},
	{Name: HistoryMaxRows, Type: TypeInt, Default: "1000000", Positive: true,
		Doc: "At most this many rows of each kind in the central manager's history; the oldest beyond it are pruned every ten minutes."},
	{Name: HistorySnapshotInterval, Type: TypeDuration, Default: "15m", Positive: true,
		Doc: "How often at most the central manager's history snapshots a machine ad whose only changes are fast-moving attributes (clocks, loads, usages: MyCurrentTime, LastHeardFrom, *LoadAvg, *Time, Disk, KeyboardIdle and the others docs/operations.md lists). A change of any other attribute (Memory, Cpus, State, Start) is snapshot at once; an ad that did not change is never stored again. pondctl condor status -history -snapshots and -at query them."},
	{Name: HistorySnapshotRetention, Type: TypeDuration, Default: "168h", Positive: true,
		Doc: "How long the central manager's history keeps a machine ad's snapshot; older ones are pruned every ten minutes. Keep it longer than POND_HISTORY_SNAPSHOT_INTERVAL, so that -at finds every machine still present."},
	{Name: HistorySnapshotMaxBytes, Type: TypeInt, Default: "268435456", Positive: true,
		Doc: "At most this many bytes of machine ad snapshots (compressed, plus 64 bytes a row) in the central manager's history; the oldest beyond it are pruned every ten minutes."},
	{Name: NotifyWebhookURL, Type: TypeString,
		Doc: "URL (http:// or https://) the schedd POSTs a JSON body to for each job event its notification setting sends an e-mail for (exit, hold, removal; see docs/compatibility.md), signed with POND_NOTIFY_WEBHOOK_KEY in the X-Pond-Signature header (sha256= and the hex HMAC-SHA256 of the body). Delivery is tried 5 times with backoff, from a queue of 1000 at most: past that a notification is dropped and the log counts it. Deliveries waiting when the schedd stops are not kept."},
	{Name: NotifyWebhookKey, Type: TypeString, Secret: true,
		Doc: "File (mode 0600, 16 bytes at least) of the secret key the schedd signs webhook bodies with; required with POND_NOTIFY_WEBHOOK_URL. Give the receiver the same file: it is not a key of the pool's token authority, so a receiver holding it cannot make tokens."},
	{Name: JobMaxPids, Type: TypeInt, Default: "4096",
		Doc: "Most processes and threads a job may have at once, bounded by the pids controller of its cgroup (the agent as root, where cgroups can be written): a fork bomb fails to fork past it and the machine keeps running other jobs. 0 for no bound."},
	{Name: JobSupervisor, Type: TypeString, Default: "resident",
		Doc: "How the agent as root supervises its jobs, read at start: resident (a claim's jobs run one after the other under one supervisor process that stays for the claim, each job still in namespaces, cgroups and a credential of its own, killed and reaped before its end is reported) where the start-up probe finds it works, otherwise per-job; per-job (each job starts a supervisor of its own, the agent's binary again). The machine ad says which is used (PondJobSupervisor). Another value is refused at start; an agent not run as root always runs per-job."},
	{Name: CredentialAlarms, Type: TypeList, Default: "168h, 24h, 1h",
		Doc: "How long before each of the node's credentials expires (its token, its TLS certificate and, on a central manager, its pilot factory's delegated CA) the agent raises an alarm: for each threshold crossed, once, a WARN line in its log, the machine ad's PondCredentialExpiresSoon (with PondTokenExpiry, PondCertExpiry and PondFactoryCAExpiry, seconds since 1970, always there), the sea's credexp tag (sea members, and a warning of pondctl plan) and, with POND_NOTIFY_WEBHOOK_URL, a signed webhook (event credential_expires). A threshold no shorter than the credential's whole life raises none. 0 raises none."},
}

// IsSecret reports whether the configuration knob name holds a secret
// whose value must never be shown: a knob of the table marked Secret, or
// any knob whose name says it holds a password, a secret, a token or a key
// (POOL_PASSWORD, SEC_TOKEN, ..._KEY).
func IsSecret(name string) bool {
	if k, ok := Lookup(name); ok && k.Secret {
		return true
	}
	n := strings.ToUpper(name)
	for _, w := range []string{"PASSWORD", "SECRET", "TOKEN"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return strings.HasSuffix(n, "_KEY") || n == "KEY"
}

// Hidden returns a function that reports whether the knob name of a
// configuration must never be shown: IsSecret says so, or the
// configuration's POND_SECRET_KNOBS names it (in any case).
func Hidden(all map[string]string) func(name string) bool {
	named := map[string]bool{}
	for k, v := range all {
		if strings.EqualFold(k, SecretKnobs) {
			for _, n := range ParseList(v) {
				named[strings.ToUpper(n)] = true
			}
		}
	}
	return func(name string) bool { return IsSecret(name) || named[strings.ToUpper(name)] }
}

// All returns every knob, in the order docs/knobs.md lists them.
func All() []Knob { return slices.Clone(table[:]) }

// Lookup returns the knob named name (in any case).
func Lookup(name string) (Knob, bool) {
	for _, k := range table {
		if strings.EqualFold(k.Name, name) {
			return k, true
		}
	}
	return Knob{}, false
}

// Reader reads knobs through a lookup function, such as an agent's Knob
// method. Values are trimmed of white space; a knob not set, or set to
// nothing, has its default. Errors name the knob and its value.
type Reader func(name string) (string, bool)

// value returns the knob's value (or its default) after checking that the
// knob exists and is of type t.
func (r Reader) value(name string, t Type) (Knob, string, error) {
	k, ok := Lookup(name)
	if !ok {
		return k, "", fmt.Errorf("%s is not a knob of package knobs", name)
	}
	if k.Type != t {
		return k, "", fmt.Errorf("%s is of type %s, not %s", k.Name, k.Type, t)
	}
	v, ok := r(k.Name)
	if v = strings.TrimSpace(v); !ok || v == "" {
		v = k.Default
	}
	return k, v, nil
}

// String returns a string knob.
func (r Reader) String(name string) (string, error) {
	_, v, err := r.value(name, TypeString)
	return v, err
}

// Bool returns a boolean knob.
func (r Reader) Bool(name string) (bool, error) {
	k, v, err := r.value(name, TypeBool)
	if err != nil {
		return false, err
	}
	b, err := ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s = %q: %w", k.Name, v, err)
	}
	return b, nil
}

// Int returns a whole-number knob.
func (r Reader) Int(name string) (int, error) {
	k, v, err := r.value(name, TypeInt)
	if err != nil {
		return 0, err
	}
	n, err := ParseInt(v)
	if err == nil && k.Positive && n < 1 {
		err = fmt.Errorf("want a whole number of at least 1")
	}
	if err != nil {
		return 0, fmt.Errorf("%s = %q: %w", k.Name, v, err)
	}
	return n, nil
}

// Duration returns a duration knob.
func (r Reader) Duration(name string) (time.Duration, error) {
	k, v, err := r.value(name, TypeDuration)
	if err != nil {
		return 0, err
	}
	d, err := ParseDuration(v)
	if err == nil && k.Positive && d == 0 {
		err = fmt.Errorf("must be more than zero")
	}
	if err != nil {
		return 0, fmt.Errorf("%s = %q: %w", k.Name, v, err)
	}
	return d, nil
}

// List returns a list knob's items.
func (r Reader) List(name string) ([]string, error) {
	_, v, err := r.value(name, TypeList)
	return ParseList(v), err
}

// Expr returns a ClassAd expression knob's text, once it parses; empty
// when the knob is not set.
func (r Reader) Expr(name string) (string, error) {
	k, v, err := r.value(name, TypeExpr)
	if err != nil || v == "" {
		return v, err
	}
	if _, err := classad.ParseExpr(v); err != nil {
		return "", fmt.Errorf("%s = %q: %w", k.Name, v, err)
	}
	return v, nil
}

// ParseBool reads a boolean as the configuration file writes it: true,
// yes, on, t, y or 1, or false, no, off, f, n or 0, in any case; nothing
// is false.
func ParseBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "yes", "on", "t", "y", "1":
		return true, nil
	case "false", "no", "off", "f", "n", "0", "":
		return false, nil
	}
	return false, fmt.Errorf("want true or false")
}

// ParseInt reads a whole number in decimal.
func ParseInt(v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("want a whole number")
	}
	return n, nil
}

// ParseDuration reads a duration as Go writes it ("1.5s", "2m") or as a
// number of seconds, as HTCondor's knobs do ("30", "0.5"). Negative
// durations are refused.
func ParseDuration(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	d, err := time.ParseDuration(v)
	if err != nil {
		f, ferr := strconv.ParseFloat(v, 64)
		if ferr != nil || math.IsNaN(f) || math.Abs(f) > math.MaxInt64/float64(2*time.Second) {
			return 0, fmt.Errorf("want a duration such as 30s or a number of seconds")
		}
		d = time.Duration(f * float64(time.Second))
	}
	if d < 0 {
		return 0, fmt.Errorf("must not be negative")
	}
	return d, nil
}

// ParseList splits a list on commas and white space, as HTCondor reads
// lists such as DAEMON_LIST.
func ParseList(v string) []string {
	return strings.FieldsFunc(v, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
}

// Shown are the configuration file's knobs all as an agent shows them:
// those that hold a secret (knobs.Hidden: by their name, or named in
// POND_SECRET_KNOBS) are left out.
func Shown(all map[string]string) map[string]string {
	hidden := Hidden(all)
	out := make(map[string]string, len(all))
	for k, v := range all {
		if !hidden(k) {
			out[k] = v
		}
	}
	return out
}
