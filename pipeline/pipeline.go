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
	// OutputSchema is the JSON Schema the model's output must satisfy.
	OutputSchema map[string]any `yaml:"output_schema"`
	// Retry bounds the work spent on one job.
	Retry RetryPolicy `yaml:"retry"`
}

// Prompt is a versioned prompt template.
type Prompt struct {
	Version  string `yaml:"version"`
	Template string `yaml:"template"`
}

// RetryPolicy bounds retries three ways: attempts, a total deadline and cost.
// Zero fields take the defaults of WithDefaults.
type RetryPolicy struct {
	MaxAttempts    int           `yaml:"max_attempts"`    // default 5
	InitialBackoff time.Duration `yaml:"initial_backoff"` // default 1s
	MaxBackoff     time.Duration `yaml:"max_backoff"`     // default 1m
	Multiplier     float64       `yaml:"multiplier"`      // default 2
	Deadline       time.Duration `yaml:"deadline"`        // default 1h
	MaxCostTokens  int64         `yaml:"max_cost_tokens"` // default 200000
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

// AllowsModelProfile reports whether a job may ask for profile.
func (p *Pipeline) AllowsModelProfile(profile string) bool {
	return slices.Contains(p.ModelProfiles, profile)
}

// Registry is an immutable set of pipelines by name.
type Registry struct {
	byName map[string]*Pipeline
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
	return merged, nil
}

// Parse reads pipelines from YAML of the form `pipelines: [...]` and
// validates each.
func Parse(data []byte) (*Registry, error) {
	var doc struct {
		Pipelines []*Pipeline `yaml:"pipelines"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("parse pipelines: %w", err)
	}
	r := &Registry{byName: map[string]*Pipeline{}}
	for i, p := range doc.Pipelines {
		if err := p.validate(); err != nil {
			return nil, fmt.Errorf("pipelines[%d] %q: %w", i, p.Name, err)
		}
		if _, dup := r.byName[p.Name]; dup {
			return nil, fmt.Errorf("pipelines[%d]: duplicate name %q", i, p.Name)
		}
		p.Retry = p.Retry.WithDefaults()
		r.byName[p.Name] = p
	}
	return r, nil
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
	if p.Retry.MaxAttempts < 0 || p.Retry.Multiplier < 0 || p.Retry.MaxCostTokens < 0 {
		errs = append(errs, errors.New("retry values must not be negative"))
	}
	return errors.Join(errs...)
}
