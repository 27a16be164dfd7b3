// Package s3 stores pond's state as an object in an Amazon S3 bucket (or
// any S3-compatible store), with the previous document kept as a backup
// object and a lock object created with a conditional write.
//
// Locking: the lock is the object "<key>.lock", created with PutObject and
// If-None-Match: * so that only one creator succeeds; it holds the
// state.LockInfo as JSON. Writing: the state object is replaced with a
// conditional PutObject (If-Match on the ETag read just before, or
// If-None-Match: * when there was none), so that a write never silently
// overwrites a document changed by someone else in between.
//
// Both conditions are part of the S3 API (conditional writes) and are
// honoured by moto, which the tests run against; moto evaluates them without
// making check and write one atomic step, so its guarantee under truly
// simultaneous requests is weaker than S3's, and the tests pass it one
// request at a time.
package s3

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/pond-htc/pond/overlay/awssdk"
	"github.com/pond-htc/pond/state"
)

// Suffixes of the objects kept beside the state object.
const (
	BackupSuffix = ".backup"
	LockSuffix   = ".lock"
)

// Config locates the state object and says how to reach it.
type Config struct {
	// Bucket and Key name the state object. Both are required.
	Bucket string
	Key    string
	// Region is the bucket's region; when empty it comes from the
	// environment or the shared configuration, as the AWS CLI does.
	Region string
	// Endpoint overrides the S3 endpoint URL (for S3-compatible stores).
	Endpoint string
	// Profile selects a shared configuration profile.
	Profile string
	// ForcePathStyle addresses the bucket in the path rather than the host
	// name, as most S3-compatible stores need.
	ForcePathStyle bool
	// AccessKey, SecretKey and SessionToken are static credentials; when
	// empty the default credential chain is used.
	AccessKey    string
	SecretKey    string
	SessionToken string
}

// Backend stores the state in S3.
type Backend struct {
	client *s3.Client
	bucket string
	key    string
}

var _ state.Backend = (*Backend)(nil)

// New checks cfg and builds a client. It does not contact S3.
func New(ctx context.Context, cfg Config) (*Backend, error) {
	if cfg.Bucket == "" {
		return nil, errors.New(`s3 backend: "bucket" is required`)
	}
	if cfg.Key == "" {
		return nil, errors.New(`s3 backend: "key" is required`)
	}
	if (cfg.AccessKey == "") != (cfg.SecretKey == "") {
		return nil, errors.New(`s3 backend: "access_key" and "secret_key" must be given together`)
	}
	var opts []func(*config.LoadOptions) error
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.Profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(cfg.Profile))
	}
	if cfg.AccessKey != "" {
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken)))
	}
	awsCfg, err := awssdk.Load(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3 backend: load AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		return nil, errors.New(`s3 backend: no region: set "region", AWS_REGION or a profile's region`)
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.ForcePathStyle
		// State written by other tools (or by S3 emulators) may carry no
		// checksum; the SDK would print a line on every read saying so.
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	return &Backend{client: client, bucket: cfg.Bucket, key: cfg.Key}, nil
}

// URL names the state object as s3://bucket/key.
func (b *Backend) URL() string { return "s3://" + b.bucket + "/" + b.key }

func (b *Backend) lockKey() string   { return b.key + LockSuffix }
func (b *Backend) backupKey() string { return b.key + BackupSuffix }

// get returns an object's body and ETag; found is false when it does not
// exist.
func (b *Backend) get(ctx context.Context, key string) (data []byte, etag string, found bool, err error) {
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &b.bucket, Key: &key})
	if err != nil {
		var nsk *types.NoSuchKey
		if errors.As(err, &nsk) || httpStatus(err) == http.StatusNotFound {
			return nil, "", false, nil
		}
		return nil, "", false, err
	}
	defer out.Body.Close()
	data, err = io.ReadAll(out.Body)
	if err != nil {
		return nil, "", false, err
	}
	return data, aws.ToString(out.ETag), true, nil
}

// Read returns the stored state, or (nil, nil) when the object does not
// exist.
func (b *Backend) Read(ctx context.Context) (*state.State, error) {
	s, _, _, err := b.read(ctx)
	return s, err
}

func (b *Backend) read(ctx context.Context) (*state.State, []byte, string, error) {
	data, etag, found, err := b.get(ctx, b.key)
	if err != nil {
		return nil, nil, "", fmt.Errorf("read state %s: %w", b.URL(), err)
	}
	if !found {
		return nil, nil, "", nil
	}
	s, err := state.Decode(data, b.URL())
	if err != nil {
		return nil, nil, "", fmt.Errorf("read state: %w", err)
	}
	return s, data, etag, nil
}

// Write stores s unless its content equals the stored document's (see
// state.PrepareWrite, which sets s.Serial). The previous document is first
// copied to "<key>.backup". The state object is replaced only if it is
// still the one just read; an object that cannot be decoded is never
// overwritten.
func (b *Backend) Write(ctx context.Context, s *state.State) error {
	if s == nil {
		return errors.New("write state: nil state")
	}
	stored, old, etag, err := b.read(ctx)
	if err != nil {
		return fmt.Errorf("refusing to overwrite %s: %w", b.URL(), err)
	}
	next := s.DeepCopy()
	if !state.PrepareWrite(stored, next) {
		s.Serial = next.Serial
		return nil
	}
	data, err := state.Encode(next)
	if err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if old != nil {
		if _, err := b.client.PutObject(ctx, &s3.PutObjectInput{
			Bucket: &b.bucket, Key: aws.String(b.backupKey()), Body: bytes.NewReader(old),
			ContentType: aws.String("application/json"),
		}); err != nil {
			return fmt.Errorf("write state backup s3://%s/%s: %w", b.bucket, b.backupKey(), err)
		}
	}
	in := &s3.PutObjectInput{
		Bucket: &b.bucket, Key: &b.key, Body: bytes.NewReader(data),
		ContentType: aws.String("application/json"),
	}
	if old != nil {
		in.IfMatch = aws.String(etag)
	} else {
		in.IfNoneMatch = aws.String("*")
	}
	if _, err := b.client.PutObject(ctx, in); err != nil {
		if conditionFailed(err) {
			return fmt.Errorf("write state %s: the state changed while it was being written (another writer not holding the lock?); nothing was overwritten, run the command again: %w", b.URL(), err)
		}
		return fmt.Errorf("write state %s: %w", b.URL(), err)
	}
	s.Serial = next.Serial
	s.FormatVersion = next.FormatVersion
	return nil
}

// Lock creates the lock object if it does not exist. When it does, the
// error is a *state.LockError describing the holder.
func (b *Backend) Lock(ctx context.Context, info state.LockInfo) (string, error) {
	info.Complete(b.URL())
	data, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return "", fmt.Errorf("lock state: %w", err)
	}
	_, err = b.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &b.bucket, Key: aws.String(b.lockKey()), Body: bytes.NewReader(data),
		ContentType: aws.String("application/json"),
		IfNoneMatch: aws.String("*"),
	})
	if err == nil {
		return info.ID, nil
	}
	if conditionFailed(err) {
		return "", b.lockError(ctx)
	}
	return "", fmt.Errorf("lock state %s: %w", b.URL(), err)
}

func (b *Backend) holder(ctx context.Context) (*state.LockInfo, bool, error) {
	data, _, found, err := b.get(ctx, b.lockKey())
	if err != nil || !found {
		return nil, found, err
	}
	var info state.LockInfo
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, true, fmt.Errorf("lock object s3://%s/%s is unreadable (%v): if no pondctl is running, delete it", b.bucket, b.lockKey(), err)
	}
	return &info, true, nil
}

func (b *Backend) lockError(ctx context.Context) error {
	info, found, err := b.holder(ctx)
	switch {
	case err != nil:
		return state.UnreadableLockError(err.Error())
	case !found:
		return state.UnreadableLockError(fmt.Sprintf("lock object s3://%s/%s was released while being read", b.bucket, b.lockKey()))
	}
	return &state.LockError{Info: info, HolderGone: info.HolderGone(), Where: fmt.Sprintf("lock object s3://%s/%s", b.bucket, b.lockKey()), Err: state.ErrLocked}
}

// Unlock deletes the lock object if id is the holder's.
func (b *Backend) Unlock(ctx context.Context, id string) error {
	return b.unlock(ctx, id, "unlock")
}

// ForceUnlock deletes the lock object whatever process holds it, if id is
// the lock's ID.
func (b *Backend) ForceUnlock(ctx context.Context, id string) error {
	return b.unlock(ctx, id, "force-unlock")
}

func (b *Backend) unlock(ctx context.Context, id, op string) error {
	info, found, err := b.holder(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if !found {
		return fmt.Errorf("%s: state %s is not locked", op, b.URL())
	}
	if info.ID != id {
		return fmt.Errorf("%s: lock ID %q does not match the lock held by %s (operation %s, lock ID %s)", op, id, info.Who, info.Operation, info.ID)
	}
	if _, err := b.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &b.bucket, Key: aws.String(b.lockKey())}); err != nil {
		return fmt.Errorf("%s: delete s3://%s/%s: %w", op, b.bucket, b.lockKey(), err)
	}
	return nil
}

// conditionFailed reports whether err is S3 refusing a conditional write:
// 412 Precondition Failed, or 409 ConditionalRequestConflict when two
// conditional writes race.
func conditionFailed(err error) bool {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "PreconditionFailed", "ConditionalRequestConflict":
			return true
		}
	}
	s := httpStatus(err)
	return s == http.StatusPreconditionFailed || s == http.StatusConflict
}

func httpStatus(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}
