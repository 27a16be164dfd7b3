package ec2

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/pond-htc/pond/overlay/glidein"
)

// credentialTags returns the tags of the SSM parameter name.
func credentialTags(t *testing.T, s *Site, name string) map[string]string {
	t.Helper()
	out, err := s.ssm.ListTagsForResource(context.Background(), &ssm.ListTagsForResourceInput{
		ResourceType: ssmtypes.ResourceTypeForTaggingParameter, ResourceId: aws.String(name)})
	if err != nil {
		t.Fatalf("the tags of %s: %v", name, err)
	}
	tags := map[string]string{}
	for _, tg := range out.TagList {
		tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
	}
	return tags
}

// TestCredentialBoundToInstance: once Submit has launched a glidein's
// instance, the parameter of its credential is tagged with that
// instance's ID and ARN (what the instance role's policy compares with
// ec2:SourceInstanceARN), each glidein's with its own; a Submit retried
// after a lost answer finds the instance and tags the credential again.
func TestCredentialBoundToInstance(t *testing.T) {
	t.Parallel()
	endpoint := startMoto(t)
	s := newSite(t, endpoint)
	ctx := context.Background()
	var gs []glidein.Glidein
	for _, id := range []string{"pond-test-bind-0-aaaa", "pond-test-bind-1-bbbb"} {
		req := request(id)
		req.New = true
		g, err := s.Submit(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, g)
	}
	for _, g := range gs {
		name := s.ParameterPath(g.ID) + "/" + BundleName
		tags := credentialTags(t, s, name)
		// moto's account.
		arn := "arn:aws:ec2:us-east-1:123456789012:instance/" + g.SiteID
		if tags[TagInstanceID] != g.SiteID || tags[TagInstanceARN] != arn {
			t.Errorf("%s is tagged %v, want %s = %s and %s = %s", name, tags, TagInstanceID, g.SiteID, TagInstanceARN, arn)
		}
	}
	// The answer of the first launch lost before the tags: a retried
	// Submit binds the credential to the instance it finds.
	name := s.ParameterPath(gs[0].ID) + "/" + BundleName
	if _, err := s.ssm.RemoveTagsFromResource(ctx, &ssm.RemoveTagsFromResourceInput{ResourceType: ssmtypes.ResourceTypeForTaggingParameter,
		ResourceId: aws.String(name), TagKeys: []string{TagInstanceID, TagInstanceARN}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(ctx, request(gs[0].ID)); !errors.Is(err, glidein.ErrDuplicate) {
		t.Fatalf("the retried Submit: %v, want ErrDuplicate", err)
	}
	if tags := credentialTags(t, s, name); tags[TagInstanceID] != gs[0].SiteID {
		t.Errorf("after the retried Submit, %s is tagged %v, want its instance %s", name, tags, gs[0].SiteID)
	}
}

func TestInstanceARN(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ region, want string }{
		{"us-east-1", "arn:aws:ec2:us-east-1:111122223333:instance/i-0abc"},
		{"cn-north-1", "arn:aws-cn:ec2:cn-north-1:111122223333:instance/i-0abc"},
		{"us-gov-west-1", "arn:aws-us-gov:ec2:us-gov-west-1:111122223333:instance/i-0abc"},
	} {
		if got := InstanceARN(tc.region, "111122223333", "i-0abc"); got != tc.want {
			t.Errorf("InstanceARN(%s) = %s, want %s", tc.region, got, tc.want)
		}
	}
}

// ssmProxy is a proxy in front of moto's SSM (the JSON protocol) that
// records the operation of every request and answers refuse's operations
// with AccessDeniedException, as IAM does to an instance role whose
// policy does not allow them.
func ssmProxy(t *testing.T, endpoint string, refuse ...string) (string, func() []string) {
	t.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	var (
		mu  sync.Mutex
		ops []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "AmazonSSM.")
		mu.Lock()
		ops = append(ops, op)
		mu.Unlock()
		if slices.Contains(refuse, op) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/x-amz-json-1.1")
			w.Header().Set("X-Amzn-ErrorType", "AccessDeniedException")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"__type":"AccessDeniedException","message":"not authorized to perform ssm:%s (refused by the test)"}`, op)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(ops) }
}

// TestFetchCredentialByName: the agent reads and deletes its bundled
// credential by its name (GetParameters, DeleteParameters), with no
// GetParametersByPath, so that a role that may read only the parameters
// tagged with its own instance (where IAM refuses a path) reads it; a
// credential of one parameter per file is still read by its path. A
// refused read says why.
func TestFetchCredentialByName(t *testing.T) {
	t.Parallel()
	endpoint := startMoto(t)
	s := newSite(t, endpoint)
	ctx := context.Background()
	req := request("pond-test-byname-0-aaaa")
	if _, err := s.putCredential(ctx, req); err != nil {
		t.Fatal(err)
	}
	proxy, ops := ssmProxy(t, endpoint, "GetParametersByPath")
	ac, err := LoadAWS(ctx, "us-east-1", "", proxy)
	if err != nil {
		t.Fatal(err)
	}
	files, err := FetchCredential(ctx, ac, s.ParameterPath(req.ID), true)
	if err != nil {
		t.Fatalf("FetchCredential with GetParametersByPath refused: %v (requests %v)", err, ops())
	}
	if string(files["node.token"]) != string(req.Files["node.token"]) {
		t.Errorf("node.token = %q, want %q", files["node.token"], req.Files["node.token"])
	}
	if got := ops(); !slices.Equal(got, []string{"GetParameters", "DeleteParameters"}) {
		t.Errorf("requests %v, want GetParameters then DeleteParameters", got)
	}
	if names, err := s.credentialNames(ctx, req.ID); err != nil || len(names) != 0 {
		t.Errorf("after the read, SSM holds %v (%v)", names, err)
	}

	// One parameter a file: read by its path.
	big := request("pond-test-byname-1-bbbb")
	big.Files["big.pem"] = []byte(strings.Repeat("A", 9000))
	if _, err := s.putCredential(ctx, big); err != nil {
		t.Fatal(err)
	}
	direct, err := LoadAWS(ctx, "us-east-1", "", endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if files, err := FetchCredential(ctx, direct, s.ParameterPath(big.ID), true); err != nil || len(files["big.pem"]) != 9000 {
		t.Errorf("a credential of a parameter a file: %d bytes of big.pem, %v", len(files["big.pem"]), err)
	}

	// Refused altogether: the error names the refusal.
	if _, err := s.putCredential(ctx, req); err != nil {
		t.Fatal(err)
	}
	denied, _ := ssmProxy(t, endpoint, "GetParameters", "GetParametersByPath")
	dc, err := LoadAWS(ctx, "us-east-1", "", denied)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := FetchCredential(ctx, dc, s.ParameterPath(req.ID), true); err == nil || !strings.Contains(err.Error(), "AccessDenied") {
		t.Errorf("FetchCredential refused by IAM: %v, want AccessDenied", err)
	}
	if names, _ := s.credentialNames(ctx, req.ID); len(names) != 1 {
		t.Errorf("after a refused read, SSM holds %v, want the bundle still", names)
	}
}
