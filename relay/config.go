package relay

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/oncejob/oncejob/retry"
)

// EventTypes are the events a job announces; a sink subscribes to some.
var EventTypes = []string{
	"job.succeeded", "job.failed", "job.dead_lettered", "job.cancelled",
	"job.awaiting_approval", "job.outcome_unknown",
}

// SinkConfig is one sink of the `sinks:` section of the config file: where a
// tenant's events go. Exactly one of Webhook, JetStream and Chat is set.
type SinkConfig struct {
	// Name identifies the sink in deliveries; unique in the file. Required.
	Name string `yaml:"name"`
	// Tenant whose events the sink receives; no other tenant's reach it.
	// Required.
	Tenant string `yaml:"tenant"`
	// Pipelines, when set, keeps only events of jobs of these pipelines.
	Pipelines []string `yaml:"pipelines"`
	// Events the sink subscribes to (EventTypes). Required.
	Events []string `yaml:"events"`
	// Retry bounds the attempts of one delivery.
	Retry RetryPolicy `yaml:"retry"`

	Webhook   *WebhookConfig   `yaml:"webhook"`
	JetStream *JetStreamConfig `yaml:"jetstream"`
	Chat      *ChatConfig      `yaml:"chat"`
}

// RetryPolicy is a delivery's budget: full-jitter exponential backoff (at
// least the receiver's Retry-After), at most MaxAttempts attempts and
// MaxAge since the event was routed (or retried by hand); then the delivery
// is dead-lettered.
type RetryPolicy struct {
	// The attempts and their backoff: max_attempts (default 12),
	// initial_backoff (default 1s), max_backoff (default 10m), multiplier
	// (default 2).
	retry.Policy `yaml:",inline"`
	MaxAge       time.Duration `yaml:"max_age"` // default 24h
}

// WithDefaults returns the policy with zero fields set to their defaults.
func (p RetryPolicy) WithDefaults() RetryPolicy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = 12
	}
	if p.InitialBackoff == 0 {
		p.InitialBackoff = time.Second
	}
	if p.MaxBackoff == 0 {
		p.MaxBackoff = 10 * time.Minute
	}
	if p.Multiplier == 0 {
		p.Multiplier = 2
	}
	if p.MaxAge == 0 {
		p.MaxAge = 24 * time.Hour
	}
	return p
}

// WebhookConfig is an HTTP endpoint that receives Standard Webhooks 1.0
// requests.
type WebhookConfig struct {
	URL string `yaml:"url"`
	// Secret signs every request (whsec_ + base64). PreviousSecret, while a
	// secret rotates, signs too: the request carries both signatures.
	Secret         Secret  `yaml:"secret"`
	PreviousSecret *Secret `yaml:"previous_secret"`
	// Timeout of one request; default 10s.
	Timeout time.Duration `yaml:"timeout"`
	// AllowPrivateNetwork lets the sink reach loopback, private and
	// link-local addresses; off by default, so a tenant cannot make the
	// server call its own network.
	AllowPrivateNetwork bool `yaml:"allow_private_network"`
}

// JetStreamConfig is a NATS JetStream stream that dedups by message id.
type JetStreamConfig struct {
	URL string `yaml:"url"` // default nats://127.0.0.1:4222
	// Stream receives subjects <SubjectPrefix>.<tenant>.<event type>.
	Stream        string `yaml:"stream"`
	SubjectPrefix string `yaml:"subject_prefix"` // default "oncejob"
	// CreateStream creates (or updates) the stream at start with
	// DuplicateWindow; otherwise it must exist.
	CreateStream    bool          `yaml:"create_stream"`
	DuplicateWindow time.Duration `yaml:"duplicate_window"` // default 2m
	// Timeout of one publish's ack; default 5s.
	Timeout time.Duration `yaml:"timeout"`
}

// ChatConfig is a Slack-compatible incoming webhook.
type ChatConfig struct {
	// URL of the incoming webhook; it holds a token, so it is a Secret.
	URL Secret `yaml:"url"`
	// DedupTTL is how long a sent message keeps the same one from being
	// sent again; default 24h.
	DedupTTL            time.Duration `yaml:"dedup_ttl"`
	Timeout             time.Duration `yaml:"timeout"` // default 10s
	AllowPrivateNetwork bool          `yaml:"allow_private_network"`
}

// Secret is a value read from an environment variable or a file, never
// written in the config file itself and never logged.
type Secret struct {
	Env  string `yaml:"env"`
	File string `yaml:"file"`
}

// Resolve reads the secret.
func (s Secret) Resolve() (string, error) {
	switch {
	case s.Env != "" && s.File != "":
		return "", errors.New("set one of env and file, not both")
	case s.Env != "":
		v, ok := os.LookupEnv(s.Env)
		if !ok || v == "" {
			return "", fmt.Errorf("environment variable %s is not set", s.Env)
		}
		return v, nil
	case s.File != "":
		b, err := os.ReadFile(s.File)
		if err != nil {
			return "", fmt.Errorf("secret file: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return "", errors.New("set env or file")
}

// String never shows the value.
func (s Secret) String() string {
	if s.Env != "" {
		return "env:" + s.Env
	}
	return "file:" + s.File
}

var sinkName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// ValidateSinks checks a sinks section: names, tenants, events, one kind
// each.
func ValidateSinks(sinks []SinkConfig) error {
	seen := map[string]bool{}
	for i, s := range sinks {
		where := fmt.Sprintf("sinks[%d] (%s)", i, s.Name)
		if !sinkName.MatchString(s.Name) {
			return fmt.Errorf("%s: name must be 1-128 of A-Z a-z 0-9 _ . - starting with a letter or digit", where)
		}
		if seen[s.Name] {
			return fmt.Errorf("%s: name used twice", where)
		}
		seen[s.Name] = true
		if s.Tenant == "" {
			return fmt.Errorf("%s: tenant is required", where)
		}
		if len(s.Events) == 0 {
			return fmt.Errorf("%s: events is required, some of %s", where, strings.Join(EventTypes, ", "))
		}
		for _, e := range s.Events {
			if !slices.Contains(EventTypes, e) {
				return fmt.Errorf("%s: unknown event %q; known: %s", where, e, strings.Join(EventTypes, ", "))
			}
		}
		kinds := 0
		if s.Webhook != nil {
			kinds++
			if u, err := url.Parse(s.Webhook.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("%s: webhook.url must be an http or https URL", where)
			}
		}
		if s.JetStream != nil {
			kinds++
			if s.JetStream.Stream == "" {
				return fmt.Errorf("%s: jetstream.stream is required", where)
			}
		}
		if s.Chat != nil {
			kinds++
		}
		if kinds != 1 {
			return fmt.Errorf("%s: set exactly one of webhook, jetstream, chat", where)
		}
		if p := s.Retry; p.MaxAttempts < 0 || p.InitialBackoff < 0 || p.MaxBackoff < 0 || p.Multiplier < 0 || p.MaxAge < 0 {
			return fmt.Errorf("%s: retry values must not be negative", where)
		}
		if m := s.Retry.Multiplier; m > 0 && m < 1 {
			return fmt.Errorf("%s: retry.multiplier must be at least 1 (0 means 2): a backoff does not shrink", where)
		}
	}
	return nil
}
