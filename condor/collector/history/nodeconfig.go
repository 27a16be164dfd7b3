package history

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// MaxConfigText bounds a node's advertised configuration (the JSON of
// its knobs): a larger one is not recorded.
const MaxConfigText = 256 << 10

// ConfigHash is the hash a node advertises of its configuration's text
// (PondConfigHash in its master ad).
func ConfigHash(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:16])
}

type nodeConfig struct {
	node, hash, text, who string
}

// ObserveNodeConfig records a node's configuration (text, the JSON object
// of its knobs by name, as daemon.EffectiveConfig makes it; hash, its
// ConfigHash): when it differs from the configuration last recorded for
// the node, a ConfigChange for each knob added, removed or changed, by
// who. The first configuration of a node is its baseline: no change. It
// never blocks; a text that is too large or not such an object is
// refused with an error.
func (s *Store) ObserveNodeConfig(node, hash, text, who string) error {
	if len(text) > MaxConfigText {
		return fmt.Errorf("history: node %s's configuration is %d bytes, over %d", node, len(text), MaxConfigText)
	}
	s.mu.Lock()
	same := s.configs[node] == hash
	s.mu.Unlock()
	if same {
		return nil
	}
	if ConfigHash(text) != hash {
		return fmt.Errorf("history: node %s's configuration does not have the hash it advertises", node)
	}
	if _, err := parseKnobs(text); err != nil {
		return fmt.Errorf("history: node %s's configuration: %w", node, err)
	}
	s.mu.Lock()
	if s.configs[node] == hash {
		s.mu.Unlock()
		return nil
	}
	s.configs[node] = hash
	s.mu.Unlock()
	s.send(event{node: &nodeConfig{node: node, hash: hash, text: text, who: who}, at: s.opts.Now()})
	return nil
}

// parseKnobs reads a configuration's text: a JSON object of strings.
func parseKnobs(text string) (map[string]string, error) {
	var knobs map[string]string
	if err := json.Unmarshal([]byte(text), &knobs); err != nil {
		return nil, fmt.Errorf("not a JSON object of knobs: %w", err)
	}
	if knobs == nil {
		return nil, errors.New("not a JSON object of knobs: null")
	}
	return knobs, nil
}

// DiffKnobs returns the changes from the knobs old to new, by knob name
// (in any case), sorted: a knob added has Old "", one removed New "".
func DiffKnobs(old, new map[string]string) []ConfigChange {
	up := func(m map[string]string) map[string][2]string {
		out := make(map[string][2]string, len(m))
		for k, v := range m {
			out[strings.ToUpper(k)] = [2]string{k, v}
		}
		return out
	}
	o, n := up(old), up(new)
	var out []ConfigChange
	for k, nv := range n {
		if ov, ok := o[k]; !ok || ov[1] != nv[1] {
			out = append(out, ConfigChange{Knob: nv[0], Old: ov[1], New: nv[1]})
		}
	}
	for k, ov := range o {
		if _, ok := n[k]; !ok {
			out = append(out, ConfigChange{Knob: ov[0], Old: ov[1]})
		}
	}
	sort.Slice(out, func(i, j int) bool { return strings.ToUpper(out[i].Knob) < strings.ToUpper(out[j].Knob) })
	return out
}

// writeNodeConfig records a node's configuration in the writer's
// transaction: the changes from the last one recorded, and the new one.
func (s *Store) writeNodeConfig(ctx context.Context, tx *sql.Tx, nc *nodeConfig, e event) error {
	var last string
	err := tx.QueryRowContext(ctx, `SELECT text FROM node_configs WHERE node = ?`, nc.node).Scan(&last)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return err
	default:
		old, perr := parseKnobs(last)
		if perr != nil {
			old = map[string]string{}
		}
		now, _ := parseKnobs(nc.text)
		for _, c := range DiffKnobs(old, now) {
			if _, err := tx.ExecContext(ctx, `INSERT INTO config_changes(at, node, knob, old, new, who) VALUES (?,?,?,?,?,?)`,
				e.at.UnixMilli(), nc.node, c.Knob, c.Old, c.New, nc.who); err != nil {
				return err
			}
		}
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO node_configs(node, hash, text, at) VALUES (?,?,?,?)
		ON CONFLICT(node) DO UPDATE SET hash = excluded.hash, text = excluded.text, at = excluded.at`, nc.node, nc.hash, nc.text, e.at.UnixMilli())
	return err
}

// loadConfigHashes reads the hash of each node's last configuration.
func (s *Store) loadConfigHashes(ctx context.Context) error {
	rows, err := s.w.QueryContext(ctx, `SELECT node, hash FROM node_configs`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var node, hash string
		if err := rows.Scan(&node, &hash); err != nil {
			return err
		}
		s.configs[node] = hash
	}
	return rows.Err()
}
