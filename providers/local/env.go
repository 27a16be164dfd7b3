package local

import "strings"

// agentEnv is the environment of an agent process that runs in directory
// dir: pondctl's own, so that POND_LOG sets the agents' log level as TF_LOG
// reaches Terraform's plugins, less POND_LOG_PATH: an agent outlives the
// pondctl that started it and keeps its log in its own agent.log. PWD is
// set to dir, as exec.Cmd sets it when it chooses the environment itself.
// A launch nonce pondctl inherited (it runs inside an agent's job) is
// dropped: the caller adds the node's own. So is the user's token
// (POND_TOKEN, POND_TOKEN_FILE): an agent is not its user and presents a
// token of its own. So are the configuration's variables (POND_VAR_name),
// which may be secrets: what an agent needs of them is in its configuration
// file.
func agentEnv(environ []string, dir string) []string {
	out := make([]string, 0, len(environ)+1)
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		switch name {
		case "POND_LOG_PATH", LaunchEnv, "POND_TOKEN", "POND_TOKEN_FILE":
			continue
		}
		if strings.HasPrefix(name, "POND_VAR_") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, "PWD="+dir)
}
