package main

import (
	"context"
	"flag"
	"time"

	"github.com/oncejob/oncejob/cmd/oncejob/internal/cmdline"
	"github.com/oncejob/oncejob/llm/llmsim"
)

// runLLMSim serves the deterministic LLM simulator: the OpenAI Chat
// Completions protocol and its Batch API (Files and Batches), plus billing stats, lookup by key and fault injection.
func runLLMSim(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("llm-sim", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8089", "listen address (keep it on loopback)")
	batchDelay := fs.Duration("batch-delay", 0, "how long a provider batch takes from creation to completed (0: done at the first look)")
	var limits llmsim.Limits
	fs.Int64Var(&limits.Requests, "limit-requests", 0, "requests per --limit-window the provider admits, refilling continuously; more is answered 429 (0: no limit)")
	fs.Int64Var(&limits.Tokens, "limit-tokens", 0, "tokens (prompt and completion) per --limit-window the provider admits (0: no limit)")
	fs.IntVar(&limits.InFlight, "limit-in-flight", 0, "calls the provider answers at once (0: no limit)")
	fs.DurationVar(&limits.Window, "limit-window", time.Minute, "the window the request and token limits are per (providers count per minute)")
	latency := fs.Duration("latency", 0, "how long every call takes (the latency fault)")
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
	if *latency < 0 {
		return cmdline.UsageError("--latency must not be negative")
	}
	if err := limits.Validate(); err != nil || limits.Window == 0 {
		return cmdline.UsageError("--limit-requests, --limit-tokens and --limit-in-flight must not be negative, --limit-window must be positive")
	}
	cfg := llmsim.Config{Logger: logger, BatchDelay: *batchDelay, Limits: limits, Faults: llmsim.Faults{Latency: llmsim.Duration(*latency)}}
	return llmsim.Run(ctx, *addr, cfg, logger)
}
