// Package cedartest is the client side of CEDAR's DC_AUTHENTICATE handshake
// with FS authentication, for tests and benchmarks that drive pond's CEDAR
// servers over a real socket without HTCondor's own client. It speaks what
// HTCondor's client sends: a security policy asking for authentication,
// integrity and encryption with AES, the method-mask exchange, FS (the
// client creates the directory the server names, proving the uid of the
// process), the ECDH key exchange and the post-authentication ad.
package cedartest

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"golang.org/x/crypto/hkdf"

	"github.com/pond-htc/pond/condor/cedar"
	"github.com/pond-htc/pond/condor/classad"
)

// Session is what the server's post-authentication ad said.
type Session struct {
	Sid        string // the session id
	User       string // who the server proved the client to be, user@domain
	ReturnCode string // AUTHORIZED or DENIED
}

// ErrDenied marks a command the server refused for the proven identity.
var ErrDenied = errors.New("cedartest: the server denied the command")

// Dial connects to addr, runs DC_AUTHENTICATE for command with FS, and
// returns the sealed stream on which the command's own messages follow.
// A command the server denies returns the session with ErrDenied.
func Dial(ctx context.Context, addr string, command int) (*cedar.Stream, *Session, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("dialing %s: %w", addr, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	} else {
		_ = conn.SetDeadline(time.Now().Add(time.Minute))
	}
	st := cedar.NewStream(conn, nil, cedar.Limits{})
	sess, err := Handshake(st, command)
	if err != nil && !errors.Is(err, ErrDenied) {
		conn.Close()
		return nil, nil, err
	}
	return st, sess, err
}

// Handshake runs the client side of DC_AUTHENTICATE for command on st.
func Handshake(st *cedar.Stream, command int) (*Session, error) {
	priv, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	if err := st.PutInt(cedar.DCAuthenticate); err != nil {
		return nil, err
	}
	pol := classad.NewAd()
	pol.SetInt("Command", int64(command))
	pol.SetString("AuthMethods", "FS")
	pol.SetString("CryptoMethods", "AES")
	pol.SetString("Authentication", "REQUIRED")
	pol.SetString("Integrity", "REQUIRED")
	pol.SetString("Encryption", "REQUIRED")
	pol.SetString("NewSession", "YES")
	pol.SetString("Enact", "NO")
	pol.SetString("ECDHPublicKey", base64.StdEncoding.EncodeToString(priv.PublicKey().Bytes()))
	if err := st.PutAd(pol, nil); err != nil {
		return nil, err
	}
	if err := st.EndMessage(); err != nil {
		return nil, fmt.Errorf("sending the security policy: %w", err)
	}
	reply, err := st.GetAd()
	if err != nil {
		return nil, fmt.Errorf("reading the server's policy: %w", err)
	}
	if err := st.EndRead(); err != nil {
		return nil, err
	}
	peerB64, _ := reply.EvalAttr("ECDHPublicKey").StringValue()
	if peerB64 == "" {
		methods, _ := reply.EvalAttr("AuthMethods").StringValue()
		return nil, fmt.Errorf("the server refused the policy (it offers %q)", methods)
	}
	raw, err := base64.StdEncoding.DecodeString(peerB64)
	if err != nil {
		return nil, fmt.Errorf("the server's ECDH key: %w", err)
	}
	peer, err := ecdh.P256().NewPublicKey(raw)
	if err != nil {
		return nil, fmt.Errorf("the server's ECDH key: %w", err)
	}

	// The method mask: FS only.
	if err := st.PutInt(cedar.BitFS); err != nil {
		return nil, err
	}
	if err := st.EndMessage(); err != nil {
		return nil, err
	}
	pick, err := st.GetInt()
	if err != nil {
		return nil, fmt.Errorf("reading the server's method: %w", err)
	}
	if err := st.EndRead(); err != nil {
		return nil, err
	}
	if pick != cedar.BitFS {
		return nil, fmt.Errorf("the server picked method %d, not FS", pick)
	}
	if err := fs(st); err != nil {
		return nil, err
	}
	// The server's key message: 0, the key comes from ECDH.
	if _, err := st.GetInt(); err != nil {
		return nil, fmt.Errorf("reading the server's key message: %w", err)
	}
	if err := st.EndRead(); err != nil {
		return nil, err
	}
	shared, err := priv.ECDH(peer)
	if err != nil {
		return nil, fmt.Errorf("ECDH: %w", err)
	}
	key := make([]byte, cedar.KeySize)
	if _, err := io.ReadFull(hkdf.New(sha256.New, shared, []byte("htcondor"), []byte("keygen")), key); err != nil {
		return nil, err
	}
	if err := st.SetKey(key); err != nil {
		return nil, err
	}
	st.SetCryptoMode(true)
	post, err := st.GetAd()
	if err != nil {
		return nil, fmt.Errorf("reading the session ad: %w", err)
	}
	if err := st.EndRead(); err != nil {
		return nil, err
	}
	sess := &Session{}
	sess.Sid, _ = post.EvalAttr("Sid").StringValue()
	sess.User, _ = post.EvalAttr("User").StringValue()
	sess.ReturnCode, _ = post.EvalAttr("ReturnCode").StringValue()
	if !strings.EqualFold(sess.ReturnCode, "AUTHORIZED") {
		return sess, fmt.Errorf("%w: %s for %s (command %d)", ErrDenied, sess.ReturnCode, sess.User, command)
	}
	return sess, nil
}

// fs is the client side of FS: create the directory the server names,
// say whether that worked, read the verdict and remove the directory.
func fs(st *cedar.Stream) error {
	path, err := st.GetString()
	if err != nil {
		return fmt.Errorf("reading the FS directory name: %w", err)
	}
	if err := st.EndRead(); err != nil {
		return err
	}
	made := int64(0)
	if err := os.Mkdir(path, 0o700); err != nil {
		made = -1
	}
	defer os.Remove(path)
	if err := st.PutInt(made); err != nil {
		return err
	}
	if err := st.EndMessage(); err != nil {
		return err
	}
	ok, err := st.GetInt()
	if err != nil {
		return fmt.Errorf("reading the FS verdict: %w", err)
	}
	if err := st.EndRead(); err != nil {
		return err
	}
	if made != 0 {
		return fmt.Errorf("FS: cannot create %s", path)
	}
	if ok != 0 {
		return errors.New("FS: the server refused the directory")
	}
	return nil
}
