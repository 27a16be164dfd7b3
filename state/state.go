// Package state holds pond's state document: what pond created, with the
// attributes each provider reported, and the outputs of the last apply. It
// also defines the Backend interface through which the document is stored and
// locked, so that the planner never depends on where state lives.
package state

import (
	"encoding/json"
	"time"
)

// FormatVersion is the state document format this build reads and writes. A
// document with a larger format_version is refused rather than rewritten.
const FormatVersion = 1

// PondVersion is the version of pond this build is, written as the
// pond_version of every state document it stores. A document whose
// pond_version is a newer release is refused: a newer pond may have stored
// what this one would misread or drop.
const PondVersion = "0.1.0"

// Resource modes.
const (
	ModeManaged = "managed"
	ModeData    = "data"
)

// State is the whole state document.
type State struct {
	FormatVersion int                `json:"format_version"`
	PondVersion   string             `json:"pond_version,omitempty"`
	Serial        uint64             `json:"serial"`
	Lineage       string             `json:"lineage"`
	Outputs       map[string]*Output `json:"outputs"`
	Resources     []*Resource        `json:"resources"`
	// CheckResults are the outcomes of the check blocks of the last apply
	// (unknown where it did not evaluate them), as Terraform's state keeps
	// them; absent from documents written before pond kept them.
	CheckResults []*CheckResult `json:"check_results,omitempty"`
	// History records, oldest first, the commands that wrote the state:
	// who, when, and what each changed. It is bounded (AppendHistory) and
	// absent from documents written before pond kept one.
	History []*HistoryRecord `json:"history,omitempty"`
}

// Resource is every instance of one resource block (one address without an
// instance key), as in Terraform's state.
type Resource struct {
	Mode      string      `json:"mode"`
	Type      string      `json:"type"`
	Name      string      `json:"name"`
	Provider  string      `json:"provider"`
	Instances []*Instance `json:"instances"`
}

// Instance is one instance of a resource: the single instance of a resource
// without count or for_each, or one element of those.
type Instance struct {
	// IndexKey is nil, an int (count) or a string (for_each).
	IndexKey any `json:"index_key,omitempty"`
	// SchemaVersion is the provider schema version the attributes follow.
	SchemaVersion int `json:"schema_version"`
	// Attributes is the object value, JSON-encoded as go-cty's ctyjson does
	// for the resource type's implied type.
	Attributes json.RawMessage `json:"attributes"`
	// SensitiveAttributes names the top-level attributes that are sensitive.
	SensitiveAttributes []string `json:"sensitive_attributes,omitempty"`
	// SensitiveValues holds, for each value derived from a sensitive value
	// (a sensitive variable, the sensitive function), its path in the
	// attributes (as config["SECRET"]) and its keyed hash
	// (providers.Hash); the attributes hold null there. The value itself is
	// never stored: the hash tells the next plan whether it changed.
	SensitiveValues map[string]string `json:"sensitive_values,omitempty"`
	// Dependencies are the addresses of the resources this instance depends
	// on directly. Only direct dependencies are recorded, so the document
	// grows linearly with the number of resources.
	Dependencies []string `json:"dependencies,omitempty"`
	// Status is "" or "tainted".
	Status string `json:"status,omitempty"`
	// CreateBeforeDestroy records the lifecycle setting at the last apply, so
	// that an orphaned instance is destroyed in the right order.
	CreateBeforeDestroy bool `json:"create_before_destroy,omitempty"`
}

// Output is one root output value.
type Output struct {
	Value     json.RawMessage `json:"value"`
	Type      json.RawMessage `json:"type"`
	Sensitive bool            `json:"sensitive,omitempty"`
	// Hash is set, and Value is null, for an output whose value derives
	// from a sensitive value: its keyed hash (providers.Hash), with which
	// the next plan tells whether it changed. The value is not stored.
	Hash string `json:"hash,omitempty"`
}

// LockInfo describes who holds a state lock.
type LockInfo struct {
	ID        string    `json:"ID"`
	Operation string    `json:"Operation"`
	Who       string    `json:"Who"`
	Version   string    `json:"Version"`
	Created   time.Time `json:"Created"`
	Path      string    `json:"Path"`
	PID       int       `json:"PID"`
}
