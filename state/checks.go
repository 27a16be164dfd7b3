package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// CheckResult is the outcome of one check block at the last apply that
// wrote the state, as Terraform's state records it in check_results.
type CheckResult struct {
	// ObjectKind is what the checkable object is: "check" for a check
	// block.
	ObjectKind string `json:"object_kind"`
	// ConfigAddr is the object's address in the configuration
	// (check.NAME).
	ConfigAddr string `json:"config_addr"`
	// Status is the aggregate of the objects' statuses: one of
	// CheckStatuses.
	Status string `json:"status"`
	// Objects are the object's instances, none when the apply did not
	// evaluate it.
	Objects []*CheckObject `json:"objects"`
}

// CheckObject is the outcome of one instance of a checkable object.
type CheckObject struct {
	// ObjectAddr is the instance's address (check.NAME).
	ObjectAddr string `json:"object_addr"`
	// Status is one of CheckStatuses.
	Status string `json:"status"`
	// FailureMessages are the error messages of the failing assertions.
	FailureMessages []string `json:"failure_messages,omitempty"`
}

// CheckStatuses are the statuses a check result may have, as Terraform
// names them.
var CheckStatuses = []string{"pass", "fail", "error", "unknown"}

// checkKinds are the kinds of checkable object pond records.
var checkKinds = []string{"check"}

// checkResults decodes and checks the document's check results, when it
// has them.
func (d *decoder) checkResults(s *State, raw json.RawMessage) error {
	if len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil
	}
	if err := json.Unmarshal(raw, &s.CheckResults); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) && typ.Field != "" {
			err = fmt.Errorf("%s: cannot use a JSON %s here, want %s", typ.Field, typ.Value, friendlyType(typ.Type.String()))
		}
		return d.fail([]any{"check_results"}, fmt.Errorf("invalid check_results: %w", err))
	}
	return validCheckResults(s.CheckResults, d.fail)
}

// validCheckResults reports the first invalid check result of cs, at its
// path in the document.
func validCheckResults(cs []*CheckResult, at func(path []any, err error) error) error {
	seen := map[string]bool{}
	for i, c := range cs {
		p := []any{"check_results", i}
		if c == nil {
			return at(p, errors.New("check result is null"))
		}
		if !slices.Contains(checkKinds, c.ObjectKind) {
			return at(append(p, "object_kind"), fmt.Errorf("object_kind is %q, want %s", c.ObjectKind, strings.Join(checkKinds, ", ")))
		}
		if c.ConfigAddr == "" {
			return at(p, errors.New(`missing "config_addr"`))
		}
		if seen[c.ConfigAddr] {
			return at(append(p, "config_addr"), fmt.Errorf("duplicate check result %s", c.ConfigAddr))
		}
		seen[c.ConfigAddr] = true
		if !slices.Contains(CheckStatuses, c.Status) {
			return at(append(p, "status"), fmt.Errorf("status is %q, want one of %s", c.Status, strings.Join(CheckStatuses, ", ")))
		}
		for j, o := range c.Objects {
			op := append(slices.Clone(p), "objects", j)
			if o == nil {
				return at(op, errors.New("check object is null"))
			}
			if o.ObjectAddr == "" {
				return at(op, errors.New(`missing "object_addr"`))
			}
			if !slices.Contains(CheckStatuses, o.Status) {
				return at(append(op, "status"), fmt.Errorf("status is %q, want one of %s", o.Status, strings.Join(CheckStatuses, ", ")))
			}
		}
	}
	return nil
}

// deepCopyCheckResults returns a copy of cs sharing no memory with it.
func deepCopyCheckResults(cs []*CheckResult) []*CheckResult {
	if cs == nil {
		return nil
	}
	out := make([]*CheckResult, len(cs))
	for i, c := range cs {
		if c == nil {
			continue
		}
		cc := *c
		if c.Objects != nil {
			cc.Objects = make([]*CheckObject, len(c.Objects))
			for j, o := range c.Objects {
				if o == nil {
					continue
				}
				oc := *o
				oc.FailureMessages = slices.Clone(o.FailureMessages)
				cc.Objects[j] = &oc
			}
		}
		out[i] = &cc
	}
	return out
}

// checkResultsEqual reports whether a and b record the same outcomes, in
// the same order.
func checkResultsEqual(a, b []*CheckResult) bool {
	return slices.EqualFunc(a, b, func(x, y *CheckResult) bool {
		if x == nil || y == nil {
			return x == y
		}
		return x.ObjectKind == y.ObjectKind && x.ConfigAddr == y.ConfigAddr && x.Status == y.Status &&
			slices.EqualFunc(x.Objects, y.Objects, func(o, q *CheckObject) bool {
				if o == nil || q == nil {
					return o == q
				}
				return o.ObjectAddr == q.ObjectAddr && o.Status == q.Status && slices.Equal(o.FailureMessages, q.FailureMessages)
			})
	})
}

// checkResults writes the check results as encoding/json indents them.
func (w *docWriter) checkResults(cs []*CheckResult) {
	var tmp bytes.Buffer
	enc := json.NewEncoder(&tmp)
	enc.SetEscapeHTML(false)
	enc.SetIndent("  ", "  ")
	if err := enc.Encode(cs); err != nil {
		if w.err == nil {
			w.err = fmt.Errorf("check_results: %w", err)
		}
		return
	}
	w.b.Write(bytes.TrimSuffix(tmp.Bytes(), []byte{'\n'}))
}
