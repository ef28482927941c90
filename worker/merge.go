package worker

import (
	"encoding/json"
	"fmt"
)

// mergeOutputs combines the JSON objects of a document's chunks, in chunk
// order, into one object. The rule, per key:
//
//   - arrays concatenate, dropping an element equal to one already kept
//     (overlapping chunks repeat themselves);
//   - strings join with a blank line, dropping a repeat;
//   - objects merge by this same rule;
//   - numbers add up;
//   - anything else (booleans, null, mixed kinds): the first chunk's value.
//
// One chunk's object is returned as it is.
func mergeOutputs(outputs [][]byte) ([]byte, error) {
	if len(outputs) == 1 {
		return outputs[0], nil
	}
	merged := map[string]any{}
	for i, o := range outputs {
		var m map[string]any
		if err := json.Unmarshal(o, &m); err != nil {
			return nil, fmt.Errorf("chunk %d output: %w", i, err)
		}
		mergeInto(merged, m)
	}
	return json.Marshal(merged)
}

func mergeInto(dst, src map[string]any) {
	for k, v := range src {
		old, ok := dst[k]
		if !ok {
			dst[k] = v
			continue
		}
		dst[k] = mergeValue(old, v)
	}
}

func mergeValue(a, b any) any {
	switch x := a.(type) {
	case []any:
		if y, ok := b.([]any); ok {
			for _, e := range y {
				if !containsJSON(x, e) {
					x = append(x, e)
				}
			}
			return x
		}
	case string:
		if y, ok := b.(string); ok {
			if y == "" || y == x {
				return x
			}
			if x == "" {
				return y
			}
			return x + "\n\n" + y
		}
	case map[string]any:
		if y, ok := b.(map[string]any); ok {
			mergeInto(x, y)
			return x
		}
	case float64:
		if y, ok := b.(float64); ok {
			return x + y
		}
	}
	return a
}

func containsJSON(list []any, e any) bool {
	eb, _ := json.Marshal(e)
	for _, x := range list {
		xb, _ := json.Marshal(x)
		if string(xb) == string(eb) {
			return true
		}
	}
	return false
}
