package auth

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"sync"
	"time"
)

// verifiedMax bounds the tokens a Verifier remembers as verified: a few
// per node and user of a pool, far fewer than this.
const verifiedMax = 4096

// verifiedToken is what Verify found of a token whose signature it
// checked: enough to check again all but the signature.
type verifiedToken struct {
	// claims are the token's claims as Verify returned them.
	claims Claims
	// kid names the key that signed the token and key is that key, as
	// trusted when the signature was checked.
	kid string
	key ed25519.PublicKey
	// scope is the "scope" claim as written, which a delegated key's
	// limits are checked against.
	scope string
	// notBefore is the "nbf" claim, zero without one.
	notBefore time.Time
}

// verifiedTokens are the tokens a Verifier checked the signatures of, by
// the SHA-256 of the token: at most verifiedMax, each until it expires.
type verifiedTokens struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]*verifiedToken
}

// remembered returns the claims of the token whose hash is sum when its
// signature was checked before and everything else about it still holds
// at now: its issuer, its times, the key that signed it still trusted (and
// the token within that key's limits if it is a delegated key). A token
// that fails any of them is forgotten, to be verified in full; nil then
// and for a token not remembered. Revocation is the caller's to check.
func (v *Verifier) remembered(sum [sha256.Size]byte, now time.Time) *Claims {
	v.verified.mu.Lock()
	t := v.verified.m[sum]
	v.verified.mu.Unlock()
	if t == nil {
		return nil
	}
	c := &t.claims
	// As the token's parser checks them: the expiry, the time of issue
	// and "nbf" with the leeway, the issuer when one is required.
	ok := now.Before(c.Expires.Add(v.Leeway)) &&
		!now.Before(c.IssuedAt.Add(-v.Leeway)) &&
		(t.notBefore.IsZero() || !now.Before(t.notBefore.Add(-v.Leeway))) &&
		(v.Issuer == "" || c.Issuer == v.Issuer)
	if ok {
		k := v.trusted(t.kid)
		ok = k != nil && bytes.Equal(k, t.key) && v.withinLimits(t.kid, c, t.scope) == nil
	}
	if !ok {
		v.forget(sum)
		return nil
	}
	return c.clone()
}

// remember records t, a token whose signature was just checked, by sum.
// When verifiedMax tokens are remembered, the expired ones are forgotten
// and, if that is not enough, an eighth of the rest, any of them.
func (v *Verifier) remember(sum [sha256.Size]byte, t *verifiedToken) {
	if t.key == nil {
		return
	}
	v.verified.mu.Lock()
	defer v.verified.mu.Unlock()
	if v.verified.m == nil {
		v.verified.m = make(map[[sha256.Size]byte]*verifiedToken)
	}
	if len(v.verified.m) >= verifiedMax {
		now := time.Now()
		if v.Now != nil {
			now = v.Now()
		}
		for k, old := range v.verified.m {
			if !now.Before(old.claims.Expires.Add(v.Leeway)) {
				delete(v.verified.m, k)
			}
		}
		for k := range v.verified.m {
			if len(v.verified.m) < verifiedMax-verifiedMax/8 {
				break
			}
			delete(v.verified.m, k)
		}
	}
	v.verified.m[sum] = t
}

// forget forgets the token whose hash is sum.
func (v *Verifier) forget(sum [sha256.Size]byte) {
	v.verified.mu.Lock()
	delete(v.verified.m, sum)
	v.verified.mu.Unlock()
}
