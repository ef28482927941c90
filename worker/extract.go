package worker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
)

// errUnsupportedMediaType fails a job: no retry can make it supported.
var errUnsupportedMediaType = errors.New("unsupported media type")

// errNULInText fails a job: its document is text holding a NUL byte, which
// no text column holds and no model needs. The server refuses such a
// document at submit; a job written before that rule fails at once.
var errNULInText = errors.New("the document's text holds a NUL byte")

// extractText turns a document into the text the model reads.
//
//	text/plain, text/markdown  the text itself (UTF-8 required)
//	text/html                  visible text; script and style dropped
//	application/json           the JSON, indented, so keys stay readable
func extractText(data []byte, mediaType string) (string, error) {
	mt, _, err := mime.ParseMediaType(mediaType)
	if err != nil {
		return "", fmt.Errorf("%w: %q", errUnsupportedMediaType, mediaType)
	}
	switch mt {
	case "text/plain", "text/markdown":
		if !utf8.Valid(data) {
			return "", fmt.Errorf("%w: %s must be UTF-8", errUnsupportedMediaType, mt)
		}
		return string(data), nil
	case "text/html":
		return htmlText(data)
	case "application/json":
		var buf bytes.Buffer
		if err := json.Indent(&buf, data, "", "  "); err != nil {
			return "", fmt.Errorf("%w: invalid JSON: %w", errUnsupportedMediaType, err)
		}
		return buf.String(), nil
	}
	return "", fmt.Errorf("%w: %s (supported: text/plain, text/markdown, text/html, application/json)", errUnsupportedMediaType, mt)
}

// extractChecked is extractText refusing a text that holds NUL.
func extractChecked(data []byte, mediaType string) (string, error) {
	t, err := extractText(data, mediaType)
	if err == nil && strings.IndexByte(t, 0) >= 0 {
		return "", errNULInText
	}
	return t, err
}

func htmlText(data []byte) (string, error) {
	z := html.NewTokenizer(bytes.NewReader(data))
	var out strings.Builder
	skip := 0 // depth inside script/style
	for {
		switch z.Next() {
		case html.ErrorToken:
			return strings.TrimSpace(collapseSpace(out.String())), nil
		case html.StartTagToken:
			if name, _ := z.TagName(); isHidden(name) {
				skip++
			} else if isBlock(name) {
				out.WriteByte('\n')
			}
		case html.EndTagToken:
			if name, _ := z.TagName(); isHidden(name) && skip > 0 {
				skip--
			} else if isBlock(name) {
				out.WriteByte('\n')
			}
		case html.TextToken:
			if skip == 0 {
				out.Write(z.Text())
			}
		}
	}
}

func isHidden(tag []byte) bool {
	s := string(tag)
	return s == "script" || s == "style" || s == "noscript" || s == "template"
}

func isBlock(tag []byte) bool {
	switch string(tag) {
	case "p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article", "header", "footer", "pre", "blockquote":
		return true
	}
	return false
}

// collapseSpace folds runs of spaces and tabs, and of blank lines.
func collapseSpace(s string) string {
	lines := strings.Split(s, "\n")
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		l = strings.Join(strings.Fields(l), " ")
		if l == "" && (len(out) == 0 || out[len(out)-1] == "") {
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}
