package cedar

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"golang.org/x/crypto/hkdf"

	"github.com/pond-htc/pond/condor/auth"
	"github.com/pond-htc/pond/condor/classad"
)

// IDTokens authenticates a client by an HTCondor-format token (IDTOKENS):
// the server side of HTCondor's token exchange, AKEP2 keyed by the token's
// signature. The client sends the token without its signature; the server
// checks the token (trusted key, trust domain, expiry, revocation) and
// computes the signature it must carry; each side then proves to the
// other that it holds the same signature, by a MAC over both sides'
// random nonces, so that a token is never sent whole and a stolen
// header.payload is worth nothing.
type IDTokens struct {
	// Verifier checks the tokens; tokens of another trust domain or key
	// are refused.
	Verifier *auth.HTCondorVerifier
}

// PolicyMethod is a Method that tells clients something before they
// authenticate, in the security policy the server answers with.
type PolicyMethod interface {
	Method
	Policy(reply *classad.Ad)
}

// Policy implements PolicyMethod: the trust domain and the IDs of the keys
// the server trusts, by which HTCondor's clients pick the token to present
// among those they hold.
func (m *IDTokens) Policy(reply *classad.Ad) {
	reply.SetString("TrustDomain", m.trustDomain())
	if m.Verifier != nil {
		ids := m.Verifier.KeyIDs()
		sort.Strings(ids)
		reply.SetString("IssuerKeys", strings.Join(ids, ","))
	}
}

// Name implements Method. HTCondor's clients offer the method as "TOKEN",
// whichever of its names (IDTOKENS, TOKEN) their configuration gives.
func (*IDTokens) Name() string { return "TOKEN" }

// Bit implements Method.
func (*IDTokens) Bit() int { return BitToken }

// Limits and status codes of the exchange, as HTCondor's
// condor_auth_passwd has them.
const (
	pwNonceLen   = 256  // AUTH_PW_KEY_LEN: the nonces rA and rB
	pwMaxNameLen = 1024 // AUTH_PW_MAX_NAME_LEN
	pwMaxMAC     = 64   // EVP_MAX_MD_SIZE
	pwKeyLen     = 32   // the keys K and K' of the token version
	pwOK         = 0
	pwError      = -1
	pwAbort      = 1
)

// pwSeedA is the fixed seed HTCondor's exchange prefixes to the token to
// derive K: 256 bytes chosen once at random by HTCondor's authors.
var pwSeedA = [pwNonceLen]byte{
	62, 74, 80, 32, 71, 213, 244, 229, 220, 124, 105, 187, 82, 16, 203, 182, 22, 122, 221, 128, 132, 247, 221, 158,
	243, 173, 44, 202, 113, 210, 131, 221, 17, 74, 79, 187, 123, 30, 233, 10, 223, 168, 98, 196, 67, 4, 222, 84,
	115, 163, 23, 47, 115, 92, 44, 187, 110, 119, 91, 93, 64, 211, 159, 172, 232, 115, 24, 37, 35, 249, 37, 43,
	98, 59, 224, 212, 177, 103, 163, 168, 4, 12, 172, 254, 233, 238, 61, 160, 44, 10, 187, 244, 217, 216, 177, 31,
	137, 0, 76, 148, 57, 35, 206, 93, 149, 8, 187, 63, 4, 188, 102, 163, 250, 32, 161, 58, 65, 108, 94, 111,
	78, 13, 49, 135, 212, 95, 199, 131, 53, 197, 228, 133, 219, 44, 90, 55, 23, 151, 12, 194, 110, 123, 107, 157,
	25, 101, 180, 122, 103, 223, 119, 163, 31, 34, 240, 138, 108, 11, 165, 112, 151, 162, 26, 156, 167, 198, 4, 36,
	247, 39, 57, 171, 92, 185, 21, 164, 24, 91, 209, 9, 130, 142, 53, 228, 33, 8, 171, 133, 28, 8, 163, 223,
	253, 224, 227, 176, 111, 61, 57, 56, 205, 173, 109, 246, 239, 154, 111, 109, 194, 203, 116, 240, 34, 133, 18, 235,
	122, 61, 104, 35, 1, 6, 132, 176, 21, 193, 42, 195, 1, 76, 79, 159, 147, 142, 56, 77, 173, 30, 59, 215,
	69, 255, 140, 20, 31, 215, 11, 70, 91, 168, 175, 93, 27, 152, 180, 177,
}

// pwHello is the client's first message: its status, its name (the
// token's subject), the token without its signature, and its nonce rA.
type pwHello struct {
	status int64
	name   string
	token  string
	ra     []byte
}

// pwProof is the client's last message: its status, its name again, the
// server's nonce rB and the MAC over them.
type pwProof struct {
	status int64
	name   string
	rb     []byte
	mac    []byte
}

// readBytes reads a length and that many bytes, at most max.
func readBytes(s *Stream, what string, max int) ([]byte, error) {
	n, err := s.GetInt()
	if err != nil {
		return nil, fmt.Errorf("%s length: %w", what, err)
	}
	if n < 0 || n > int64(max) {
		return nil, fmt.Errorf("%w: %s of %d bytes (at most %d)", ErrDecode, what, n, max)
	}
	b, err := s.GetBytes(int(n))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return b, nil
}

// readName reads a name's length and the name, which must agree.
func readName(s *Stream) (string, error) {
	n, err := s.GetInt()
	if err != nil {
		return "", fmt.Errorf("name length: %w", err)
	}
	name, err := s.GetString()
	if err != nil {
		return "", fmt.Errorf("name: %w", err)
	}
	if len(name) > pwMaxNameLen || int64(len(name)) != n {
		return "", fmt.Errorf("%w: a name of %d bytes said to have %d (at most %d)", ErrDecode, len(name), n, pwMaxNameLen)
	}
	return name, nil
}

func readHello(s *Stream) (*pwHello, error) {
	var h pwHello
	var err error
	if h.status, err = s.GetInt(); err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	if h.name, err = readName(s); err != nil {
		return nil, err
	}
	if h.token, err = s.GetString(); err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	if len(h.token) > auth.MaxHTCondorToken {
		return nil, fmt.Errorf("%w: a token of %d bytes (at most %d)", ErrDecode, len(h.token), auth.MaxHTCondorToken)
	}
	if h.ra, err = readBytes(s, "nonce", pwNonceLen); err != nil {
		return nil, err
	}
	if err := s.EndRead(); err != nil {
		return nil, err
	}
	return &h, nil
}

func readProof(s *Stream) (*pwProof, error) {
	var p pwProof
	var err error
	if p.status, err = s.GetInt(); err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	if p.name, err = readName(s); err != nil {
		return nil, err
	}
	if p.rb, err = readBytes(s, "nonce", pwNonceLen); err != nil {
		return nil, err
	}
	if p.mac, err = readBytes(s, "MAC", pwMaxMAC); err != nil {
		return nil, err
	}
	if err := s.EndRead(); err != nil {
		return nil, err
	}
	return &p, nil
}

// pwMAC is the exchange's MAC: HMAC-SHA1 keyed with K.
func pwMAC(k []byte, parts ...[]byte) []byte {
	m := hmac.New(sha1.New, k)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// pwKey derives K from the token's signature and its signed part.
func pwKey(sig []byte, signed string) []byte {
	salt := append(pwSeedA[:len(pwSeedA):len(pwSeedA)], signed...)
	k := make([]byte, pwKeyLen)
	if _, err := io.ReadFull(hkdf.New(sha256.New, sig, salt, []byte("master ka")), k); err != nil {
		panic("hkdf: " + err.Error()) // 32 bytes of HKDF-SHA256 cannot fail
	}
	return k
}

// Authenticate implements Method.
func (m *IDTokens) Authenticate(ctx context.Context, s *Stream) (*Identity, error) {
	hello, err := readHello(s)
	if err != nil {
		return nil, fmt.Errorf("reading the client's token: %w", err)
	}
	// What went wrong on this side; the exchange runs to its end all the
	// same, as the client expects, with an error status in place of data.
	var fail error
	var claims *auth.Claims
	var k []byte
	switch {
	case hello.status != pwOK:
		fail = errors.New("the client has no usable token")
	case len(hello.ra) != pwNonceLen:
		fail = fmt.Errorf("the client's nonce has %d bytes, not %d", len(hello.ra), pwNonceLen)
	case m.Verifier == nil:
		fail = errors.New("no token verifier")
	default:
		var sig []byte
		sig, claims, err = m.Verifier.Sign(hello.token)
		switch {
		case err != nil:
			fail = err
		case hello.name != tokenSubject(hello.token):
			fail = fmt.Errorf("the client names itself %q, its token another", clip(hello.name))
		default:
			k = pwKey(sig, hello.token)
		}
	}
	server := "condor_pool@" + m.trustDomain()
	var rb []byte
	if fail == nil {
		rb = make([]byte, pwNonceLen)
		if _, err := rand.Read(rb); err != nil {
			return nil, err
		}
	}
	if err := m.sendChallenge(s, hello, server, rb, k, fail); err != nil {
		return nil, err
	}
	proof, err := readProof(s)
	if err != nil {
		return nil, fmt.Errorf("reading the client's proof: %w", err)
	}
	if fail != nil {
		return nil, fail
	}
	switch {
	case proof.status != pwOK:
		// The client found the server's MAC wrong: its token's signature
		// is not the one this server computes (tampered, or another
		// key of the same name).
		return nil, errors.New("the client's token does not carry the signature of a trusted key")
	case proof.name != hello.name || !hmac.Equal(proof.rb, rb):
		s.Conn().Close()
		return nil, errors.New("the client's proof names another client or nonce")
	case !hmac.Equal(proof.mac, pwMAC(k, []byte(hello.name), []byte{0}, rb)):
		// The client thinks it succeeded and waits for the key: there is
		// no way to tell it otherwise but to hang up.
		s.Conn().Close()
		return nil, errors.New("the client's proof does not verify")
	}
	user, domain, _ := strings.Cut(hello.name, "@")
	return &Identity{Method: "IDTOKENS", User: user, Domain: domain, Claims: claims}, nil
}

// sendChallenge sends the server's message: its status, the client's name,
// its own, both nonces, and the MAC over them; or, when fail is set, an
// error status and nothing.
func (m *IDTokens) sendChallenge(s *Stream, hello *pwHello, server string, rb, k []byte, fail error) error {
	if fail != nil {
		for _, v := range []int64{pwError, 0} {
			if err := s.PutInt(v); err != nil {
				return err
			}
		}
		if err := s.PutString(""); err != nil {
			return err
		}
		if err := s.PutInt(0); err != nil {
			return err
		}
		if err := s.PutString(""); err != nil {
			return err
		}
		for range 3 {
			if err := s.PutInt(0); err != nil {
				return err
			}
		}
		return s.EndMessage()
	}
	mac := pwMAC(k, []byte(hello.name+" "+server), []byte{0}, hello.ra, rb)
	puts := []func() error{
		func() error { return s.PutInt(pwOK) },
		func() error { return s.PutInt(int64(len(hello.name))) },
		func() error { return s.PutString(hello.name) },
		func() error { return s.PutInt(int64(len(server))) },
		func() error { return s.PutString(server) },
		func() error { return s.PutInt(int64(len(hello.ra))) },
		func() error { return s.PutBytes(hello.ra) },
		func() error { return s.PutInt(int64(len(rb))) },
		func() error { return s.PutBytes(rb) },
		func() error { return s.PutInt(int64(len(mac))) },
		func() error { return s.PutBytes(mac) },
	}
	for _, put := range puts {
		if err := put(); err != nil {
			return err
		}
	}
	return s.EndMessage()
}

func (m *IDTokens) trustDomain() string {
	if m.Verifier != nil && m.Verifier.Issuer != "" {
		return m.Verifier.Issuer
	}
	return "pond"
}

// tokenSubject is the "sub" of a token the verifier accepted.
func tokenSubject(signed string) string {
	sub, _ := auth.HTCondorTokenSubject(signed)
	return sub
}
