// Package awssdk is where pond loads the AWS SDK's configuration (the EC2
// site, the S3 state backend): one place that gives the SDK pond's own
// logger, so that what the SDK has to say, such as "falling back to
// IMDSv1" when it looks for credentials off EC2, goes where POND_LOG and
// POND_LOG_PATH send pond's logs, at their level, and never straight to
// the terminal.
package awssdk

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/logging"
)

// Logger is the SDK's logger (logging.Logger), writing to a slog logger:
// the SDK's warnings at slog's WARN, its debug lines at DEBUG, each with
// source=aws-sdk. Its slog logger may be set after the SDK's
// configuration was loaded (Set), as long as no request was made.
type Logger struct {
	l atomic.Pointer[slog.Logger]
}

// NewLogger returns a Logger writing to l; nil writes nowhere.
func NewLogger(l *slog.Logger) *Logger {
	g := &Logger{}
	g.Set(l)
	return g
}

// Set makes the Logger write to l from now on; nil writes nowhere.
func (g *Logger) Set(l *slog.Logger) {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	g.l.Store(l)
}

// Logf implements logging.Logger.
func (g *Logger) Logf(c logging.Classification, format string, v ...any) {
	level := slog.LevelDebug
	if c == logging.Warn {
		level = slog.LevelWarn
	}
	l := g.l.Load()
	ctx := context.Background()
	if !l.Enabled(ctx, level) {
		return
	}
	l.Log(ctx, level, fmt.Sprintf(format, v...), "source", "aws-sdk")
}

// loggerKey is the context key of the logger Load gives the SDK.
type loggerKey struct{}

// NewContext returns ctx carrying l, the logger Load gives the SDK of
// what is loaded with ctx.
func NewContext(ctx context.Context, l *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey{}, l)
}

// FromContext returns the logger NewContext put in ctx, or nil.
func FromContext(ctx context.Context) *slog.Logger {
	l, _ := ctx.Value(loggerKey{}).(*slog.Logger)
	return l
}

// Load is config.LoadDefaultConfig with opts, whose SDK logs to the
// logger ctx carries (NewContext), and nowhere when it carries none;
// an opt of its own (config.WithLogger) comes later, and so wins.
func Load(ctx context.Context, opts ...func(*config.LoadOptions) error) (aws.Config, error) {
	all := append([]func(*config.LoadOptions) error{config.WithLogger(NewLogger(FromContext(ctx)))}, opts...)
	return config.LoadDefaultConfig(ctx, all...)
}
