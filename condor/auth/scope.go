// Package auth is how pond's daemons and agents tell who is calling and
// what the caller may do: short-lived, scoped tokens in the form of
// HTCondor's IDTOKENS (a JWT whose "scope" claim lists authorization levels
// such as "condor:/READ"), signed with an Ed25519 key so that the nodes
// that check a token hold only the public half and cannot make one.
//
// A SigningKey makes tokens (Mint); a Verifier, given the public keys it
// trusts, checks them (Verify) and a token's Claims say whether it grants a
// Scope (Allows). Require wraps an HTTP handler so that a request without a
// token gets 401 and one without the scope it needs gets 403.
package auth

import (
	"fmt"
	"slices"
	"strings"
)

// Scope is an authorization level, spelled as HTCondor's IDTOKENS spell
// them in a token's scope claim ("condor:/READ").
type Scope string

// Authorization levels. Those of HTCondor keep its names; those of the
// sea are pond's own.
const (
	// Read lets the caller query: the queue, the collector, the sea's
	// members and tree queries.
	Read Scope = "condor:/READ"
	// Write lets the caller submit jobs and manage its own.
	Write Scope = "condor:/WRITE"
	// Administrator lets the caller manage every job and reconfigure the
	// daemons.
	Administrator Scope = "condor:/ADMINISTRATOR"
	// Daemon is what the daemons of a pool grant each other: claims, job
	// reports, matches.
	Daemon Scope = "condor:/DAEMON"
	// AdvertiseStartd lets a startd advertise its slots to a collector.
	AdvertiseStartd Scope = "condor:/ADVERTISE_STARTD"
	// AdvertiseSchedd lets a schedd advertise itself and its submitters.
	AdvertiseSchedd Scope = "condor:/ADVERTISE_SCHEDD"
	// AdvertiseMaster lets a master advertise itself.
	AdvertiseMaster Scope = "condor:/ADVERTISE_MASTER"
	// Negotiator lets a negotiator send matches to schedds.
	Negotiator Scope = "condor:/NEGOTIATOR"
	// SeaRead lets the caller read the sea: members, an agent's
	// description, tree queries.
	SeaRead Scope = "pond:/SEA_READ"
	// SeaWrite lets the caller change the sea: invitations into ponds,
	// releases, tags.
	SeaWrite Scope = "pond:/SEA_WRITE"
	// SeaAdmin lets the caller manage the sea's gossip keys, tokens, and
	// stop agents.
	SeaAdmin Scope = "pond:/SEA_ADMIN"
)

// scopes lists the known scopes, in the order they are printed.
var scopes = []Scope{Read, Write, Administrator, Daemon, AdvertiseStartd, AdvertiseSchedd, AdvertiseMaster, Negotiator,
	SeaRead, SeaWrite, SeaAdmin}

// implies says which scopes a scope grants besides itself, as HTCondor's
// levels nest: an administrator may also write, a writer also read; a
// daemon may advertise and do what the daemons of a pool do for each
// other. It is fixed: nothing changes it at run time.
var implies = map[Scope][]Scope{
	Write:         {Read},
	Administrator: {Write, Read},
	Daemon:        {Read, Write, AdvertiseStartd, AdvertiseSchedd, AdvertiseMaster, Negotiator},
	SeaWrite:      {SeaRead},
	SeaAdmin:      {SeaWrite, SeaRead},
}

// ParseScope checks the name of a scope: "READ" (an HTCondor level, short
// or in full, "condor:/READ") or "SEA_WRITE" ("pond:/SEA_WRITE").
func ParseScope(s string) (Scope, error) {
	name := strings.ToUpper(strings.TrimSpace(s))
	for _, sc := range scopes {
		if name == strings.ToUpper(string(sc)) || name == sc.Name() {
			return sc, nil
		}
	}
	names := make([]string, len(scopes))
	for i, sc := range scopes {
		names[i] = sc.Name()
	}
	return "", fmt.Errorf("unknown scope %q: want one of %s", s, strings.Join(names, ", "))
}

// Name is the scope's level without its prefix ("READ", "SEA_WRITE").
func (s Scope) Name() string {
	_, name, _ := strings.Cut(string(s), ":/")
	return name
}

// grants reports whether holding s grants need.
func (s Scope) grants(need Scope) bool {
	return s == need || slices.Contains(implies[s], need)
}
