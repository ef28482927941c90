// Package config reads oncejob's config file (--config FILE): one YAML
// document holding the flags of serve, worker and relay by name, and the
// sections `sinks:` (where the tenants' events go) and `limits:` (per-tenant
// limits).
//
// Every key other than a section (`sinks`, `limits`; see File.sections)
// names a flag: `workers: 8` is --workers 8.
// Sections nest for readability, their names joined by dashes, so
//
//	tls:
//	  cert: /etc/oncejob/tls.crt
//
// is --tls-cert; underscores read as dashes. A list of scalars is the
// comma-separated value. Which names are flags is the command's business
// (Settings are checked against its flag sets), so a typo is an error there,
// never silently dropped; a key of the sinks section that is not known is
// an error here.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/oncejob/oncejob/relay"
	"github.com/oncejob/oncejob/server/limits"
)

// File is the config file.
type File struct {
	// Path is the file read; empty for a document parsed from memory.
	Path string
	// Sinks are where the tenants' events are delivered; see relay.SinkConfig.
	Sinks []relay.SinkConfig
	// Limits are per-tenant limits: defaults that replace the --limit-*
	// flags they set, and tenants' own; see limits.Section.
	Limits *limits.Section
	// Settings are the flag values of the file, by flag name, in the
	// file's order.
	Settings []Setting
}

// Setting is one flag's value in the file.
type Setting struct {
	Name  string // the flag's name: the key, with its sections, dashed
	Value string
	Line  int // in the file, for errors
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
	f, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f.Path = path
	return f, nil
}

// Parse reads and validates a config document.
func Parse(data []byte) (*File, error) {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config: %w", err)
	}
	f := &File{}
	if len(doc.Content) == 0 {
		return f, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("config: line %d: want a mapping of flag names and sections", root.Line)
	}
	sections := f.sections()
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if target, ok := sections[k.Value]; ok {
			if err := decodeStrict(k.Value, v, target); err != nil {
				return nil, err
			}
			continue
		}
		if err := flatten(k, v, "", &f.Settings); err != nil {
			return nil, err
		}
	}
	seen := map[string]int{}
	for _, s := range f.Settings {
		if line, dup := seen[s.Name]; dup {
			return nil, fmt.Errorf("config: line %d: %q is set twice (first on line %d)", s.Line, s.Name, line)
		}
		seen[s.Name] = s.Line
	}
	if err := relay.ValidateSinks(f.Sinks); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if f.Limits != nil {
		if _, err := limits.New(limits.Config{Section: f.Limits, Usage: limits.AnyUsage}); err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
	}
	return f, nil
}

// sections are the top-level keys that are not flags, each decoded into
// its field of f.
func (f *File) sections() map[string]any {
	return map[string]any{"sinks": &f.Sinks, "limits": &f.Limits}
}

// decodeStrict decodes a section into target strictly: an unknown field
// is an error (a typo must not silently drop a sink's setting).
// yaml.Node.Decode has no strict mode, so the section is decoded again
// from its text.
func decodeStrict(name string, n *yaml.Node, target any) error {
	text, err := yaml.Marshal(n)
	if err != nil {
		return fmt.Errorf("config: %s: %w", name, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(text))
	dec.KnownFields(true)
	if err := dec.Decode(target); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("config: %s (line %d): %w", name, n.Line, err)
	}
	return nil
}

// flatten appends the settings of key k with value v under prefix.
func flatten(k, v *yaml.Node, prefix string, out *[]Setting) error {
	if k.Kind != yaml.ScalarNode || k.Value == "" {
		return fmt.Errorf("config: line %d: a key must be a name", k.Line)
	}
	name := prefix + strings.ReplaceAll(k.Value, "_", "-")
	switch v.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(v.Content); i += 2 {
			if err := flatten(v.Content[i], v.Content[i+1], name+"-", out); err != nil {
				return err
			}
		}
		return nil
	case yaml.SequenceNode:
		items := make([]string, 0, len(v.Content))
		for _, item := range v.Content {
			if item.Kind != yaml.ScalarNode {
				return fmt.Errorf("config: line %d: %q: a list holds plain values only", item.Line, name)
			}
			items = append(items, item.Value)
		}
		*out = append(*out, Setting{Name: name, Value: strings.Join(items, ","), Line: k.Line})
		return nil
	case yaml.ScalarNode:
		value := v.Value
		if v.Tag == "!!null" {
			value = ""
		}
		*out = append(*out, Setting{Name: name, Value: value, Line: k.Line})
		return nil
	default:
		return fmt.Errorf("config: line %d: %q: want a value, a list or a section", k.Line, name)
	}
}
