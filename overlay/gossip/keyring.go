package gossip

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/serf"

	"github.com/pond-htc/pond/overlay/api"
)

// readKeyring reads a keyring file: a JSON array of base64 keys, the primary
// key first (the format serf's own agent uses).
func readKeyring(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var encoded []string
	if err := json.Unmarshal(data, &encoded); err != nil {
		return nil, fmt.Errorf("keyring %s: %w", path, err)
	}
	if len(encoded) == 0 {
		return nil, fmt.Errorf("keyring %s: no keys", path)
	}
	keys := make([][]byte, 0, len(encoded))
	for i, e := range encoded {
		k, err := api.ParseGossipKey(e)
		if err != nil {
			return nil, fmt.Errorf("keyring %s: key %d: %w", path, i, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

func writeKeyring(path string, keys [][]byte) error {
	encoded := make([]string, len(keys))
	for i, k := range keys {
		encoded[i] = base64.StdEncoding.EncodeToString(k)
	}
	data, err := json.MarshalIndent(encoded, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// setupKeyring installs the keyring on mc: from the data dir's keyring file
// when there is one, else from cfg.EncryptKey (then written to the file so
// that rotations persist).
func setupKeyring(mc *memberlist.Config, sc *serf.Config, cfg Config) error {
	var keys [][]byte
	path := ""
	if cfg.DataDir != "" {
		path = filepath.Join(cfg.DataDir, KeyringFile)
		k, err := readKeyring(path)
		switch {
		case err == nil:
			keys = k
		case errors.Is(err, os.ErrNotExist):
		default:
			return err
		}
	}
	if cfg.EncryptKey != "" {
		k, err := api.ParseGossipKey(cfg.EncryptKey)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(keys, func(x []byte) bool { return string(x) == string(k) }) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	kr, err := memberlist.NewKeyring(keys, keys[0])
	if err != nil {
		return fmt.Errorf("keyring: %w", err)
	}
	mc.Keyring = kr
	if path != "" {
		if err := writeKeyring(path, keys); err != nil {
			return fmt.Errorf("writing keyring: %w", err)
		}
		sc.KeyringFile = path
	}
	return nil
}

// Encrypted reports whether gossip is encrypted.
func (s *Sea) Encrypted() bool { return s.Serf().EncryptionEnabled() }

func keyResult(r *serf.KeyResponse, err error, op string) (*api.KeyResult, error) {
	if r == nil {
		if err == nil {
			err = errors.New("no response")
		}
		return nil, fmt.Errorf("sea: %s: %w", op, err)
	}
	res := &api.KeyResult{NumNodes: r.NumNodes, NumResp: r.NumResp, NumErr: r.NumErr,
		Messages: r.Messages, Keys: r.Keys, PrimaryKeys: r.PrimaryKeys}
	if err != nil {
		return res, fmt.Errorf("sea: %s: %w", op, err)
	}
	return res, nil
}

// ErrNotEncrypted is returned by the keyring operations of a sea whose
// gossip is not encrypted: it has no keyring to manage.
var ErrNotEncrypted = errors.New("gossip in this sea is not encrypted, so it has no keyring: start its agents with -encrypt KEY (pondctl sea keygen makes one)")

// keyAttempts bounds how many times a key operation is sent. Serf
// spreads it by gossip, which now and then misses a member; every
// operation is idempotent, so it is sent again until every live member
// has answered.
const keyAttempts = 5

// keyOptions asks serf to relay each answer through two more members, so
// that an answer lost on the way back is not taken for a missed member.
var keyOptions = serf.KeyRequestOptions{RelayFactor: 2}

// keyOp runs a key operation until every live member answers without
// error, or keyAttempts times.
func (s *Sea) keyOp(op string, run func(*serf.KeyManager) (*serf.KeyResponse, error)) (*api.KeyResult, error) {
	if !s.Encrypted() {
		return nil, fmt.Errorf("sea: %s: %w", op, ErrNotEncrypted)
	}
	var (
		r   *serf.KeyResponse
		err error
	)
	for range keyAttempts {
		r, err = run(s.Serf().KeyManager())
		if r == nil || (err != nil && r.NumResp == r.NumNodes) {
			break // refused, not missed
		}
		if err == nil {
			break
		}
	}
	return keyResult(r, err, op)
}

// InstallKey adds key to the keyring of every node in the sea.
func (s *Sea) InstallKey(key string) (*api.KeyResult, error) {
	if !s.Encrypted() {
		return nil, fmt.Errorf("sea: install key: %w", ErrNotEncrypted)
	}
	if _, err := api.ParseGossipKey(key); err != nil {
		return nil, fmt.Errorf("sea: install key: %w", err)
	}
	return s.keyOp("install key", func(km *serf.KeyManager) (*serf.KeyResponse, error) {
		return km.InstallKeyWithOptions(key, &keyOptions)
	})
}

// UseKey makes an installed key the primary (encrypting) key on every node.
func (s *Sea) UseKey(key string) (*api.KeyResult, error) {
	return s.keyOp("use key", func(km *serf.KeyManager) (*serf.KeyResponse, error) {
		return km.UseKeyWithOptions(key, &keyOptions)
	})
}

// RemoveKey removes a non-primary key from every node's keyring. It first
// makes sure that every live node answers and that none still encrypts
// with the key: such a node could no longer talk to the others.
func (s *Sea) RemoveKey(key string) (*api.KeyResult, error) {
	list, err := s.ListKeys()
	if err != nil {
		return list, fmt.Errorf("sea: remove key: cannot confirm that no node still uses it: %w", err)
	}
	if n := list.PrimaryKeys[key]; n > 0 {
		return nil, fmt.Errorf("sea: remove key: %d of %d nodes still encrypt with it; make another key primary first (pondctl sea keys use KEY)", n, list.NumNodes)
	}
	return s.keyOp("remove key", func(km *serf.KeyManager) (*serf.KeyResponse, error) {
		return km.RemoveKeyWithOptions(key, &keyOptions)
	})
}

// ListKeys asks every node which keys it holds.
func (s *Sea) ListKeys() (*api.KeyResult, error) {
	return s.keyOp("list keys", func(km *serf.KeyManager) (*serf.KeyResponse, error) {
		return km.ListKeysWithOptions(&keyOptions)
	})
}
