package ec2test_test

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsec2 "github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/pond-htc/pond/overlay/glidein/ec2"
	"github.com/pond-htc/pond/overlay/glidein/ec2/ec2test"
)

func TestMain(m *testing.M) {
	// For the parallel tests, which cannot set it themselves.
	for k, v := range ec2test.Env() {
		os.Setenv(k, v)
	}
	code := m.Run()
	ec2test.StopShared()
	os.Exit(code)
}

// keyPairs lists the names of the key pairs moto at endpoint holds.
func keyPairs(t *testing.T, endpoint string) []string {
	t.Helper()
	ac, err := ec2.LoadAWS(context.Background(), ec2test.Region, "", endpoint)
	if err != nil {
		t.Fatal(err)
	}
	out, err := awsec2.NewFromConfig(ac).DescribeKeyPairs(context.Background(), &awsec2.DescribeKeyPairsInput{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, k := range out.KeyPairs {
		names = append(names, aws.ToString(k.KeyName))
	}
	return names
}

// TestSharedEmptiedForEachTest: the package's moto is one server, and
// what a test made in it is gone for the next test.
func TestSharedEmptiedForEachTest(t *testing.T) {
	var first string
	t.Run("makes", func(t *testing.T) {
		first = ec2test.Shared(t)
		ac, err := ec2.LoadAWS(context.Background(), ec2test.Region, "", first)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := awsec2.NewFromConfig(ac).CreateKeyPair(context.Background(), &awsec2.CreateKeyPairInput{KeyName: aws.String("left")}); err != nil {
			t.Fatal(err)
		}
		if names := keyPairs(t, first); len(names) != 1 || names[0] != "left" {
			t.Fatalf("key pairs %q, want the one made", names)
		}
	})
	t.Run("finds it empty", func(t *testing.T) {
		endpoint := ec2test.Shared(t)
		if endpoint != first {
			t.Errorf("endpoint %s, want the package's one server %s", endpoint, first)
		}
		if names := keyPairs(t, endpoint); len(names) != 0 {
			t.Errorf("key pairs %q left by the test before", names)
		}
	})
}

// TestSharedHeldByOneTest: parallel tests that share the moto have it one
// at a time, each until it ends.
func TestSharedHeldByOneTest(t *testing.T) {
	var holders, most atomic.Int32
	for _, name := range []string{"a", "b", "c"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ec2test.Shared(t)
			n := holders.Add(1)
			if n > most.Load() {
				most.Store(n)
			}
			time.Sleep(200 * time.Millisecond)
			holders.Add(-1)
		})
	}
	t.Cleanup(func() {
		if most.Load() != 1 {
			t.Errorf("%d tests held the shared moto at once, want 1", most.Load())
		}
	})
}
