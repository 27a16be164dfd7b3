package tools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// ClientConfig prints a configuration for HTCondor's own clients (the
// htcondor Python bindings and tool, condor_status) that points them at
// the pool of the -pool node: its central manager as CONDOR_HOST, which
// serves CEDAR on its API port, and the security pond's CEDAR server
// requires. Use it as CONDOR_CONFIG, or add it to ~/.condor/user_config.
func ClientConfig(ctx context.Context, args []string, stdout, stderr io.Writer, env []string) int {
	const tool = "condor client-config"
	c, err := parseArgs(args, nil, env)
	if err == nil {
		err = onlyPool(c)
	}
	if err != nil {
		return fail(stderr, tool, err)
	}
	node, err := client(c.pool, env)
	if err != nil {
		return fail(stderr, tool, err)
	}
	info, err := node.Master().Info(ctx)
	if err != nil {
		return fail(stderr, tool, fmt.Errorf("asking %s for its central manager: %w", c.pool, err))
	}
	if info.CondorHost == "" {
		return fail(stderr, tool, fmt.Errorf("%s (%s) knows no central manager", c.pool, info.Name))
	}
	fmt.Fprint(stdout, clientConfig(info.CondorHost, c.pool))
	return 0
}

// onlyPool refuses what client-config does not take: every option but
// -pool, and arguments.
func onlyPool(c *common) error {
	var extra []string
	for f := range c.flags {
		extra = append(extra, "-"+f)
	}
	sort.Strings(extra)
	extra = append(extra, c.rest...)
	if c.name != "" || c.constraint != "" || len(c.af) > 0 || c.long || c.json {
		extra = append(extra, "(-name, -constraint, -af, -l or -json)")
	}
	if len(extra) > 0 {
		return errors.New("client-config takes only -pool ADDR; unexpected " + strings.Join(extra, " "))
	}
	return nil
}

// clientConfig is the configuration for the pool whose central manager's
// agent is at condorHost, as asked of node.
func clientConfig(condorHost, node string) string {
	return fmt.Sprintf(`# HTCondor client configuration for the pond pool of %s,
# written by pondctl condor client-config. Use it as CONDOR_CONFIG, or add it
# to ~/.condor/user_config.
CONDOR_HOST = %s
COLLECTOR_HOST = $(CONDOR_HOST)
# pond's CEDAR server requires authentication, integrity and encryption
# (AES-GCM), and refuses CLAIMTOBE and anonymous clients.
SEC_CLIENT_AUTHENTICATION = REQUIRED
SEC_CLIENT_INTEGRITY = REQUIRED
SEC_CLIENT_ENCRYPTION = REQUIRED
SEC_CLIENT_CRYPTO_METHODS = AES
# FS proves a local user of the central manager's machine, who may read.
SEC_CLIENT_AUTHENTICATION_METHODS = FS
`, node, condorHost)
}
