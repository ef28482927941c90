# oncejob. `make test` is what CI runs (through .ci/run).
GO      ?= go
# A count, not a duration: a duration-based -fuzztime races the fuzz
# coordinator's own deadline on a loaded machine and fails with "context
# deadline exceeded" and no crasher (golang/go#75804, fixed in Go 1.27).
FUZZTIME ?= 300000x

.PHONY: build test test-go fuzz generate check-generate lint

build:
	$(GO) build -o bin/oncejob ./cmd/oncejob

test: lint check-generate test-go fuzz

test-go:
	$(GO) test -race -count=1 ./...

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzCanonical$$' -fuzztime $(FUZZTIME) ./jobkey

generate:
	$(GO) tool buf generate
	$(GO) tool sqlc generate

# Regenerates and fails if anything tracked changed or anything new appeared
# in the generated trees.
GENERATED = gen store/storepg/internal/dbsqlc store/storesqlite/internal/dbsqlite
check-generate: generate
	@git diff --exit-code --stat -- $(GENERATED) || { echo "generated code is stale: run make generate and commit"; exit 1; }
	@test -z "$$(git status --porcelain --untracked-files=all -- $(GENERATED))" || { git status --porcelain -- $(GENERATED); echo "untracked generated files: run make generate and commit"; exit 1; }

# golangci-lint (.golangci.yml) checks the dependency direction, imports,
# errors, contexts and sleeps; buf breaking compares against the first
# commit: the v1 API only grows.
lint:
	$(GO) vet ./...
	$(GO) tool golangci-lint run ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }
	$(GO) tool buf lint
	$(GO) tool buf breaking --against ".git#ref=$$(git rev-list --max-parents=0 HEAD)"
