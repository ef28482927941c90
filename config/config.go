// Package config reads oncejob's config file (--config FILE): one YAML
// document whose top-level sections each configure one part of the server.
// Today it has one section, `sinks:` (where the tenants' events go); others
// are meant to join it, so unknown sections are refused rather than ignored:
// a typo must not silently drop a sink.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"go.yaml.in/yaml/v3"

	"github.com/oncejob/oncejob/relay"
)

// File is the config file.
type File struct {
	// Sinks are where the tenants' events are delivered; see relay.SinkConfig.
	Sinks []relay.SinkConfig `yaml:"sinks"`
}

// Load reads and validates the file at path; an empty path is an empty
// config. Secrets are references (env, file), resolved when a sink opens,
// so the file itself holds none.
func Load(path string) (*File, error) {
	if path == "" {
		return &File{}, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(data)
}

// Parse reads and validates a config document.
func Parse(data []byte) (*File, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := relay.ValidateSinks(f.Sinks); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return &f, nil
}
