package cli

import (
	"context"
	"encoding/json"
	"io"
	"mime"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/oncejob/oncejob/clientsdk"
	"github.com/oncejob/oncejob/cmd/oncejob/internal/cmdline"
	oncejobv1 "github.com/oncejob/oncejob/gen/go/oncejob/v1"
)

// keyValues is a repeatable k=v flag.
type keyValues []string

func (kv *keyValues) String() string     { return strings.Join(*kv, ",") }
func (kv *keyValues) Set(v string) error { *kv = append(*kv, v); return nil }

// split returns the pairs; a value that is JSON (a number, true, an object)
// is taken as such when asJSON, else as a string.
func (kv keyValues) split(asJSON bool) (map[string]any, error) {
	out := map[string]any{}
	for _, p := range kv {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, cmdline.UsageError("%q is not k=v", p)
		}
		var parsed any
		if asJSON && json.Unmarshal([]byte(v), &parsed) == nil {
			out[k] = parsed
		} else {
			out[k] = v
		}
	}
	return out, nil
}

// Submit is `oncejob submit`.
func Submit(ctx context.Context, args []string) error {
	cmd := newClientCommand("submit", "[flags] FILE|-", "Submits FILE (- for stdin) once: the same command again is a replay of the same job.", 30*time.Second)
	fs := cmd.fs
	pipeline := fs.String("pipeline", "summarize", "the pipeline to run")
	var params, labels keyValues
	fs.Var(&params, "param", "a parameter k=v (repeatable; v is JSON if it parses, else a string); part of the computation")
	fs.Var(&labels, "label", "a label k=v (repeatable); bookkeeping only, never part of any key")
	mediaType := fs.String("media-type", "", "the document's media type (default: from the file's extension; text/plain for stdin)")
	name := fs.String("name", "", "the document's name (default: the file's base name)")
	profile := fs.String("model-profile", "", "one of the pipeline's model profiles (default: its first)")
	key := fs.String("key", "", "idempotency key (default: derived from pipeline, params, media type, name and the document's bytes, and printed)")
	wait := fs.Bool("wait", false, "wait for the job to finish, showing each stage; exit with its status's code")
	path, c, err := cmd.start(args, "FILE (or -)")
	if err != nil {
		return err
	}
	defer c.Close()
	req, err := submitRequest(path, *pipeline, *mediaType, *name, *profile, params, labels)
	if err != nil {
		return err
	}
	var opts []clientsdk.CallOption
	if *key != "" {
		opts = append(opts, clientsdk.WithIdempotencyKey(*key))
	}
	res, err := c.Submit(ctx, req, opts...)
	if err != nil {
		return err
	}
	printSubmitted(os.Stdout, res, cmd.cf.json, *wait)
	if !*wait {
		return nil
	}
	ctx, cancel := cmd.cf.context(ctx)
	defer cancel()
	job, err := follow(ctx, c, res.Job.GetId(), cmd.cf.json, true)
	if err != nil {
		return err
	}
	return statusExit(job)
}

// submitRequest reads the document and builds the request.
func submitRequest(path, pipeline, mediaType, name, profile string, params, labels keyValues) (*oncejobv1.SubmitJobRequest, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(path) //nolint:gosec // G703: the file named on the command line is the one to submit
		if name == "" {
			name = filepath.Base(path)
		}
		if mediaType == "" {
			mediaType = mediaTypeOf(path)
		}
	}
	if err != nil {
		return nil, err
	}
	if mediaType == "" {
		mediaType = "text/plain"
	}
	req, err := runDefaults(pipeline, profile, params, labels)
	if err != nil {
		return nil, err
	}
	req.Document = &oncejobv1.Document{Content: &oncejobv1.Document_Data{Data: data}, MediaType: mediaType, Name: name}
	return req, nil
}

// mediaTypeOf guesses a file's media type from its extension, without the
// charset parameter the system tables may add.
func mediaTypeOf(path string) string {
	ext := strings.ToLower(filepath.Ext(path))
	if mt, ok := map[string]string{".txt": "text/plain", ".md": "text/markdown", ".markdown": "text/markdown", ".html": "text/html", ".htm": "text/html", ".json": "application/json"}[ext]; ok {
		return mt
	}
	if mt := mime.TypeByExtension(ext); mt != "" {
		base, _, _ := strings.Cut(mt, ";")
		return strings.TrimSpace(base)
	}
	return "text/plain"
}

func printSubmitted(w io.Writer, res *clientsdk.SubmitResult, asJSON, wait bool) {
	if asJSON {
		out := map[string]any{"key": res.Key, "replayed": res.Replayed(), "outcome": res.Outcome.String(), "job": json.RawMessage(protoJSON(res.Job))}
		if wait {
			out = map[string]any{"submitted": out}
		}
		b, _ := json.Marshal(out)
		cmdline.Say(w, "%s\n", b)
		return
	}
	id := res.Job.GetId()
	switch res.Outcome {
	case oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_EXISTING:
		cmdline.Say(w, "replayed: job %s (this key was submitted before: no new job; status %s)\n", id, statusName(res.Job.GetStatus()))
	case oncejobv1.SubmitOutcome_SUBMIT_OUTCOME_DEDUPLICATED:
		cmdline.Say(w, "submitted: job %s (deduplicated: job %s already computed this; SUCCEEDED)\n", id, res.Job.GetDeduplicatedFrom())
	default:
		cmdline.Say(w, "submitted: job %s (created, %s)\n", id, statusName(res.Job.GetStatus()))
	}
	cmdline.Say(w, "key: %s\n", res.Key)
}
