package main

import (
	"context"
	"flag"

	"github.com/oncejob/oncejob/llm/llmsim"
)

// runLLMSim serves the deterministic LLM simulator: the OpenAI Chat
// Completions protocol plus billing stats, lookup by key and fault injection.
func runLLMSim(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("llm-sim", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8089", "listen address (keep it on loopback)")
	lf := logFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	logger, err := lf.logger()
	if err != nil {
		return err
	}
	return llmsim.Run(ctx, *addr, llmsim.Config{Logger: logger}, logger)
}
