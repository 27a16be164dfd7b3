// Package jsonhttp is the small JSON-over-HTTP plumbing the agent's APIs
// share: writing JSON answers and calling an endpoint with a JSON body.
package jsonhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// MaxBody bounds how much of a request or answer is read.
const MaxBody = 64 << 20

// Write sends v as a JSON answer with status code.
func Write(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// Error sends {"error": msg} with status code.
func Error(w http.ResponseWriter, code int, msg string) {
	Write(w, code, map[string]string{"error": msg})
}

// Decode reads a JSON request body into v.
func Decode(r *http.Request, v any) error {
	return json.NewDecoder(io.LimitReader(r.Body, MaxBody)).Decode(v)
}

// Do calls method on http://addr+path with body (nil for none) encoded as
// JSON and decodes a 200 answer into out. Other answers become errors that
// carry the server's {"error": ...} message when it sent one. Errors name
// addr.
func Do(ctx context.Context, hc *http.Client, method, addr, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	if err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return &StatusError{Addr: addr, Code: resp.StatusCode, Msg: e.Error}
		}
		return &StatusError{Addr: addr, Code: resp.StatusCode, Msg: resp.Status}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}
	return nil
}

// StatusError is an answer other than 200.
type StatusError struct {
	Addr string
	Code int
	Msg  string
}

func (e *StatusError) Error() string { return e.Addr + ": " + e.Msg }
