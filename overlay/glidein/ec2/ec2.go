// Package ec2 is the glidein site of Amazon EC2: each glidein is one
// instance, launched with RunInstances, whose user data starts `pondctl
// agent` as a glidein. The instance holds no secret in its user data: its
// join credential (token, TLS certificate and key, the sea's CA and trusted
// keys, its configuration file) is written by Submit to SSM Parameter
// Store as SecureString parameters under a path of its own, which the
// agent reads with the instance's role (-credentials ssm:PATH) and which
// Cancel deletes.
//
// Exactly once: every RunInstances carries a ClientToken derived from the
// glidein's ID (which the caller records in its journal before Submit and
// which names the working directory, the resource address and the
// instance's index), and every instance carries the tag pond:id with that
// ID, so List finds an instance whose launch answer was lost and the
// caller adopts it instead of launching again. EC2 keeps a ClientToken for
// a while and answers a repeated RunInstances with the instance it already
// started; List by tag is what makes a crashed apply converge even where
// the token is not honoured (moto, or after EC2 forgot the token).
package ec2

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/aws/smithy-go"
	"github.com/pond-htc/pond/overlay/awssdk"
	"github.com/pond-htc/pond/overlay/glidein"
)

// TagID names the glidein an instance runs (its ID, which starts with
// glidein.IDPrefix); see tags.go for the others.
const TagID = "pond:id"

// Defaults of Config.
const (
	DefaultAgentBinary     = "/usr/local/bin/pondctl"
	DefaultBaseDir         = "/var/lib/pond"
	DefaultParameterPrefix = "/pond"
)

// Config describes where and how glideins are launched.
type Config struct {
	// Region, Profile and Endpoint configure the SDK; credentials come
	// from its default chain (environment, shared files and Profile,
	// instance or container role). Endpoint overrides every service's
	// endpoint URL (moto, LocalStack).
	Region   string
	Profile  string
	Endpoint string
	// AMI is the image the instances boot; it must have pondctl at
	// AgentBinary and run its user data as a shell script (cloud-init).
	AMI string
	// InstanceTypes are tried in order, and Subnets in order for each,
	// when EC2 reports insufficient capacity; at least one of each type.
	// No subnet launches into the default VPC.
	InstanceTypes  []string
	Subnets        []string
	SecurityGroups []string
	// IAMInstanceProfile names the instance profile whose role may read
	// the parameters under ParameterPrefix.
	IAMInstanceProfile string
	KeyName            string
	Tags               map[string]string
	// Spot launches spot instances (one-time, terminated on interruption).
	Spot bool
	// AgentBinary is where pondctl is on the image; BaseDir holds the
	// glideins' directories on the instance.
	AgentBinary string
	BaseDir     string
	// ParameterPrefix is the SSM path under which each glidein's
	// credential is written, at PREFIX/ID/FILE.
	ParameterPrefix string
	// KMSKeyID encrypts the SecureString parameters (default: the
	// account's aws/ssm key).
	KMSKeyID string

	// Prices overrides the on-demand table's price of instance types, in
	// US dollars per hour (price.go).
	Prices map[string]float64
	// LaunchTemplate, when not nil, is the template the instances are
	// launched from, and BlockDevices their volumes (launch.go).
	LaunchTemplate *LaunchTemplate
	BlockDevices   []BlockDevice
}

// Site launches glideins as EC2 instances. Create it with New.
type Site struct {
	cfg Config
	ec2 *ec2.Client
	ssm *ssm.Client
	// swept holds the IDs of ended glideins whose credential List has
	// deleted in this process.
	swept sync.Map
	// spot caches the spot price history (price.go).
	spot *SpotPrices
	// sdkLog is where the SDK's own logs go (SetLogger).
	sdkLog *awssdk.Logger
}

// Option sets up a Site beyond its Config.
type Option func(*Site)

// WithLogger sends what the SDK logs to l (by default, nowhere): see
// SetLogger.
func WithLogger(l *slog.Logger) Option {
	return func(s *Site) { s.sdkLog.Set(l) }
}

// SetLogger sends what the SDK logs for the site (such as its fallback to
// IMDSv1 when it looks for credentials off EC2) to l, at l's level, from
// now on; nil sends it nowhere. The glidein providers give the site
// pond's logger (POND_LOG).
func (s *Site) SetLogger(l *slog.Logger) { s.sdkLog.Set(l) }

// WithSpotPrices makes the site keep the spot price history's answers in
// c, shared with the other sites given c, instead of a cache of its own.
func WithSpotPrices(c *SpotPrices) Option {
	return func(s *Site) {
		if c != nil {
			s.spot = c
		}
	}
}

var _ glidein.Site = (*Site)(nil)

// LoadAWS loads the SDK's configuration for region, profile and endpoint:
// credentials from the default chain, the SDK's logs to the logger ctx
// carries (awssdk.NewContext; none: nowhere), and then opts.
func LoadAWS(ctx context.Context, region, profile, endpoint string, more ...func(*config.LoadOptions) error) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	if profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(profile))
	}
	if endpoint != "" {
		opts = append(opts, config.WithBaseEndpoint(endpoint))
	}
	cfg, err := awssdk.Load(ctx, append(opts, more...)...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return aws.Config{}, errors.New("no AWS region: set region, AWS_REGION or a profile's region")
	}
	return cfg, nil
}

// New returns the site of cfg. It checks the configuration but does not
// talk to AWS: Check does.
func New(ctx context.Context, cfg Config, opts ...Option) (*Site, error) {
	if cfg.AMI == "" {
		return nil, errors.New("ami: want the ID of the image the instances boot, such as ami-0123456789abcdef0")
	}
	if len(cfg.InstanceTypes) == 0 {
		return nil, errors.New("instance_types: want at least one instance type, such as [\"c7i.large\"]")
	}
	for _, t := range cfg.InstanceTypes {
		if t == "" || strings.ContainsAny(t, " \t\n") {
			return nil, fmt.Errorf("instance_types: %q is not an instance type", t)
		}
	}
	if cfg.AgentBinary == "" {
		cfg.AgentBinary = DefaultAgentBinary
	}
	if cfg.BaseDir == "" {
		cfg.BaseDir = DefaultBaseDir
	}
	if cfg.ParameterPrefix == "" {
		cfg.ParameterPrefix = DefaultParameterPrefix
	}
	if !strings.HasPrefix(cfg.ParameterPrefix, "/") || strings.HasSuffix(cfg.ParameterPrefix, "/") {
		return nil, fmt.Errorf("parameter_prefix %q: want an absolute SSM path without a trailing '/', such as /pond", cfg.ParameterPrefix)
	}
	for _, p := range []string{cfg.AgentBinary, cfg.BaseDir} {
		if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, "'\n") {
			return nil, fmt.Errorf("%q: want an absolute path without quotes", p)
		}
	}
	for k := range cfg.Tags {
		if strings.HasPrefix(k, "pond:") || strings.HasPrefix(k, "aws:") {
			return nil, fmt.Errorf("tags: %q: the prefixes pond: and aws: are reserved", k)
		}
	}
	if err := validateLaunch(&cfg); err != nil {
		return nil, err
	}
	sdkLog := awssdk.NewLogger(awssdk.FromContext(ctx))
	ac, err := LoadAWS(ctx, cfg.Region, cfg.Profile, cfg.Endpoint, config.WithLogger(sdkLog))
	if err != nil {
		return nil, err
	}
	s := &Site{cfg: cfg, ec2: ec2.NewFromConfig(ac), ssm: ssm.NewFromConfig(ac), spot: NewSpotPrices(0, 0), sdkLog: sdkLog}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// Kind implements glidein.Site.
func (s *Site) Kind() string { return "aws" }

// OnThisMachine implements glidein.Local: an endpoint on loopback is an
// emulator on this machine (moto), whose instances' user data, if run at
// all, runs here; every other endpoint, and AWS itself, launches
// instances elsewhere.
func (s *Site) OnThisMachine() bool {
	if s.cfg.Endpoint == "" {
		return false
	}
	u, err := url.Parse(s.cfg.Endpoint)
	return err == nil && glidein.IsLoopbackHost(u.Hostname())
}

// Check implements glidein.Site: the image, instance types, subnets and
// security groups exist in the region.
func (s *Site) Check(ctx context.Context) error {
	im, err := s.ec2.DescribeImages(ctx, &ec2.DescribeImagesInput{ImageIds: []string{s.cfg.AMI}})
	if err != nil {
		return fmt.Errorf("ami %s: %w", s.cfg.AMI, err)
	}
	if len(im.Images) == 0 {
		return fmt.Errorf("ami %s: no such image in region %s", s.cfg.AMI, s.region())
	}
	its, err := s.ec2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: toTypes(s.cfg.InstanceTypes)})
	if err != nil {
		return fmt.Errorf("instance_types %s: %w", strings.Join(s.cfg.InstanceTypes, ", "), err)
	}
	have := map[string]bool{}
	for _, it := range its.InstanceTypes {
		have[string(it.InstanceType)] = true
	}
	for _, t := range s.cfg.InstanceTypes {
		if !have[t] {
			return fmt.Errorf("instance_types: %q is not an instance type of region %s", t, s.region())
		}
	}
	if len(s.cfg.Subnets) > 0 {
		if _, err := s.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: s.cfg.Subnets}); err != nil {
			return fmt.Errorf("subnets %s (region %s): %w", strings.Join(s.cfg.Subnets, ", "), s.region(), err)
		}
	}
	if len(s.cfg.SecurityGroups) > 0 {
		if _, err := s.ec2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: s.cfg.SecurityGroups}); err != nil {
			return fmt.Errorf("security_groups %s: %w", strings.Join(s.cfg.SecurityGroups, ", "), err)
		}
	}
	return nil
}

func (s *Site) region() string { return s.ec2.Options().Region }

func toTypes(ss []string) []types.InstanceType {
	out := make([]types.InstanceType, len(ss))
	for i, t := range ss {
		out[i] = types.InstanceType(t)
	}
	return out
}

// ClientToken is the RunInstances idempotency token of the launch of
// glidein id as instanceType in subnet: the same for every retry of that
// launch, another for each alternative tried when capacity is short (EC2
// refuses a token reused with other parameters). At most 64 characters.
func ClientToken(id, instanceType, subnet string) string {
	sum := sha256.Sum256([]byte(id + "\x00" + instanceType + "\x00" + subnet))
	return "pond-" + hex.EncodeToString(sum[:24])
}

// ParameterPath is the SSM path of glidein id's credential.
func (s *Site) ParameterPath(id string) string { return s.cfg.ParameterPrefix + "/" + id }

// UserData is the user data of glidein req's instance: a shell script
// that starts the agent with -credentials naming the glidein's SSM path,
// and shuts the instance down (which terminates it) once the agent ends.
// It holds no secret: req.Files are not in it.
func (s *Site) UserData(req glidein.Request) string {
	dir := s.cfg.BaseDir + "/" + req.ID
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\n# pond glidein %s: no secret here; the agent reads its credential from SSM.\n", req.ID)
	fmt.Fprintf(&b, "export AWS_REGION=%s\n", shellQuote(s.region()))
	keys := make([]string, 0, len(req.Env))
	for k := range req.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "export %s=%s\n", k, shellQuote(req.Env[k]))
	}
	fmt.Fprintf(&b, "mkdir -p %s && chmod 700 %s\n", shellQuote(dir), shellQuote(dir))
	args := []string{s.cfg.AgentBinary, req.Args[0], "-credentials", "ssm:" + s.ParameterPath(req.ID)}
	if s.cfg.Spot {
		// Drain at once on a spot interruption notice or a rebalance
		// recommendation (overlay/agent's -spot-notices).
		args = append(args, "-spot-notices")
	}
	for _, a := range req.Args[1:] {
		args = append(args, strings.ReplaceAll(a, "{dir}", dir))
	}
	for i, a := range args {
		args[i] = shellQuote(a)
	}
	fmt.Fprintf(&b, "%s >%s 2>&1\n", strings.Join(args, " "), shellQuote(dir+"/agent.log"))
	b.WriteString("echo \"pond glidein ended with status $?\" >&2\nshutdown -h now\n")
	return b.String()
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=,@+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// BundleName is the SecureString parameter under a glidein's path that
// holds all of its files at once, a JSON object of file name to content,
// when they are text and fit one parameter (a standard-tier one when they
// fit 4 KB, else an advanced-tier one, 8 KB); otherwise each file is a
// parameter of its own, named after it. FetchCredential reads either; the
// bundle by its name, so that an instance role restricted to its own
// parameters by their tags (see Tags of a credential) reads it.
const BundleName = "_files"

// standardTierMax and advancedTierMax are the largest values of a
// standard-tier and an advanced-tier SSM parameter.
const (
	standardTierMax = 4096
	advancedTierMax = 8192
)

// encodeBundle returns files as the value of a BundleName parameter, or
// false when they do not fit one advanced-tier parameter (or a name or
// content is not UTF-8 text, or a file is named BundleName).
func encodeBundle(files map[string][]byte) (string, bool) {
	m := make(map[string]string, len(files))
	for n, d := range files {
		if n == BundleName || !utf8.ValidString(n) || !utf8.Valid(d) {
			return "", false
		}
		m[n] = string(d)
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return "", false
	}
	v := strings.TrimSuffix(b.String(), "\n")
	if len(v) > advancedTierMax {
		return "", false
	}
	return v, true
}

// decodeBundle reads the value of a BundleName parameter.
func decodeBundle(v string) (map[string][]byte, error) {
	var m map[string]string
	if err := json.Unmarshal([]byte(v), &m); err != nil {
		return nil, fmt.Errorf("want a JSON object of file name to content: %w", err)
	}
	if m == nil {
		return nil, errors.New("want a JSON object of file name to content, not null")
	}
	out := make(map[string][]byte, len(m))
	for n, d := range m {
		out[n] = []byte(d)
	}
	return out, nil
}

// putCredential writes req.Files as SecureString parameters under the
// glidein's path: one, BundleName, when they fit, else one a file, and
// returns their full names. Writing them again (a retried Submit)
// overwrites them.
func (s *Site) putCredential(ctx context.Context, req glidein.Request) ([]string, error) {
	if v, ok := encodeBundle(req.Files); ok {
		return []string{s.ParameterPath(req.ID) + "/" + BundleName}, s.putParameter(ctx, req.ID, BundleName, v)
	}
	names := make([]string, 0, len(req.Files))
	for n := range req.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	full := make([]string, 0, len(names))
	for _, n := range names {
		if err := s.putParameter(ctx, req.ID, n, string(req.Files[n])); err != nil {
			return nil, err
		}
		full = append(full, s.ParameterPath(req.ID)+"/"+n)
	}
	return full, nil
}

// Tags of a credential: each parameter of a glidein's credential is
// tagged, once its instance is launched, with that instance's ID and ARN,
// so that the instance role's policy may let an instance read and delete
// only the parameters tagged with its own ARN (docs/aws.md, Instance
// role: a condition ssm:resourceTag/pond:instance-arn equal to the policy
// variable ec2:SourceInstanceARN). Until it is tagged, no instance may.
const (
	TagInstanceID  = "pond:instance-id"
	TagInstanceARN = "pond:instance-arn"
)

// InstanceARN is the ARN of the instance id of account in region.
func InstanceARN(region, account, id string) string {
	partition := "aws"
	switch {
	case strings.HasPrefix(region, "cn-"):
		partition = "aws-cn"
	case strings.HasPrefix(region, "us-gov-"):
		partition = "aws-us-gov"
	}
	return "arn:" + partition + ":ec2:" + region + ":" + account + ":instance/" + id
}

// bindCredential tags the parameters names (a glidein's credential) with
// the instance in: from then on, under the restricted policy, that
// instance alone may read them. A parameter already gone (read and
// deleted by the agent) is no error.
func (s *Site) bindCredential(ctx context.Context, names []string, in types.Instance, account string) error {
	id := aws.ToString(in.InstanceId)
	if account == "" {
		account = instanceAccount(in)
	}
	tags := []ssmtypes.Tag{{Key: aws.String(TagInstanceID), Value: aws.String(id)}}
	if account != "" {
		tags = append(tags, ssmtypes.Tag{Key: aws.String(TagInstanceARN), Value: aws.String(InstanceARN(s.region(), account, id))})
	}
	for _, n := range names {
		_, err := s.ssm.AddTagsToResource(ctx, &ssm.AddTagsToResourceInput{
			ResourceType: ssmtypes.ResourceTypeForTaggingParameter, ResourceId: aws.String(n), Tags: tags})
		var nf *ssmtypes.InvalidResourceId
		if err != nil && !errors.As(err, &nf) {
			return fmt.Errorf("tagging the credential %s with instance %s: %w", n, id, err)
		}
	}
	return nil
}

// instanceAccount is the account of an instance, from the ARN of its
// instance profile, when it has one.
func instanceAccount(in types.Instance) string {
	if in.IamInstanceProfile == nil {
		return ""
	}
	parts := strings.SplitN(aws.ToString(in.IamInstanceProfile.Arn), ":", 6)
	if len(parts) < 6 {
		return ""
	}
	return parts[4]
}

// credentialNames are the full names of the parameters of glidein id's
// credential that SSM holds.
func (s *Site) credentialNames(ctx context.Context, id string) ([]string, error) {
	p := ssm.NewGetParametersByPathPaginator(s.ssm, &ssm.GetParametersByPathInput{
		Path: aws.String(s.ParameterPath(id)), Recursive: aws.Bool(true)})
	var names []string
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing the credential of %s in SSM: %w", id, err)
		}
		for _, prm := range out.Parameters {
			names = append(names, aws.ToString(prm.Name))
		}
	}
	return names, nil
}

// putParameter writes the SecureString parameter name under the path of
// glidein id.
func (s *Site) putParameter(ctx context.Context, id, name, value string) error {
	in := &ssm.PutParameterInput{
		Name:      aws.String(s.ParameterPath(id) + "/" + name),
		Value:     aws.String(value),
		Type:      ssmtypes.ParameterTypeSecureString,
		Overwrite: aws.Bool(true),
	}
	if len(value) > standardTierMax {
		in.Tier = ssmtypes.ParameterTierAdvanced
	}
	if s.cfg.KMSKeyID != "" {
		in.KeyId = aws.String(s.cfg.KMSKeyID)
	}
	if _, err := s.ssm.PutParameter(ctx, in); err != nil {
		return fmt.Errorf("writing the credential of %s to SSM %s: %w", id, aws.ToString(in.Name), err)
	}
	return nil
}

// deleteCredential deletes the parameters under the glidein's path.
func (s *Site) deleteCredential(ctx context.Context, id string) error {
	names, err := s.credentialNames(ctx, id)
	if err != nil {
		return err
	}
	for len(names) > 0 {
		n := min(len(names), 10)
		if _, err := s.ssm.DeleteParameters(ctx, &ssm.DeleteParametersInput{Names: names[:n]}); err != nil {
			return fmt.Errorf("deleting the credential of %s from SSM: %w", id, err)
		}
		names = names[n:]
	}
	return nil
}

// capacityShort reports whether err says EC2 has no capacity for the
// request as made, so that another instance type or subnet may do.
func capacityShort(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "InsufficientInstanceCapacity", "InsufficientHostCapacity", "InsufficientReservedInstanceCapacity",
		"InsufficientCapacity", "SpotMaxPriceTooLow", "MaxSpotInstanceCountExceeded", "Unsupported":
		return true
	}
	return false
}

// Submit implements glidein.Site: it writes the credential to SSM, then
// launches one instance, trying each instance type in each subnet while
// EC2 reports insufficient capacity. A retried Submit (req.New unset)
// first looks for an instance an earlier one launched, under another
// instance type or subnet than its ClientToken covers, and reports it as
// glidein.ErrDuplicate.
func (s *Site) Submit(ctx context.Context, req glidein.Request) (glidein.Glidein, error) {
	if len(req.Args) == 0 {
		return glidein.Glidein{}, errors.New("no agent arguments")
	}
	if !req.New {
		if have, err := s.find(ctx, req.ID); err != nil {
			return glidein.Glidein{}, err
		} else if len(have) > 0 {
			// Launched by a Submit whose answer was lost: its credential
			// may not be bound to it yet.
			err := fmt.Errorf("%s: %w (instance %s)", req.ID, glidein.ErrDuplicate, aws.ToString(have[0].InstanceId))
			if names, lerr := s.credentialNames(ctx, req.ID); lerr != nil {
				err = errors.Join(err, lerr)
			} else if berr := s.bindCredential(ctx, names, have[0], ""); berr != nil {
				err = errors.Join(err, berr)
			}
			return glidein.Glidein{}, err
		}
	}
	its, err := s.instanceTypes(req)
	if err != nil {
		return glidein.Glidein{}, fmt.Errorf("%s: %w", req.ID, err)
	}
	names, err := s.putCredential(ctx, req)
	if err != nil {
		return glidein.Glidein{}, err
	}
	userData := base64.StdEncoding.EncodeToString([]byte(s.UserData(req)))
	subnets := s.cfg.Subnets
	if len(subnets) == 0 {
		subnets = []string{""}
	}
	var errs []error
	for _, it := range its {
		for _, sn := range subnets {
			in := s.runInput(req, it, sn, userData)
			out, err := s.ec2.RunInstances(ctx, in)
			if err != nil {
				if capacityShort(err) {
					errs = append(errs, fmt.Errorf("%s in %s: %w", it, orDefault(sn), err))
					continue
				}
				err = fmt.Errorf("launching %s as %s in %s: %w", req.ID, it, orDefault(sn), err)
				return glidein.Glidein{}, s.refused(ctx, req.ID, err)
			}
			if len(out.Instances) == 0 {
				return glidein.Glidein{}, fmt.Errorf("launching %s: EC2 answered without an instance", req.ID)
			}
			g := toGlidein(out.Instances[0])
			if err := s.bindCredential(ctx, names, out.Instances[0], aws.ToString(out.OwnerId)); err != nil {
				// A retried Submit finds the instance and binds again.
				return g, fmt.Errorf("launched %s as %s, but: %w", req.ID, g.SiteID, err)
			}
			return g, nil
		}
	}
	err = fmt.Errorf("launching %s: no capacity for any instance type and subnet: %w", req.ID, errors.Join(errs...))
	return glidein.Glidein{}, s.refused(ctx, req.ID, err)
}

// refused deletes the credential of glidein id when err is EC2's answer
// refusing its launch (nothing started), and returns err. A launch that
// failed otherwise (a timeout, a lost answer) may have started: its
// credential stays for the instance, and Cancel deletes it.
func (s *Site) refused(ctx context.Context, id string, err error) error {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return err
	}
	if derr := s.deleteCredential(context.WithoutCancel(ctx), id); derr != nil {
		return errors.Join(err, derr)
	}
	return err
}

func orDefault(subnet string) string {
	if subnet == "" {
		return "the default subnet"
	}
	return "subnet " + subnet
}

// runInput is the RunInstances request of glidein req as instanceType in
// subnet.
func (s *Site) runInput(req glidein.Request, instanceType, subnet, userData string) *ec2.RunInstancesInput {
	tags := s.instanceTags(req)
	in := &ec2.RunInstancesInput{
		ImageId:                           aws.String(s.cfg.AMI),
		InstanceType:                      types.InstanceType(instanceType),
		MinCount:                          aws.Int32(1),
		MaxCount:                          aws.Int32(1),
		ClientToken:                       aws.String(ClientToken(req.ID, instanceType, subnet)),
		UserData:                          aws.String(userData),
		InstanceInitiatedShutdownBehavior: types.ShutdownBehaviorTerminate,
		TagSpecifications: []types.TagSpecification{
			{ResourceType: types.ResourceTypeInstance, Tags: tags},
			{ResourceType: types.ResourceTypeVolume, Tags: tags},
		},
		MetadataOptions: &types.InstanceMetadataOptionsRequest{
			HttpTokens:           types.HttpTokensStateRequired,
			InstanceMetadataTags: types.InstanceMetadataTagsStateEnabled,
		},
	}
	if subnet != "" {
		in.SubnetId = aws.String(subnet)
	}
	if len(s.cfg.SecurityGroups) > 0 {
		in.SecurityGroupIds = s.cfg.SecurityGroups
	}
	if s.cfg.IAMInstanceProfile != "" {
		if strings.HasPrefix(s.cfg.IAMInstanceProfile, "arn:") {
			in.IamInstanceProfile = &types.IamInstanceProfileSpecification{Arn: aws.String(s.cfg.IAMInstanceProfile)}
		} else {
			in.IamInstanceProfile = &types.IamInstanceProfileSpecification{Name: aws.String(s.cfg.IAMInstanceProfile)}
		}
	}
	if s.cfg.KeyName != "" {
		in.KeyName = aws.String(s.cfg.KeyName)
	}
	s.addLaunch(in)
	if s.cfg.Spot {
		in.InstanceMarketOptions = &types.InstanceMarketOptionsRequest{
			MarketType: types.MarketTypeSpot,
			SpotOptions: &types.SpotMarketOptions{
				SpotInstanceType:             types.SpotInstanceTypeOneTime,
				InstanceInterruptionBehavior: types.InstanceInterruptionBehaviorTerminate,
			},
		}
	}
	return in
}

// find returns the instances tagged with glidein id that are not
// terminated.
func (s *Site) find(ctx context.Context, id string) ([]types.Instance, error) {
	all, err := s.describe(ctx, id)
	if err != nil {
		return nil, err
	}
	var out []types.Instance
	for _, in := range all {
		if in.State == nil || in.State.Name != types.InstanceStateNameTerminated {
			out = append(out, in)
		}
	}
	return out, nil
}

// describe returns every instance whose pond:id tag matches pattern (an
// EC2 filter value: '*' matches any characters).
func (s *Site) describe(ctx context.Context, pattern string) ([]types.Instance, error) {
	p := ec2.NewDescribeInstancesPaginator(s.ec2, &ec2.DescribeInstancesInput{
		Filters: []types.Filter{{Name: aws.String("tag:" + TagID), Values: []string{pattern}}},
	})
	var out []types.Instance
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing the instances tagged %s=%s: %w", TagID, pattern, err)
		}
		for _, r := range page.Reservations {
			out = append(out, r.Instances...)
		}
	}
	return out, nil
}

// List implements glidein.Site. An instance is queued while pending,
// running until EC2 says it is terminated (shutting-down included, so
// that destroy waits for the end), and then done when it shut itself down,
// failed when EC2 ended it (spot interruption, host failure), cancelled
// when someone terminated it.
func (s *Site) List(ctx context.Context, prefix string) ([]glidein.Glidein, error) {
	if !strings.HasPrefix(prefix, glidein.IDPrefix) || strings.ContainsAny(prefix, "*?") {
		return nil, fmt.Errorf("prefix %q: want one that starts with %q, without wildcards", prefix, glidein.IDPrefix)
	}
	all, err := s.describe(ctx, prefix+"*")
	if err != nil {
		return nil, err
	}
	out := make([]glidein.Glidein, 0, len(all))
	for _, in := range all {
		g := toGlidein(in)
		if strings.HasPrefix(g.ID, prefix) {
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].ID < out[j].ID || out[i].ID == out[j].ID && out[i].SiteID < out[j].SiteID
	})
	s.sweep(ctx, out)
	return out, nil
}

// sweep deletes, once per process, the credential of each glidein whose
// instances have all ended: one terminated before its agent read it, or
// whose pondctl was killed while destroying it, after it terminated the
// instance and before it deleted the credential. A failure is left for
// the next List.
func (s *Site) sweep(ctx context.Context, gs []glidein.Glidein) {
	live := map[string]bool{}
	for _, g := range gs {
		live[g.ID] = live[g.ID] || !g.State.Ended()
	}
	for id, l := range live {
		if l {
			continue
		}
		if _, done := s.swept.Load(id); done {
			continue
		}
		if err := s.deleteCredential(ctx, id); err == nil {
			s.swept.Store(id, true)
		}
	}
}

func toGlidein(in types.Instance) glidein.Glidein {
	g := glidein.Glidein{SiteID: aws.ToString(in.InstanceId), Host: aws.ToString(in.PrivateIpAddress)}
	g.ID, g.Lineage = tagValue(in.Tags, TagID), tagValue(in.Tags, TagLineage)
	if in.LaunchTime != nil {
		g.Submitted = *in.LaunchTime
	}
	state := types.InstanceStateNamePending
	if in.State != nil {
		state = in.State.Name
	}
	reason := ""
	if in.StateReason != nil {
		reason = aws.ToString(in.StateReason.Code) + ": " + aws.ToString(in.StateReason.Message)
	} else if in.StateTransitionReason != nil {
		reason = aws.ToString(in.StateTransitionReason)
	}
	switch state {
	case types.InstanceStateNamePending:
		g.State = glidein.Queued
	case types.InstanceStateNameTerminated, types.InstanceStateNameStopped:
		g.Reason = reason
		g.State = endState(reason)
	default:
		g.State = glidein.Running
		g.Started = g.Submitted
	}
	return g
}

// endState is the final state of an instance that ended for reason.
func endState(reason string) glidein.State {
	switch {
	case strings.Contains(reason, "InstanceInitiatedShutdown"):
		return glidein.Done
	case strings.Contains(reason, "UserInitiatedShutdown"), strings.Contains(reason, "User initiated"):
		return glidein.Cancelled
	default:
		return glidein.Failed
	}
}

// Cancel implements glidein.Site: it terminates every instance tagged
// with id and deletes its credential. It does not wait: List shows the
// instances as running until EC2 says they are terminated.
func (s *Site) Cancel(ctx context.Context, id string) error {
	if !strings.HasPrefix(id, glidein.IDPrefix) || strings.ContainsAny(id, "*?") {
		return fmt.Errorf("id %q: not a glidein's", id)
	}
	live, err := s.find(ctx, id)
	if err != nil {
		return err
	}
	var ids []string
	for _, in := range live {
		if in.State == nil || in.State.Name != types.InstanceStateNameShuttingDown {
			ids = append(ids, aws.ToString(in.InstanceId))
		}
	}
	if len(ids) > 0 {
		if _, err := s.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids}); err != nil {
			return fmt.Errorf("terminating %s (%s): %w", id, strings.Join(ids, ", "), err)
		}
	}
	return s.deleteCredential(ctx, id)
}

// Forget implements glidein.Forgetter: it deletes the credential of a
// glidein that has no instance running (one that never launched, or one
// terminated before its agent read it).
func (s *Site) Forget(ctx context.Context, id string) error {
	if !strings.HasPrefix(id, glidein.IDPrefix) || strings.ContainsAny(id, "*?") {
		return fmt.Errorf("id %q: not a glidein's", id)
	}
	return s.deleteCredential(ctx, id)
}

var _ glidein.Forgetter = (*Site)(nil)

// FetchCredential reads the credential at the SSM path and returns its
// files by name, then deletes its parameters when del is set, so that
// they are read once. It is the agent's side of -credentials ssm:PATH,
// with the instance role's credentials from the SDK's default chain.
//
// It reads the bundle (PATH/BundleName) by its name first
// (GetParameters), which an instance role restricted to the parameters
// tagged with its own instance allows; when there is none (or it may not
// be read), every parameter under the path (GetParametersByPath), each a
// file by its last path element and a bundle by the names it holds.
func FetchCredential(ctx context.Context, cfg aws.Config, ssmPath string, del bool) (map[string][]byte, error) {
	client := ssm.NewFromConfig(cfg)
	bundle := strings.TrimSuffix(ssmPath, "/") + "/" + BundleName
	out, names, err := fetchBundle(ctx, client, bundle)
	if out == nil {
		var perr error
		out, names, perr = fetchPath(ctx, client, ssmPath)
		if perr != nil {
			return nil, errors.Join(err, perr)
		}
	}
	if len(out) == 0 {
		return nil, errors.Join(err, fmt.Errorf("reading SSM %s: no parameter there (deleted after an earlier read, not yet tagged with this instance, or the instance's role may not read it)", ssmPath))
	}
	if del {
		for len(names) > 0 {
			n := min(len(names), 10)
			if _, err := client.DeleteParameters(ctx, &ssm.DeleteParametersInput{Names: names[:n]}); err != nil {
				return out, fmt.Errorf("deleting SSM %s once read: %w", ssmPath, err)
			}
			names = names[n:]
		}
	}
	return out, nil
}

// fetchBundle reads the bundle parameter name: nil files when there is
// none, or it may not be read (err says why).
func fetchBundle(ctx context.Context, client *ssm.Client, name string) (map[string][]byte, []string, error) {
	got, err := client.GetParameters(ctx, &ssm.GetParametersInput{Names: []string{name}, WithDecryption: aws.Bool(true)})
	if err != nil {
		return nil, nil, fmt.Errorf("reading SSM %s: %w", name, err)
	}
	if len(got.Parameters) == 0 {
		return nil, nil, nil
	}
	files, err := decodeBundle(aws.ToString(got.Parameters[0].Value))
	if err != nil {
		return nil, nil, fmt.Errorf("reading SSM %s: %w", name, err)
	}
	return files, []string{name}, nil
}

// fetchPath reads every parameter under ssmPath.
func fetchPath(ctx context.Context, client *ssm.Client, ssmPath string) (map[string][]byte, []string, error) {
	p := ssm.NewGetParametersByPathPaginator(client, &ssm.GetParametersByPathInput{
		Path: aws.String(ssmPath), Recursive: aws.Bool(true), WithDecryption: aws.Bool(true)})
	out := map[string][]byte{}
	var names []string
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("reading SSM %s: %w", ssmPath, err)
		}
		for _, prm := range page.Parameters {
			n := aws.ToString(prm.Name)
			names = append(names, n)
			if path.Base(n) != BundleName {
				out[path.Base(n)] = []byte(aws.ToString(prm.Value))
				continue
			}
			files, err := decodeBundle(aws.ToString(prm.Value))
			if err != nil {
				return nil, nil, fmt.Errorf("reading SSM %s: %w", n, err)
			}
			for f, d := range files {
				out[f] = d
			}
		}
	}
	return out, names, nil
}
