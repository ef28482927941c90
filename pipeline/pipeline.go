// Package pipeline loads the pipelines a server runs: each a named, versioned
// recipe of prompt, model profiles, output schema and retry policy. A
// pipeline's version, its prompt version and the chosen model profile are
// part of a job's dedup key, so changing any of them makes new submissions a
// new computation.
package pipeline

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/oncejob/oncejob/retry"
)

// Pipeline is one configured pipeline.
type Pipeline struct {
	// Name identifies the pipeline in SubmitJob: 1-63 characters of
	// [a-z0-9_-], starting with a letter.
	Name string `yaml:"name"`
	// Version is bumped whenever the pipeline's logic changes; >= 1.
	Version int32 `yaml:"version"`
	// Prompt is the template sent to the model and its version.
	Prompt Prompt `yaml:"prompt"`
	// ModelProfiles are the profiles a job may ask for; the first is the
	// default. At least one.
	ModelProfiles []string `yaml:"model_profiles"`
	// OutputSchema is the validator: the JSON Schema the model's output must
	// satisfy. It is not sent to the model, so changing it re-runs validation
	// only, never a generation.
	OutputSchema map[string]any `yaml:"output_schema"`
	// ResponseFormat is the OpenAI response_format sent to the model;
	// default {"type": "json_object"}. Part of the llm_done stage key.
	ResponseFormat map[string]any `yaml:"response_format"`
	// Temperature sent to the model; default 0.
	Temperature float64 `yaml:"temperature"`
	// Chunking splits long documents; each chunk is one LLM call.
	Chunking Chunking `yaml:"chunking"`
	// RepairAttempts bounds the calls that ask the model to fix an output the
	// validator rejected; default 1. They count against the budget.
	RepairAttempts *int `yaml:"repair_attempts"`
	// OnUnknown is what a timeout after the request was sent leads to:
	// "retry" (default; the retry reuses the provider key) or "reconcile"
	// (the job waits in OUTCOME_UNKNOWN for the reconciler or ResolveJob).
	OnUnknown string `yaml:"on_unknown"`
	// RequireApproval stops the job in AWAITING_APPROVAL after validation,
	// its planned output visible, until ApproveJob.
	RequireApproval bool `yaml:"require_approval"`
	// Retry bounds the work spent on one job.
	Retry RetryPolicy `yaml:"retry"`

	// The JSON of OutputSchema and ResponseFormat, made once at load: a
	// pipeline does not change after it, and every job hashes and sends them.
	outputSchemaJSON   []byte
	responseFormatJSON []byte
}

// OutputSchemaJSON is OutputSchema as JSON (object keys sorted).
func (p *Pipeline) OutputSchemaJSON() []byte { return p.outputSchemaJSON }

// ResponseFormatJSON is ResponseFormat as JSON (object keys sorted).
func (p *Pipeline) ResponseFormatJSON() []byte { return p.responseFormatJSON }

// Chunking is size-based splitting with overlap, in characters (runes).
type Chunking struct {
	Size    int `yaml:"size"`    // default 8000
	Overlap int `yaml:"overlap"` // default 200; less than Size
}

// Prompt is a versioned prompt template.
type Prompt struct {
	Version  string `yaml:"version"`
	Template string `yaml:"template"`
}

// RetryPolicy bounds retries three ways: attempts, a total deadline and cost.
// Zero fields take the defaults of WithDefaults.
type RetryPolicy struct {
	// The attempts and their backoff: max_attempts (default 5),
	// initial_backoff (default 1s), max_backoff (default 1m), multiplier
	// (default 2).
	retry.Policy  `yaml:",inline"`
	Deadline      time.Duration `yaml:"deadline"`        // default 1h
	MaxCostTokens int64         `yaml:"max_cost_tokens"` // default 200000
}

// WithDefaults returns the policy with zero fields set to their defaults.
func (r RetryPolicy) WithDefaults() RetryPolicy {
	if r.MaxAttempts == 0 {
		r.MaxAttempts = 5
	}
	if r.InitialBackoff == 0 {
		r.InitialBackoff = time.Second
	}
	if r.MaxBackoff == 0 {
		r.MaxBackoff = time.Minute
	}
	if r.Multiplier == 0 {
		r.Multiplier = 2
	}
	if r.Deadline == 0 {
		r.Deadline = time.Hour
	}
	if r.MaxCostTokens == 0 {
		r.MaxCostTokens = 200_000
	}
	return r
}

// DefaultModelProfile is the profile a job gets when it names none.
func (p *Pipeline) DefaultModelProfile() string { return p.ModelProfiles[0] }

// AllowsModelProfile reports whether a job may ask for profile: one the
// pipeline names, or the batch twin of one (BatchTwinSuffix).
func (p *Pipeline) AllowsModelProfile(profile string) bool {
	if slices.Contains(p.ModelProfiles, profile) {
		return true
	}
	base, ok := strings.CutSuffix(profile, BatchTwinSuffix)
	return ok && slices.Contains(p.ModelProfiles, base)
}

// BatchTwinSuffix names a profile's batch twin: "default@batch" is the
// profile "default" with its calls sent through the provider's batch API
// (a ProviderBatch of the defaults). It is what a run with provider_batch
// gives its items (docs/architecture.md, "Provider batches"). The twin is
// another name, so another dedup key; the llm_done stage key names the
// model, not the profile, so a call the online profile already made is
// not made again.
const BatchTwinSuffix = "@batch"

// BatchTwin returns the profile that sends name's calls through the
// provider's batch API: name itself when it has a provider_batch, else its
// twin, name + BatchTwinSuffix.
func (r *Registry) BatchTwin(name string) string {
	if m, ok := r.profiles[name]; ok && m.ProviderBatch != nil {
		return name
	}
	if strings.HasSuffix(name, BatchTwinSuffix) {
		return name
	}
	return name + BatchTwinSuffix
}

// ModelProfile names a model and its price. Pipelines refer to profiles, so
// one profile can move to another model in one place (a new dedup key: the
// profile's name is in it, so bump a pipeline's version when a profile's
// model changes).
type ModelProfile struct {
	// Model is the provider's model name.
	Model string `yaml:"model"`
	// Prices in micro-units of currency per 1,000 tokens.
	PromptMicrosPer1K     int64 `yaml:"prompt_micros_per_1k"`
	CompletionMicrosPer1K int64 `yaml:"completion_micros_per_1k"`
	// ProviderBatch, when set, sends the profile's calls through the
	// provider's batch API (docs/architecture.md, "Provider batches").
	ProviderBatch *ProviderBatch `yaml:"provider_batch"`
	// Limits are the provider's limits on this profile's online calls: a
	// limit of its own, named after the profile. Unset, the calls are
	// paced by what the provider's answers say alone
	// (docs/architecture.md, "Provider limits").
	Limits *Limits `yaml:"limits"`
	// SharedLimit names an entry of provider_limits that this profile
	// draws from with the other profiles on the same account or
	// endpoint; not with Limits.
	SharedLimit string `yaml:"shared_limit"`
}

// Limits are a provider's limits. Zero sets no limit of that kind.
type Limits struct {
	RequestsPerMinute float64 `yaml:"requests_per_minute"`
	TokensPerMinute   float64 `yaml:"tokens_per_minute"`
	CallsInFlight     int     `yaml:"calls_in_flight"`
}

func (l Limits) validate() error {
	const most = 1e12
	if l.RequestsPerMinute < 0 || l.TokensPerMinute < 0 || l.CallsInFlight < 0 ||
		l.RequestsPerMinute > most || l.TokensPerMinute > most || l.CallsInFlight > 1_000_000 {
		return errors.New("requests_per_minute and tokens_per_minute must be 0-1e12, calls_in_flight 0-1000000")
	}
	return nil
}

// LimitOf names the limit a profile's online calls draw from: its shared
// limit, or its own (the profile's name; a batch twin's base profile's).
func (r *Registry) LimitOf(profile string) string {
	base := strings.TrimSuffix(profile, BatchTwinSuffix)
	if m, ok := r.profiles[base]; ok && m.SharedLimit != "" {
		return m.SharedLimit
	}
	return base
}

// ProviderLimits returns every limit by name (LimitOf): the configured
// values (zero: none configured) and the profiles that draw from it,
// sorted.
func (r *Registry) ProviderLimits() map[string]ProviderLimit {
	out := map[string]ProviderLimit{}
	for name, l := range r.shared {
		out[name] = ProviderLimit{Limits: l}
	}
	for name, m := range r.profiles {
		limit := r.LimitOf(name)
		pl := out[limit]
		if m.Limits != nil {
			pl.Limits = *m.Limits
		}
		pl.Profiles = append(pl.Profiles, name)
		sort.Strings(pl.Profiles)
		out[limit] = pl
	}
	return out
}

// ProviderLimit is one limit and the profiles drawing from it.
type ProviderLimit struct {
	Limits
	Profiles []string
}

// ProviderBatch bounds the batches a profile's calls are collected into.
type ProviderBatch struct {
	// MaxCalls closes a batch at this many calls. Default 1,000.
	MaxCalls int `yaml:"max_calls"`
	// MaxBytes closes a batch before its input file would pass this many
	// bytes (a call larger alone goes in a batch of its own). Default
	// 100 MiB; OpenAI takes files up to 200 MB.
	MaxBytes int64 `yaml:"max_bytes"`
	// Linger closes a batch this long after its first call. Default 1s.
	Linger time.Duration `yaml:"linger"`
	// PricePercent is the batch price in percent of the online price.
	// Default 50 (OpenAI's discount).
	PricePercent int64 `yaml:"price_percent"`
}

// WithDefaults returns b with zero fields set to their defaults.
func (b ProviderBatch) WithDefaults() ProviderBatch {
	if b.MaxCalls == 0 {
		b.MaxCalls = 1000
	}
	if b.MaxBytes == 0 {
		b.MaxBytes = 100 << 20
	}
	if b.Linger == 0 {
		b.Linger = time.Second
	}
	if b.PricePercent == 0 {
		b.PricePercent = 50
	}
	return b
}

// CostMicros is the price of one call's tokens.
func (m ModelProfile) CostMicros(promptTokens, completionTokens int64) int64 {
	return (promptTokens*m.PromptMicrosPer1K + completionTokens*m.CompletionMicrosPer1K) / 1000
}

// BatchCostMicros is the price of one call's tokens through the batch API.
func (m ModelProfile) BatchCostMicros(promptTokens, completionTokens int64) int64 {
	pct := int64(50)
	if m.ProviderBatch != nil {
		pct = m.ProviderBatch.WithDefaults().PricePercent
	}
	return m.CostMicros(promptTokens, completionTokens) * pct / 100
}

// BatchProfiles returns the names of the profiles with a provider batch,
// sorted.
func (r *Registry) BatchProfiles() []string {
	var names []string
	if r == nil {
		return nil
	}
	for name, m := range r.profiles {
		if m.ProviderBatch != nil {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// Registry is an immutable set of pipelines and model profiles by name.
type Registry struct {
	byName   map[string]*Pipeline
	profiles map[string]ModelProfile
	shared   map[string]Limits  // provider_limits, by name
	weights  map[string]float64 // tenant_weights
}

// TenantWeights are the tenants' weights in the provider limits' fair
// share (tenant_weights); a tenant not named weighs 1.
func (r *Registry) TenantWeights() map[string]float64 { return r.weights }

// Profile returns a model profile, or the batch twin of one
// (BatchTwinSuffix) of a profile that has no provider_batch of its own.
func (r *Registry) Profile(name string) (ModelProfile, bool) {
	if m, ok := r.profiles[name]; ok {
		return m, true
	}
	base, twin := strings.CutSuffix(name, BatchTwinSuffix)
	m, ok := r.profiles[base]
	if !twin || !ok {
		return ModelProfile{}, false
	}
	if m.ProviderBatch == nil {
		m.ProviderBatch = &ProviderBatch{}
	}
	return m, true
}

// Get returns the pipeline named name.
func (r *Registry) Get(name string) (*Pipeline, bool) {
	p, ok := r.byName[name]
	return p, ok
}

// Names returns the known pipeline names, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.byName))
	for n := range r.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

//go:embed builtin.yaml
var builtinYAML []byte

// Builtin returns the pipelines every server knows with no configuration:
// "summarize", version 1.
func Builtin() *Registry {
	r, err := Parse(builtinYAML)
	if err == nil {
		err = r.checkProfiles()
	}
	if err != nil {
		panic("pipeline: builtin.yaml is invalid: " + err.Error())
	}
	return r
}

// Load reads a pipelines file. Its pipelines are added to the built-in ones;
// a pipeline of the same name replaces the built-in one.
func Load(path string) (*Registry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	file, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	merged := Builtin()
	for name, p := range file.byName {
		merged.byName[name] = p
	}
	for name, m := range file.profiles {
		merged.profiles[name] = m
	}
	merged.shared = file.shared
	merged.weights = file.weights
	if err := merged.checkProfiles(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return merged, nil
}

// Parse reads pipelines from YAML of the form `pipelines: [...]` and
// validates each.
func Parse(data []byte) (*Registry, error) {
	var doc struct {
		ProviderLimits map[string]Limits       `yaml:"provider_limits"`
		TenantWeights  map[string]float64      `yaml:"tenant_weights"`
		ModelProfiles  map[string]ModelProfile `yaml:"model_profiles"`
		Pipelines      []*Pipeline             `yaml:"pipelines"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("parse pipelines: %w", err)
	}
	r := &Registry{byName: map[string]*Pipeline{}, profiles: map[string]ModelProfile{}, shared: map[string]Limits{}, weights: map[string]float64{}}
	for tenant, w := range doc.TenantWeights {
		if tenant == "" || !(w > 0 && w <= 1000) {
			return nil, fmt.Errorf("tenant_weights[%q]: a tenant and a weight above 0 and at most 1000 (a tenant's share of a busy limit against another's weight)", tenant)
		}
		r.weights[tenant] = w
	}
	for name, l := range doc.ProviderLimits {
		if !nameRE.MatchString(name) {
			return nil, fmt.Errorf("provider_limits[%q]: the name must match %s", name, nameRE)
		}
		if _, clash := doc.ModelProfiles[name]; clash {
			return nil, fmt.Errorf("provider_limits[%q]: a model profile has this name (a profile's own limit is named after it)", name)
		}
		if err := l.validate(); err != nil {
			return nil, fmt.Errorf("provider_limits[%q]: %w", name, err)
		}
		r.shared[name] = l
	}
	for name, m := range doc.ModelProfiles {
		if m.Limits != nil {
			if err := m.Limits.validate(); err != nil {
				return nil, fmt.Errorf("model_profiles[%q].limits: %w", name, err)
			}
		}
		if m.SharedLimit != "" {
			if _, ok := r.shared[m.SharedLimit]; !ok || m.Limits != nil {
				return nil, fmt.Errorf("model_profiles[%q].shared_limit: %q must name an entry of provider_limits, and the profile then has no limits of its own", name, m.SharedLimit)
			}
		}
	}
	for name, m := range doc.ModelProfiles {
		if name == "" || m.Model == "" || m.PromptMicrosPer1K < 0 || m.CompletionMicrosPer1K < 0 {
			return nil, fmt.Errorf("model_profiles[%q]: a name, a model and non-negative prices are required", name)
		}
		if b := m.ProviderBatch; b != nil && (b.MaxCalls < 0 || b.MaxCalls > 50_000 || b.MaxBytes < 0 || b.MaxBytes > 200_000_000 || b.Linger < 0 || b.PricePercent < 0 || b.PricePercent > 100) {
			return nil, fmt.Errorf("model_profiles[%q].provider_batch: max_calls 0-50000, max_bytes 0-200000000, linger and price_percent 0-100 not negative", name)
		}
		r.profiles[name] = m
	}
	for i, p := range doc.Pipelines {
		if err := p.validate(); err != nil {
			return nil, fmt.Errorf("pipelines[%d] %q: %w", i, p.Name, err)
		}
		if _, dup := r.byName[p.Name]; dup {
			return nil, fmt.Errorf("pipelines[%d]: duplicate name %q", i, p.Name)
		}
		p.applyDefaults()
		r.byName[p.Name] = p
	}
	return r, nil
}

// checkProfiles reports a pipeline that names an undefined profile.
func (r *Registry) checkProfiles() error {
	for _, name := range r.Names() {
		for _, prof := range r.byName[name].ModelProfiles {
			if _, ok := r.profiles[prof]; !ok {
				return fmt.Errorf("pipeline %q: model profile %q is not defined under model_profiles", name, prof)
			}
		}
	}
	return nil
}

// The values OnUnknown takes.
const (
	OnUnknownRetry     = "retry"
	OnUnknownReconcile = "reconcile"
)

func (p *Pipeline) applyDefaults() {
	p.Retry = p.Retry.WithDefaults()
	if p.ResponseFormat == nil {
		p.ResponseFormat = map[string]any{"type": "json_object"}
	}
	p.responseFormatJSON, _ = json.Marshal(p.ResponseFormat) // YAML maps always marshal
	p.outputSchemaJSON, _ = json.Marshal(p.OutputSchema)     // validated to marshal
	if p.Chunking.Size == 0 {
		p.Chunking.Size = 8000
	}
	if p.Chunking.Overlap == 0 && p.Chunking.Size > 200 {
		p.Chunking.Overlap = 200
	}
	if p.RepairAttempts == nil {
		one := 1
		p.RepairAttempts = &one
	}
	if p.OnUnknown == "" {
		p.OnUnknown = OnUnknownRetry
	}
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)

func (p *Pipeline) validate() error {
	var errs []error
	if !nameRE.MatchString(p.Name) {
		errs = append(errs, errors.New("name must match "+nameRE.String()))
	}
	if p.Version < 1 {
		errs = append(errs, errors.New("version must be >= 1"))
	}
	if strings.TrimSpace(p.Prompt.Version) == "" {
		errs = append(errs, errors.New("prompt.version is required"))
	}
	if strings.TrimSpace(p.Prompt.Template) == "" {
		errs = append(errs, errors.New("prompt.template is required"))
	}
	if len(p.ModelProfiles) == 0 {
		errs = append(errs, errors.New("model_profiles needs at least one profile"))
	}
	if p.OutputSchema == nil {
		errs = append(errs, errors.New("output_schema is required"))
	} else if _, err := json.Marshal(p.OutputSchema); err != nil {
		errs = append(errs, fmt.Errorf("output_schema: %w", err))
	}
	if p.Chunking.Size < 0 || p.Chunking.Overlap < 0 || (p.Chunking.Size > 0 && p.Chunking.Overlap >= p.Chunking.Size) {
		errs = append(errs, errors.New("chunking: size and overlap must not be negative, overlap less than size"))
	}
	if p.RepairAttempts != nil && (*p.RepairAttempts < 0 || *p.RepairAttempts > 10) {
		errs = append(errs, errors.New("repair_attempts must be 0-10"))
	}
	if p.OnUnknown != "" && p.OnUnknown != OnUnknownRetry && p.OnUnknown != OnUnknownReconcile {
		errs = append(errs, errors.New(`on_unknown must be "retry" or "reconcile"`))
	}
	if p.Temperature < 0 || p.Temperature > 2 {
		errs = append(errs, errors.New("temperature must be 0-2"))
	}
	if p.Retry.MaxAttempts < 0 || p.Retry.Multiplier < 0 || p.Retry.MaxCostTokens < 0 {
		errs = append(errs, errors.New("retry values must not be negative"))
	} else if p.Retry.Multiplier > 0 && p.Retry.Multiplier < 1 {
		errs = append(errs, errors.New("retry.multiplier must be at least 1 (0 means 2): a backoff does not shrink"))
	}
	return errors.Join(errs...)
}
