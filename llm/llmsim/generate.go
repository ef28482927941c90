package llmsim

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Markers that a prompt may carry to make a document misbehave on purpose.
const (
	// MarkerInvalidRequest anywhere in the messages makes the call a 400,
	// billed nothing.
	MarkerInvalidRequest = "SIM_INVALID_REQUEST"
	// MarkerInvalidOutput anywhere in the messages makes the completion
	// text that is not JSON; the call is billed like any other.
	MarkerInvalidOutput = "SIM_INVALID_OUTPUT"
)

// chatInput is a parsed chat completion request.
type chatInput struct {
	Model          string
	Messages       []message
	Temperature    float64
	ResponseFormat json.RawMessage
	MaxTokens      int
	// digest is the sha256 of everything above: the output is a function
	// of it, and a key replayed with another digest is a misused key.
	digest [32]byte
}

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

func parseChat(body []byte) (*chatInput, error) {
	var wire struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Temperature    float64         `json:"temperature"`
		ResponseFormat json.RawMessage `json:"response_format"`
		MaxTokens      int             `json:"max_tokens"`
	}
	if err := json.Unmarshal(body, &wire); err != nil {
		return nil, fmt.Errorf("request body: %w", err)
	}
	if wire.Model == "" {
		return nil, errors.New("model is required")
	}
	if len(wire.Messages) == 0 {
		return nil, errors.New("messages must not be empty")
	}
	in := &chatInput{Model: wire.Model, Temperature: wire.Temperature, MaxTokens: wire.MaxTokens}
	for i, m := range wire.Messages {
		text, err := messageText(m.Content)
		if err != nil {
			return nil, fmt.Errorf("messages[%d].content: %w", i, err)
		}
		in.Messages = append(in.Messages, message{Role: m.Role, Content: text})
	}
	if len(wire.ResponseFormat) > 0 && string(wire.ResponseFormat) != "null" {
		var compact bytes.Buffer
		if err := json.Compact(&compact, wire.ResponseFormat); err != nil {
			return nil, fmt.Errorf("response_format: %w", err)
		}
		in.ResponseFormat = compact.Bytes()
	}
	canonical, err := json.Marshal(struct {
		Model          string          `json:"model"`
		Messages       []message       `json:"messages"`
		Temperature    float64         `json:"temperature"`
		ResponseFormat json.RawMessage `json:"response_format,omitempty"`
		MaxTokens      int             `json:"max_tokens"`
	}{in.Model, in.Messages, in.Temperature, in.ResponseFormat, in.MaxTokens})
	if err != nil {
		return nil, err
	}
	in.digest = sha256.Sum256(append([]byte("llmsim:v1:"), canonical...))
	return in, nil
}

// messageText accepts a string or OpenAI's array of content parts, of
// which it keeps the text parts.
func messageText(raw json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("must be a string or an array of content parts")
	}
	var texts []string
	for _, p := range parts {
		if p.Type == "text" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n"), nil
}

func (in *chatInput) contains(marker string) bool {
	return slices.ContainsFunc(in.Messages, func(m message) bool { return strings.Contains(m.Content, marker) })
}

// completion is a computed answer before it is written out.
type completion struct {
	content          string
	finishReason     string
	promptTokens     int64
	completionTokens int64
}

// complete computes the answer, a pure function of the input. Tokens are
// counted as whitespace-separated words.
func (in *chatInput) complete() completion {
	var c completion
	for _, m := range in.Messages {
		c.promptTokens += int64(len(strings.Fields(m.Content)))
	}
	c.content, c.finishReason = in.content(), "stop"
	words := strings.Fields(c.content)
	if in.MaxTokens > 0 && len(words) > in.MaxTokens {
		words = words[:in.MaxTokens]
		c.content, c.finishReason = strings.Join(words, " "), "length"
	}
	c.completionTokens = int64(len(words))
	return c
}

// content is the completion's text. With a json_schema response format it
// is a JSON value of that schema; otherwise it is the shape of the built-in
// summarize pipeline, {"summary", "key_points"}, plus "sim_digest", the hex
// digest of the input. Its words come from the last user message.
func (in *chatInput) content() string {
	if in.contains(MarkerInvalidOutput) {
		return fmt.Sprintf("Simulated invalid output %x: this is not JSON.", in.digest[:4])
	}
	g := &generator{words: sourceWords(in.lastUserMessage()), seed: in.digest}
	if schema := in.jsonSchema(); schema != nil {
		out, err := json.Marshal(g.value(schema, 0))
		if err == nil {
			return string(out)
		}
	}
	out, _ := json.Marshal(struct {
		Summary   string   `json:"summary"`
		KeyPoints []string `json:"key_points"`
		Digest    string   `json:"sim_digest"`
	}{g.text(12), []string{g.text(8), g.text(8)}, hex.EncodeToString(in.digest[:])})
	return string(out)
}

func (in *chatInput) lastUserMessage() string {
	for i := len(in.Messages) - 1; i >= 0; i-- {
		if in.Messages[i].Role == "user" {
			return in.Messages[i].Content
		}
	}
	return in.Messages[len(in.Messages)-1].Content
}

// sourceWords are the words of the message after its first paragraph when it
// has more than one, as prompts put their instructions first and the
// document after them.
func sourceWords(msg string) []string {
	if _, rest, ok := strings.Cut(msg, "\n\n"); ok && strings.TrimSpace(rest) != "" {
		msg = rest
	}
	return strings.Fields(msg)
}

func (in *chatInput) jsonSchema() map[string]any {
	var rf struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Schema map[string]any `json:"schema"`
		} `json:"json_schema"`
	}
	if json.Unmarshal(in.ResponseFormat, &rf) != nil || rf.Type != "json_schema" {
		return nil
	}
	return rf.JSONSchema.Schema
}

// generator makes deterministic values: text from a window sliding over the
// source words, choices from a counter hashed with the input digest.
type generator struct {
	words []string
	off   int
	seed  [32]byte
	n     uint64
}

func (g *generator) next() uint64 {
	var buf [40]byte
	copy(buf[:], g.seed[:])
	binary.BigEndian.PutUint64(buf[32:], g.n)
	g.n++
	sum := sha256.Sum256(buf[:])
	return binary.BigEndian.Uint64(sum[:8])
}

func (g *generator) text(n int) string {
	if len(g.words) == 0 {
		return "empty document"
	}
	if g.off >= len(g.words) {
		g.off = 0
	}
	end := min(g.off+n, len(g.words))
	s := strings.Join(g.words[g.off:end], " ")
	g.off = end
	return s
}

// value returns a value of schema. It knows type, properties, items,
// enum, const, anyOf/oneOf/allOf (taking the first), minimum/maximum,
// minItems/maxItems and maxLength: enough for the output schemas pipelines
// declare, not a full JSON Schema generator.
func (g *generator) value(schema map[string]any, depth int) any {
	if c, ok := schema["const"]; ok {
		return c
	}
	if enum, ok := schema["enum"].([]any); ok && len(enum) > 0 {
		return enum[g.next()%uint64(len(enum))]
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if alts, ok := schema[k].([]any); ok && len(alts) > 0 {
			if alt, ok := alts[0].(map[string]any); ok {
				return g.value(alt, depth+1)
			}
		}
	}
	switch schemaType(schema) {
	case "object":
		out := map[string]any{}
		props, _ := schema["properties"].(map[string]any)
		if depth > 8 {
			return out
		}
		names := make([]string, 0, len(props))
		for name := range props {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			sub, _ := props[name].(map[string]any)
			out[name] = g.value(sub, depth+1)
		}
		return out
	case "array":
		n := 2
		if lo, ok := number(schema, "minItems"); ok {
			n = max(n, int(lo))
		}
		if hi, ok := number(schema, "maxItems"); ok {
			n = min(n, int(hi))
		}
		items, _ := schema["items"].(map[string]any)
		out := make([]any, 0, n)
		for range n {
			if depth > 8 {
				break
			}
			out = append(out, g.value(items, depth+1))
		}
		return out
	case "integer", "number":
		lo, _ := number(schema, "minimum")
		hi, ok := number(schema, "maximum")
		if !ok || hi < lo {
			hi = lo + 100
		}
		return int64(lo) + int64(g.next()%uint64(hi-lo+1))
	case "boolean":
		return g.next()%2 == 0
	case "null":
		return nil
	default:
		s := g.text(12)
		if hi, ok := number(schema, "maxLength"); ok && len([]rune(s)) > int(hi) {
			s = string([]rune(s)[:int(hi)])
		}
		return s
	}
}

// schemaType is the schema's type, the first non-null one of a list, or a
// guess from its keywords.
func schemaType(schema map[string]any) string {
	switch t := schema["type"].(type) {
	case string:
		return t
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok && s != "null" {
				return s
			}
		}
	}
	if _, ok := schema["properties"]; ok {
		return "object"
	}
	if _, ok := schema["items"]; ok {
		return "array"
	}
	return "string"
}

func number(schema map[string]any, key string) (float64, bool) {
	f, ok := schema[key].(float64)
	return f, ok
}
