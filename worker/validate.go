package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"text/template"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/oncejob/oncejob/llm"
	"github.com/oncejob/oncejob/pipeline"
	"github.com/oncejob/oncejob/store"
)

// validate checks the output against the pipeline's schema, asking the model
// for a repair a bounded number of times.
func (r *run) validate(ctx context.Context, schemaJSON, output []byte) ([]byte, error) {
	schema, err := r.w.schema(schemaJSON)
	if err != nil {
		return nil, permanent("OUTPUT_SCHEMA_INVALID", "%w", err)
	}
	for round := 0; ; round++ {
		verr := validateJSON(schema, output)
		if verr == nil {
			return output, nil
		}
		if round >= *r.p.RepairAttempts {
			return nil, permanent("INVALID_OUTPUT", "output does not satisfy the pipeline's schema after %d repair attempts: %v", round, verr)
		}
		prompt := fmt.Sprintf("Your previous answer does not satisfy the required JSON Schema.\n\nErrors:\n%v\n\nSchema:\n%s\n\nPrevious answer:\n%s\n\nAnswer again with only the corrected JSON object.", verr, schemaJSON, output)
		resp, _, err := r.call(ctx, llmCall{
			stage: store.JobStageValidated, chunk: -1, round: round + 1,
			messages: []llm.Message{{Role: "user", Content: prompt}}, responseFormat: r.p.ResponseFormatJSON(),
		})
		if err != nil {
			return nil, err
		}
		output = []byte(resp.Content)
	}
}

func validateJSON(schema *jsonschema.Schema, output []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(output))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return errors.New("not a JSON object")
	}
	return schema.Validate(v)
}

func (w *Worker) schema(schemaJSON []byte) (*jsonschema.Schema, error) {
	key := sha256Hex(schemaJSON)
	w.mu.Lock()
	defer w.mu.Unlock()
	if s, ok := w.schemas[key]; ok {
		return s, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("output_schema.json", doc); err != nil {
		return nil, err
	}
	s, err := c.Compile("output_schema.json")
	if err != nil {
		return nil, err
	}
	w.schemas[key] = s
	return s, nil
}

func (w *Worker) template(p *pipeline.Pipeline) (*template.Template, error) {
	key := fmt.Sprintf("%s/%d/%s", p.Name, p.Version, p.Prompt.Version)
	w.mu.Lock()
	defer w.mu.Unlock()
	if t, ok := w.templates[key]; ok {
		return t, nil
	}
	t, err := template.New(key).Option("missingkey=error").Parse(p.Prompt.Template)
	if err != nil {
		return nil, err
	}
	w.templates[key] = t
	return t, nil
}
