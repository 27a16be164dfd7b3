package agent

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/pond-htc/pond/overlay/glidein/ec2"
	"github.com/pond-htc/pond/overlay/glidein/ec2/ec2test"
)

// TestCredentialsFromSSM: -credentials ssm:PATH writes the SecureString
// parameters under PATH into -data-dir before -config (one of them) is
// read, and deletes them once read.
func TestCredentialsFromSSM(t *testing.T) {
	endpoint := ec2test.StartMoto(t)
	t.Setenv("AWS_ENDPOINT_URL", endpoint)
	ctx := context.Background()
	ac, err := ec2.LoadAWS(ctx, "", "", endpoint)
	if err != nil {
		t.Fatal(err)
	}
	client := ssm.NewFromConfig(ac)
	for name, value := range map[string]string{
		"condor_config": "NUM_SLOTS = 3\nPOND_POOL = campus\n",
		"node.token":    "a-token\n",
	} {
		if _, err := client.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String("/pond/g1/" + name),
			Value: aws.String(value), Type: ssmtypes.ParameterTypeSecureString}); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(t.TempDir(), "g1")
	cfg, err := ParseArgs([]string{"-name", "g1", "-credentials", "ssm:/pond/g1", "-data-dir", dir,
		"-config", filepath.Join(dir, "condor_config"), "-token-file", filepath.Join(dir, "node.token")}, new(bytes.Buffer))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Knobs["POND_POOL"] != "campus" {
		t.Errorf("the configuration fetched was not read: knobs %v", cfg.Knobs)
	}
	tok, err := os.ReadFile(filepath.Join(dir, "node.token"))
	if err != nil || string(tok) != "a-token\n" {
		t.Fatalf("node.token = %q, %v", tok, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "node.token")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("node.token mode: %v %v, want 0600", fi.Mode(), err)
	}
	out, err := client.GetParametersByPath(ctx, &ssm.GetParametersByPathInput{Path: aws.String("/pond/g1")})
	if err != nil || len(out.Parameters) != 0 {
		t.Fatalf("after the agent read them, SSM still has %d parameters (%v)", len(out.Parameters), err)
	}
}

func TestCredentialsRefused(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-credentials", "vault:/x", "-data-dir", t.TempDir()}, "want ssm:/PATH"},
		{[]string{"-credentials", "ssm:/pond/x"}, "-data-dir"},
	} {
		_, err := ParseArgs(tc.args, new(bytes.Buffer))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseArgs(%q) = %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
}
