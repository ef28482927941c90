package docs_test

// para is what one paragraph of a marked block must do: exit 0 (ok) or
// not, and print text matching each pattern.
type para struct {
	ok      bool
	matches []string
}

// expectations, by "file: marker": one entry per paragraph of the block.
// A marked block whose paragraphs change must change here too.
var expectations = map[string][]para{
	"README.md: cli quickstart": {
		{true, []string{`submitted: job [0-9a-f-]{36}`, `RUNNING`, `published`, `SUCCEEDED`}},
		{true, []string{`replayed: job [0-9a-f-]{36}`}},
		{true, []string{`[0-9a-f-]{36}\s+SUCCEEDED\s+published\s+summarize`, `"id":"[0-9a-f-]{36}"`}},
	},
	"README.md: grpc quickstart": {
		{true, []string{`"outcome": "SUBMIT_OUTCOME_CREATED"`}},
	},
	"README.md: http quickstart": {
		{true, []string{`"outcome": ?"SUBMIT_OUTCOME_EXISTING"`}},
	},
	"README.md: go quickstart": {
		{true, []string{`job [0-9a-f-]{36} \(replayed: false\)\n`, `JOB_STATUS_SUCCEEDED JOB_STAGE_PUBLISHED`, `summary: Invoice 42`}},
	},
	// The Python SDK derives the Go SDK's key: it replays the Go run's job.
	"README.md: python quickstart": {
		{true, []string{`job [0-9a-f-]{36} \(replayed: True\)\n`, `JOB_STATUS_SUCCEEDED JOB_STAGE_PUBLISHED`, `summary: Invoice 42`}},
	},

	"docs/guide-cli.md: cli quickstart": {
		{true, []string{`submitted: job [0-9a-f-]{36}`, `SUCCEEDED`}},
		{true, []string{`replayed: job [0-9a-f-]{36}`}},
		{true, []string{`[0-9a-f-]{36}\s+SUCCEEDED\s+published\s+summarize`, `"status":"JOB_STATUS_SUCCEEDED"`}},
	},
	"docs/guide-cli.md: cli commands": {
		{true, []string{`SUCCEEDED`, `published`, `attempt:\s+1 \(attempts spent: 1\)`}},
		{false, []string{`is SUCCEEDED`}},
		{true, []string{`usage: oncejob submit`}},
	},

	"docs/guide-grpc.md: grpcurl examples": {
		{true, []string{`"outcome": "SUBMIT_OUTCOME_CREATED"`, `"status": "JOB_STATUS_QUEUED"`}},
		{true, []string{`idempotent-replayed: true`, `"outcome": "SUBMIT_OUTCOME_EXISTING"`}},
		{false, []string{`InvalidArgument`, `IDEMPOTENCY_KEY_REUSED`}},
		{false, []string{`InvalidArgument`, `idempotency-key metadata is required`}},
		{true, []string{`"message": "submitted"`, `"status": "JOB_STATUS_RUNNING"`, `"status": "JOB_STATUS_SUCCEEDED"`, `"stage": "JOB_STAGE_PUBLISHED"`}},
		{true, []string{`"jobs": \[`, `"idempotencyKey": "invoice-2026-0042"`}},
		{true, []string{`"outcome": "SUBMIT_OUTCOME_EXISTING"`, `"outcome": "SUBMIT_OUTCOME_CREATED"`, `"error": \{`, `"field": "items\[2\].request.pipeline"`, `unknown pipeline`}},
		{true, []string{`"status": "SERVING"`}},
	},
	"docs/guide-grpc.md: watch examples": {
		{true, []string{`"status": "JOB_STATUS_SUCCEEDED"`, `"seq": 1,`}},
		{true, []string{`"seq": 3,`, `"status": "JOB_STATUS_SUCCEEDED"`}},
	},

	"docs/guide-http.md: curl examples": {
		{true, []string{`HTTP/1.1 200 OK`, `"outcome": ?"SUBMIT_OUTCOME_CREATED"`, `"status": ?"JOB_STATUS_QUEUED"`, `(?i)X-Request-Id: \S+`}},
		{true, []string{`HTTP/1.1 200 OK`, `(?i)Idempotent-Replayed: true`, `"outcome": ?"SUBMIT_OUTCOME_EXISTING"`}},
		{true, []string{`HTTP/1.1 422`, `(?i)Content-Type: application/problem\+json`, `"reason": ?"IDEMPOTENCY_KEY_REUSED"`, `"status": ?422`}},
		{true, []string{`HTTP/1.1 400`, `(?i)Content-Type: application/problem\+json`, `"reason": ?"IDEMPOTENCY_KEY_INVALID"`}},
		{true, []string{`(?m)^id: 1$`, `(?m)^id: 3$`, `JOB_STATUS_SUCCEEDED`, `(?m)^event: end$`}},
		{true, []string{`(?s)^retry: 1000\n\nid: 3\n`, `(?m)^event: end$`}},
		{true, []string{`"checkpoints": ?\[`, `"llm_attempts": ?\[`, `"counts": ?\[`}},
	},

	"docs/guide-go.md: go quickstart run": {
		{true, []string{`job [0-9a-f-]{36} \(replayed: false\)\n`, `JOB_STATUS_SUCCEEDED JOB_STAGE_PUBLISHED`, `summary: Invoice 42`}},
	},
	"docs/guide-go.md: go module": {
		{true, []string{`creating new go.mod: module example.com/hello`}},
		{true, nil},
		{true, []string{`JOB_STATUS_SUCCEEDED summary: Hello from another module`}},
	},

	"docs/guide-python.md: python quickstart run": {
		{true, []string{`job [0-9a-f-]{36} \(replayed: False\)\n`, `JOB_STATUS_SUCCEEDED JOB_STAGE_PUBLISHED`, `summary: Invoice 42`}},
	},
	"docs/guide-python.md: python quickstart": {
		{true, []string{`job [0-9a-f-]{36} \(replayed: True\)\n`, `summary: Invoice 42`}},
	},

	"docs/guide-python.md: python resilient watch": {
		{true, []string{`[0-9a-f-]{36} JOB_STATUS_SUCCEEDED JOB_STAGE_PUBLISHED`}},
	},
	// Another key computed it: the SDK's job carries its result.
	"docs/guide-python.md: python dedup": {
		{true, []string{`deduplicated: True \(from job [0-9a-f-]{36}\)`, `summary: Invoice 43`}},
	},

	"docs/guide-runs.md: run examples": {
		{true, []string{`"state": "RUN_STATE_OPEN"`, `"pipeline": "summarize"`}},
		{true, []string{`(?m)^[0-9a-f-]{36}$`}},
		{true, []string{`"outcome": "SUBMIT_OUTCOME_CREATED"`, `"pipeline": "summarize"`}},
		{true, []string{`"outcome": "SUBMIT_OUTCOME_EXISTING"`, `"alreadyInRun": true`}},
		{true, []string{`"complete": true`, `"succeeded": "2"`}},
		{true, []string{`"items": "2"`, `"succeeded": "2"`, `"computed": "2"`}},
		{true, []string{`"jobs": \[`, `"idempotencyKey": "page-2"`, `"source": "crawler"`}},
		{true, []string{`"run": \{`}},
		{true, []string{`"state": "RUN_STATE_CANCELLED"`}},
	},

	"docs/guide-schedules.md: schedule cli": {
		{true, []string{`schedule [0-9a-f-]{36} \(nightly\)`}},
		{true, []string{`schedule [0-9a-f-]{36} \(ping\)`}},
		{true, []string{`nightly`, `every 30s`}},
		{true, nil},
	},
	"docs/guide-schedules.md: schedule examples": {
		{true, []string{`"cron": "0 3 \* \* \*"`, `"timeZone": "Europe/Paris"`, `"nextSlotTime"`}},
		{false, []string{`InvalidArgument`, `"field": "cron"`, `above maximum`}},
		{true, []string{`"schedules": \[`, `"name": "nightly report"`}},
		{true, []string{`"paused": true`}},
	},

	"docs/guide-effects.md: effects": {
		{true, []string{`SUCCEEDED`}},
		{true, []string{`go-receiver`, `python-receiver`}},
	},

	"docs/guide-operations.md: operating jobs": {
		{true, nil},
		{false, []string{`FailedPrecondition`, `JOB_STATUS_CONFLICT`}},
		{true, nil},
		{false, []string{`FailedPrecondition`, `JOB_STATUS_CONFLICT`}},
		{false, []string{`FailedPrecondition`, `JOB_STATUS_CONFLICT`}},
		{false, []string{`FailedPrecondition`, `JOB_STATUS_CONFLICT`}},
	},
}
