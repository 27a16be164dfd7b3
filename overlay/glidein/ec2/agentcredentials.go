package ec2

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// credentialTimeout bounds how long -credentials retries: an instance's
// role credentials and network may take a moment after boot.
const credentialTimeout = 2 * time.Minute

// WriteCredentials reads the credential that an agent's -credentials
// (spec) names into
// -data-dir, each file mode 0600, before the configuration file (one of
// them) is read. Only "ssm:PATH" is known: the SecureString parameters
// under PATH in SSM Parameter Store, read with the SDK's default
// credentials (the instance's role), and deleted once read so that no one
// else with the role reads them after this glidein.
func WriteCredentials(ctx context.Context, spec, dataDir string, stderr io.Writer) error {
	p, ok := strings.CutPrefix(spec, "ssm:")
	if !ok || !strings.HasPrefix(p, "/") {
		return fmt.Errorf("-credentials %q: want ssm:/PATH", spec)
	}
	if dataDir == "" {
		return fmt.Errorf("-credentials %s: give -data-dir, where the credential is written", spec)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("-credentials: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, credentialTimeout)
	defer cancel()
	ac, err := LoadAWS(ctx, "", "", "")
	if err != nil {
		return fmt.Errorf("-credentials %s: %w", spec, err)
	}
	var files map[string][]byte
	for wait := time.Second; ; wait = min(2*wait, 15*time.Second) {
		files, err = FetchCredential(ctx, ac, p, true)
		if files != nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("-credentials %s: %w", spec, err)
		case <-time.After(wait):
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "pondctl agent: -credentials %s: %v\n", spec, err)
	}
	for name, data := range files {
		if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
			return fmt.Errorf("-credentials %s: parameter %q is not a file name", spec, name)
		}
		if err := os.WriteFile(filepath.Join(dataDir, name), data, 0o600); err != nil {
			return fmt.Errorf("-credentials %s: %w", spec, err)
		}
	}
	return nil
}
