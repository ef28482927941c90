package worker

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestChunkText(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"short"}, chunkText("short", 100, 10))

	text := strings.Repeat("αβγ δεζ ηθι ", 100) // multi-byte runes
	chunks := chunkText(text, 50, 10)
	require.Greater(t, len(chunks), 1)
	covered := 0
	for i, c := range chunks {
		require.True(t, utf8.ValidString(c))
		require.LessOrEqual(t, utf8.RuneCountInString(c), 50)
		if i < len(chunks)-1 {
			require.True(t, strings.HasSuffix(c, " "), "chunk %d ends at a word boundary: %q", i, c)
		}
		covered += utf8.RuneCountInString(c)
	}
	require.GreaterOrEqual(t, covered, utf8.RuneCountInString(text), "every rune is in some chunk")
	require.True(t, strings.HasPrefix(text, chunks[0]))
	require.True(t, strings.HasSuffix(text, chunks[len(chunks)-1]))
}

func TestMergeOutputs(t *testing.T) {
	t.Parallel()
	got, err := mergeOutputs([][]byte{
		[]byte(`{"summary":"a","key_points":["x","y"],"count":1,"flag":true}`),
		[]byte(`{"summary":"b","key_points":["y","z"],"count":2,"flag":false}`),
	})
	require.NoError(t, err)
	require.JSONEq(t, `{"summary":"a\n\nb","key_points":["x","y","z"],"count":3,"flag":true}`, string(got))
	_, err = mergeOutputs([][]byte{[]byte(`{}`), []byte(`not json`)})
	require.Error(t, err)
}

func TestExtractText(t *testing.T) {
	t.Parallel()
	got, err := extractText([]byte(`<html><head><style>p{}</style><script>alert(1)</script></head><body><h1>Title</h1><p>Hello   <b>world</b></p></body></html>`), "text/html; charset=utf-8")
	require.NoError(t, err)
	require.Equal(t, "Title\n\nHello world", got)
	got, err = extractText([]byte(`{"b":1,"a":[true]}`), "application/json")
	require.NoError(t, err)
	require.Contains(t, got, "\"a\": [\n")
	_, err = extractText([]byte("%PDF"), "application/pdf")
	require.ErrorIs(t, err, errUnsupportedMediaType)
	_, err = extractText([]byte{0xff, 0xfe}, "text/plain")
	require.ErrorIs(t, err, errUnsupportedMediaType)
}
