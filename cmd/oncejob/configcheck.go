package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/oncejob/oncejob/cmd/oncejob/internal/cmdline"
	"github.com/oncejob/oncejob/config"
	"github.com/oncejob/oncejob/pipeline"
)

// mask replaces a secret when the effective configuration is shown.
const mask = "****"

// runConfigCheck is `oncejob config check`: it reads the config file as serve,
// worker and relay would (file, then ONCEJOB_* variables), refuses what
// they would refuse (an unknown key, a value a flag does not take, a bad
// sink, TLS files that do not load), and prints the effective
// configuration, secrets masked, each value with where it came from.
func runConfigCheck(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("config check", flag.ContinueOnError)
	path := configFlag(fs)
	setUsage(fs)
	if err := cmdline.ParseArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cmdline.UsageError("no arguments expected, got %q", fs.Args())
	}
	if *path == "" {
		*path = os.Getenv("ONCEJOB_CONFIG")
	}
	if *path == "" {
		return cmdline.UsageError("--config (or ONCEJOB_CONFIG) is required")
	}
	eff, err := effectiveConfig(*path)
	if err != nil {
		return err
	}
	return eff.write(os.Stdout)
}

// effective is the configuration serve, worker and relay would run with
// (before their command-line flags).
type effective struct {
	file  *config.File
	flags []effectiveFlag
}

type effectiveFlag struct {
	name, value, source string
	commands            []string // those that have it
}

func effectiveConfig(path string) (*effective, error) {
	file, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	byName := map[string]*effectiveFlag{}
	eff := &effective{file: file}
	for _, c := range configCommands() {
		fs, err := commandFlags(c.run)
		if err != nil {
			return nil, err
		}
		fromFile, err := applyFile(fs, file)
		if err != nil {
			return nil, err
		}
		fromEnv, err := applyEnv(fs)
		if err != nil {
			return nil, err
		}
		fs.VisitAll(func(f *flag.Flag) {
			if f.Name == "config" {
				return
			}
			if e := byName[f.Name]; e != nil {
				e.commands = append(e.commands, c.name)
				return
			}
			source := "default"
			switch {
			case slices.Contains(fromEnv, f.Name):
				source = "env " + envName(f.Name)
			case slices.Contains(fromFile, f.Name):
				source = "file"
			}
			byName[f.Name] = &effectiveFlag{name: f.Name, value: f.Value.String(), source: source, commands: []string{c.name}}
		})
	}
	for _, e := range byName {
		eff.flags = append(eff.flags, *e)
	}
	slices.SortFunc(eff.flags, func(a, b effectiveFlag) int { return strings.Compare(a.name, b.name) })
	if err := eff.checkTLS(); err != nil {
		return nil, err
	}
	return eff, nil
}

func (e *effective) value(name string) string {
	for _, f := range e.flags {
		if f.name == name {
			return f.value
		}
	}
	return ""
}

// checkTLS loads the TLS files as serve would at start.
func (e *effective) checkTLS() error {
	o := &tlsOpts{cert: e.value("tls-cert"), key: e.value("tls-key"), clientCA: e.value("tls-client-ca")}
	_, err := o.reloader(slog.New(slog.DiscardHandler))
	return err
}

// write prints the configuration as YAML that is itself a valid config
// file (with the secrets masked), each value's source in a comment.
func (e *effective) write(w io.Writer) error {
	doc := &yaml.Node{Kind: yaml.MappingNode}
	doc.HeadComment = fmt.Sprintf("%s is valid. The configuration of serve, worker and relay from it and\nthe ONCEJOB_* variables (flags on a command line override both);\nsecrets masked, sink secrets shown as the references the file holds.", e.file.Path)
	all := len(configCommands())
	for _, f := range e.flags {
		comment := f.source
		if len(f.commands) < all {
			comment += "; " + strings.Join(f.commands, ", ") + " only"
		}
		doc.Content = append(doc.Content,
			&yaml.Node{Kind: yaml.ScalarNode, Value: f.name},
			&yaml.Node{Kind: yaml.ScalarNode, Value: maskValue(f.name, f.value), LineComment: comment})
	}
	if len(e.file.Sinks) > 0 {
		var sinks yaml.Node
		if err := sinks.Encode(e.file.Sinks); err != nil {
			return err
		}
		maskNode(&sinks, "")
		pruneZero(&sinks)
		doc.Content = append(doc.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "sinks"}, &sinks)
	}
	if e.file.Limits != nil {
		// Not pruned: an override's 0 is "no limit", not a default.
		var lim yaml.Node
		if err := lim.Encode(e.file.Limits); err != nil {
			return err
		}
		doc.Content = append(doc.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "limits"}, &lim)
	}
	limits, err := e.providerLimits()
	if err != nil {
		return err
	}
	doc.Content = append(doc.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "provider_limits"}, limits)
	if weights := e.tenantWeights(); len(weights) > 0 {
		var w yaml.Node
		if err := w.Encode(weights); err != nil {
			return err
		}
		w.HeadComment = "Each tenant's share of a busy limit against the others' (1 unless named)."
		doc.Content = append(doc.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "tenant_weights"}, &w)
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return err
	}
	return enc.Close()
}

// tenantWeights is the tenant_weights of the pipelines file, if it loads
// (providerLimits reports one that does not).
func (e *effective) tenantWeights() map[string]float64 {
	if path := e.value("pipelines"); path != "" {
		if reg, err := pipeline.Load(path); err == nil {
			return reg.TenantWeights()
		}
	}
	return nil
}

// providerLimits is the provider limits of the pipelines serve and worker
// would load (pipeline.Registry.ProviderLimits), each with the profiles
// that draw from it; a limit none configured says it is paced by the
// provider's answers alone.
func (e *effective) providerLimits() (*yaml.Node, error) {
	reg := pipeline.Builtin()
	if path := e.value("pipelines"); path != "" {
		var err error
		if reg, err = pipeline.Load(path); err != nil {
			return nil, err
		}
	}
	all := reg.ProviderLimits()
	names := make([]string, 0, len(all))
	for name := range all {
		names = append(names, name)
	}
	slices.Sort(names)
	node := &yaml.Node{Kind: yaml.MappingNode, HeadComment: "Per minute, shared by every process on one store; 0: none configured, the\nprovider's x-ratelimit-* headers and 429s set the pace."}
	for _, name := range names {
		l := all[name]
		var v yaml.Node
		if err := v.Encode(struct {
			RequestsPerMinute float64  `yaml:"requests_per_minute"`
			TokensPerMinute   float64  `yaml:"tokens_per_minute"`
			CallsInFlight     int      `yaml:"calls_in_flight"`
			Profiles          []string `yaml:"profiles,flow"`
		}{l.RequestsPerMinute, l.TokensPerMinute, l.CallsInFlight, l.Profiles}); err != nil {
			return nil, err
		}
		key := &yaml.Node{Kind: yaml.ScalarNode, Value: name}
		if l.Limits == (pipeline.Limits{}) {
			key.LineComment = "none configured: paced by the provider's answers"
		}
		node.Content = append(node.Content, key, &v)
	}
	return node, nil
}

// maskValue hides the value of a secret flag, and the password of a URL
// (in its user information or its query) whatever the flag.
func maskValue(name, value string) string {
	if value == "" {
		return ""
	}
	if secretFlag(name) {
		return mask
	}
	u, err := url.Parse(value)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return value
	}
	changed := false
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), mask)
		changed = true
	}
	q := u.Query()
	for k := range q {
		if secretFlag(k) {
			q.Set(k, mask)
			changed = true
		}
	}
	if !changed {
		return value
	}
	u.RawQuery = strings.ReplaceAll(q.Encode(), url.QueryEscape(mask), mask)
	return strings.Replace(u.String(), url.PathEscape(mask), mask, 1)
}

// maskNode masks the scalars of a sinks section that may hold a secret: a
// URL's password, and any field named as a secret.
func maskNode(n *yaml.Node, key string) {
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			maskNode(c, key)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			// A secret's reference ({env: NAME} or {file: PATH}) holds no
			// secret, and is shown.
			maskNode(n.Content[i+1], n.Content[i].Value)
		}
	case yaml.ScalarNode:
		if key != "" && n.Tag == "!!str" {
			n.Value = maskValue(key, n.Value)
		}
	case yaml.AliasNode:
	}
}

// pruneZero drops the fields of a sinks section left at their zero value
// (their defaults apply), so the section reads as it was written.
func pruneZero(n *yaml.Node) {
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for _, c := range n.Content {
			pruneZero(c)
		}
	case yaml.MappingNode:
		kept := n.Content[:0]
		for i := 0; i+1 < len(n.Content); i += 2 {
			v := n.Content[i+1]
			pruneZero(v)
			if isZero(v) {
				continue
			}
			kept = append(kept, n.Content[i], v)
		}
		n.Content = kept
	case yaml.ScalarNode, yaml.AliasNode:
	}
}

func isZero(n *yaml.Node) bool {
	switch n.Kind {
	case yaml.ScalarNode:
		return n.Tag == "!!null" || slices.Contains([]string{"", "0", "0s", "false"}, n.Value)
	case yaml.MappingNode, yaml.SequenceNode:
		return len(n.Content) == 0
	default:
		return false
	}
}
