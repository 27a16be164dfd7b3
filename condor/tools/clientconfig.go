package tools

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/pond-htc/pond/condor/config"
)

// The knobs of a client configuration that pond's tools read, besides
// HTCondor's CONDOR_HOST and COLLECTOR_HOST: the API address of the
// pool's node, the token file and the sea's CA. Each may also be set in
// the environment, which wins, as POND_POOL_ADDR, POND_TOKEN_FILE and
// POND_TLS_CA.
const (
	KnobPoolAddr  = "POND_POOL_ADDR"
	KnobTokenFile = "POND_TOKEN_FILE"
	KnobTLSCA     = "POND_TLS_CA"
)

// clientKnobs are the knobs clientConfig takes from _CONDOR_NAME
// environment variables, as HTCondor's tools do.
var clientKnobs = []string{"CONDOR_HOST", "COLLECTOR_HOST", KnobPoolAddr, KnobTokenFile, KnobTLSCA}

// clientConfig reads the HTCondor configuration file CONDOR_CONFIG names
// in env (none when it is unset or ONLY_ENV), without HTCondor's
// defaults, and sets over it the knobs that _CONDOR_NAME variables of env
// give. A CONDOR_CONFIG that cannot be read is an error.
func clientConfig(env []string) (*config.Config, error) {
	lookup := func(n string) (string, bool) { return lookupEnv(env, n) }
	cfg := config.New(config.Options{NoDefaults: true, LookupEnv: lookup})
	if path := getenv(env, "CONDOR_CONFIG"); path != "" && path != "ONLY_ENV" {
		if err := cfg.LoadFile(path); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("CONDOR_CONFIG names %s, which does not exist", path)
			}
			return nil, fmt.Errorf("CONDOR_CONFIG: %w", err)
		}
	}
	for _, k := range clientKnobs {
		if v, ok := lookupEnv(env, "_CONDOR_"+k); ok {
			if err := cfg.Set(k, v); err != nil {
				return nil, fmt.Errorf("_CONDOR_%s: %w", k, err)
			}
		}
	}
	return cfg, nil
}

// knob returns the expanded value of name in cfg, "" when it is not set.
func knob(cfg *config.Config, name string) (string, error) {
	v, ok, err := cfg.Lookup(name)
	if err != nil {
		return "", fmt.Errorf("CONDOR_CONFIG: %w", err)
	}
	if !ok {
		return "", nil
	}
	return strings.TrimSpace(v), nil
}

// poolFromEnv returns the API address of the pool the tools talk to
// without -pool: POND_POOL_ADDR; else, when the environment sets
// _CONDOR_COLLECTOR_HOST or _CONDOR_CONDOR_HOST, the COLLECTOR_HOST (or
// CONDOR_HOST) they make; else the POND_POOL_ADDR, COLLECTOR_HOST or
// CONDOR_HOST of the configuration CONDOR_CONFIG names, the first one
// set. "" when none is.
func poolFromEnv(env []string) (string, error) {
	if p := getenv(env, "POND_POOL_ADDR"); p != "" {
		return p, nil
	}
	cfg, err := clientConfig(env)
	if err != nil {
		return "", err
	}
	order := []string{KnobPoolAddr, "COLLECTOR_HOST", "CONDOR_HOST"}
	if getenv(env, "_CONDOR_COLLECTOR_HOST") != "" || getenv(env, "_CONDOR_CONDOR_HOST") != "" {
		order = []string{"COLLECTOR_HOST", "CONDOR_HOST"}
	}
	for _, k := range order {
		v, err := knob(cfg, k)
		if err != nil {
			return "", err
		}
		if v == "" {
			continue
		}
		addr := hostAddr(v)
		if addr == "" || strings.ContainsAny(addr, "<>?") {
			return "", fmt.Errorf("%s = %q is not a HOST:PORT address", k, v)
		}
		return addr, nil
	}
	return "", nil
}

// hostAddr returns the first address of an HTCondor host list ("a:9618,
// b:9618"), without a sinful string's brackets and parameters
// ("<a:9618?sock=collector>").
func hostAddr(v string) string {
	v = strings.TrimSpace(v)
	if i := strings.IndexAny(v, ", \t"); i >= 0 {
		v = v[:i]
	}
	v = strings.TrimPrefix(v, "<")
	if i := strings.IndexAny(v, "?>"); i >= 0 {
		v = v[:i]
	}
	return v
}

// withClientEnv returns env with POND_TOKEN_FILE and POND_TLS_CA set from
// the client configuration when env sets neither them nor POND_TOKEN, so
// that the tools present the credentials the configuration names.
func withClientEnv(env []string) ([]string, error) {
	if getenv(env, "CONDOR_CONFIG") == "" && getenv(env, "_CONDOR_"+KnobTokenFile) == "" && getenv(env, "_CONDOR_"+KnobTLSCA) == "" {
		return env, nil
	}
	cfg, err := clientConfig(env)
	if err != nil {
		return nil, err
	}
	out := env
	if getenv(env, "POND_TOKEN") == "" && getenv(env, "POND_TOKEN_FILE") == "" {
		v, err := knob(cfg, KnobTokenFile)
		if err != nil {
			return nil, err
		}
		if v != "" {
			out = append(out[:len(out):len(out)], "POND_TOKEN_FILE="+v)
		}
	}
	if getenv(env, "POND_TLS_CA") == "" {
		v, err := knob(cfg, KnobTLSCA)
		if err != nil {
			return nil, err
		}
		if v != "" {
			out = append(out[:len(out):len(out)], "POND_TLS_CA="+v)
		}
	}
	return out, nil
}
