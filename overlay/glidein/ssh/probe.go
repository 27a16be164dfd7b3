package ssh

import (
	"crypto/ed25519"
	"crypto/rand"

	xssh "golang.org/x/crypto/ssh"
)

func generateProbeKey() (xssh.Signer, xssh.PublicKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	signer, err := xssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, nil, err
	}
	return signer, signer.PublicKey(), nil
}
