package auth

import (
	"errors"
	"fmt"
)

// ErrNoGrant is an invitation or release whose token is not a pond grant
// that covers it.
var ErrNoGrant = errors.New("not covered by a pond grant")

// Pond grants. An invitation moves a node's CONDOR_HOST, and with it where
// the node's daemons send their credentials, so a node takes one only
// from a token that the sea's authority bound to the central manager (and,
// when the grant names one, to the pond): its "pond_cm" claim. pondctl
// mints such a grant for each pond it applies; a central manager running
// a pond policy holds one bound to its own address, issued with its node
// token. Anyone else, even a holder of SEA_ADMIN, cannot make a node change
// its central manager.

// MayInvite reports whether the claims let their holder invite a node into
// pond pondID whose central manager is cm: they grant SEA_WRITE and bind
// that central manager (and that pond, if they name one).
func (c *Claims) MayInvite(pondID, cm string) error {
	if !c.Allows(SeaWrite) {
		return fmt.Errorf("%w: %s's token does not grant %s", ErrNoGrant, c.Subject, SeaWrite.Name())
	}
	if c.CentralManager == "" {
		return fmt.Errorf("%w: %s's token names no central manager, so it cannot move a node to %s", ErrNoGrant, c.Subject, cm)
	}
	if c.CentralManager != cm {
		return fmt.Errorf("%w: %s's token is bound to central manager %s, not %s", ErrNoGrant, c.Subject, c.CentralManager, cm)
	}
	if c.PondID != "" && c.PondID != pondID {
		return fmt.Errorf("%w: %s's token is bound to pond %s, not %s", ErrNoGrant, c.Subject, c.PondID, pondID)
	}
	return nil
}

// MayRelease reports whether the claims let their holder release a member
// of pond pondID under central manager cm: they grant SEA_WRITE and, when
// they are a pond grant, bind that pond or that central manager.
func (c *Claims) MayRelease(pondID, cm string) error {
	if !c.Allows(SeaWrite) {
		return fmt.Errorf("%w: %s's token does not grant %s", ErrNoGrant, c.Subject, SeaWrite.Name())
	}
	if c.PondID != "" && c.PondID != pondID {
		return fmt.Errorf("%w: %s's token is bound to pond %s, not %s", ErrNoGrant, c.Subject, c.PondID, pondID)
	}
	if c.CentralManager != "" && c.CentralManager != cm {
		return fmt.Errorf("%w: %s's token is bound to central manager %s, not %s", ErrNoGrant, c.Subject, c.CentralManager, cm)
	}
	return nil
}

// FindGrant returns the token a client of a working directory invites
// nodes into pond pondID with, under the central manager at API address
// cm: POND_TOKEN or POND_TOKEN_FILE's token when set (it must then be a
// grant that covers the pond), else, when workDir has an authority, a
// ten-minute grant of its own; else "".
func FindGrant(getenv func(string) string, workDir, pondID, cm string) (string, error) {
	if getenv("POND_TOKEN") != "" || getenv("POND_TOKEN_FILE") != "" {
		return FindToken(getenv, workDir)
	}
	a, err := existingAuthority(getenv, workDir)
	if a == nil || err != nil {
		return "", err
	}
	return a.MintGrant(osUser(getenv), pondID, cm, ownTokenLifetime)
}
