package auth

import (
	"fmt"
	"strings"

	"github.com/golang-jwt/jwt/v5"
)

// ReadClaims returns what a token says without checking its signature,
// issuer or times: for a holder reading its own token (whom it names, when
// it expires), never to trust a caller's. It fails on a token that is not
// a JWT.
func ReadClaims(token string) (*Claims, error) {
	var jc jwtClaims
	if _, _, err := jwt.NewParser().ParseUnverified(token, &jc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	c := &Claims{Issuer: jc.Issuer, Subject: jc.Subject, ID: jc.ID, CentralManager: jc.CentralManager, PondID: jc.PondID}
	if jc.IssuedAt != nil {
		c.IssuedAt = jc.IssuedAt.Time
	}
	if jc.ExpiresAt != nil {
		c.Expires = jc.ExpiresAt.Time
	}
	for _, s := range strings.Fields(jc.Scope) {
		if sc, err := ParseScope(s); err == nil {
			c.Scopes = append(c.Scopes, sc)
		}
	}
	return c, nil
}
