package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
)

// The flags that more than one command takes are declared once, each with
// one help text, in groups: logFlags here, storeFlags (store.go) and
// engineFlags (engine.go). A command adds a group with one call and gets a
// value that makes what the flags name.

// logOpts is --log-level.
type logOpts struct{ level string }

func logFlags(fs *flag.FlagSet) *logOpts {
	o := &logOpts{}
	fs.StringVar(&o.level, "log-level", "info", "debug, info, warn or error (JSON logs on stderr)")
	return o
}

// logger returns the JSON logger on stderr at the level asked for.
func (o *logOpts) logger() (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(o.level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: l})), nil
}
