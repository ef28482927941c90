package main

import (
	"context"
	"flag"

	"github.com/oncejob/oncejob/cmd/oncejob/internal/cmdline"
	"github.com/oncejob/oncejob/llm/llmsim"
)

// runLLMSim serves the deterministic LLM simulator: the OpenAI Chat
// Completions protocol and its Batch API (Files and Batches), plus billing stats, lookup by key and fault injection.
func runLLMSim(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("llm-sim", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8089", "listen address (keep it on loopback)")
	batchDelay := fs.Duration("batch-delay", 0, "how long a provider batch takes from creation to completed (0: done at the first look)")
	lf := logFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	logger, err := lf.logger()
	if err != nil {
		return err
	}
	if *batchDelay < 0 {
		return cmdline.UsageError("--batch-delay must not be negative")
	}
	return llmsim.Run(ctx, *addr, llmsim.Config{Logger: logger, BatchDelay: *batchDelay}, logger)
}
