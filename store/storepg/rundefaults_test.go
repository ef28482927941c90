package storepg_test

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store/internal/rundefaults"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

// TestRunDefaultsMergeIsJsonbs: rundefaults.Merge in the Jsonb style writes
// exactly the text Postgres returns for the merged object (jsonb's ||, the
// same rule: the second object's members win), for objects whose member
// names sort and quote differently in jsonb and in Go (lengths, escapes,
// non-ASCII, HTML characters). The worker's stage keys hash that text.
func TestRunDefaultsMergeIsJsonbs(t *testing.T) {
	t.Parallel()
	pool := storepgtest.NewTestPool(t)
	names := []string{"a", "b", "bb", "é", "\"q", "z\n", "tab\t", "<&>", "ü", "long member name", "", "\u2028", "x\\y", "\x01", "/"}
	values := []any{nil, true, 1.5, 7, 1e21, "text", "two  words", []any{1, "x", nil}, map[string]any{"k": map[string]any{"y": 1, "x": "é"}}}
	r := rand.New(rand.NewPCG(3, 4))
	object := func() string {
		m := map[string]any{}
		for _, n := range names {
			if r.IntN(2) == 0 {
				m[n] = values[r.IntN(len(values))]
			}
		}
		b, err := json.Marshal(m)
		require.NoError(t, err)
		return string(b)
	}
	for i := range 300 {
		base, over := object(), object()
		var baseText, overText, want string
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT $1::jsonb::text, $2::jsonb::text, ($1::jsonb || $2::jsonb)::text`, base, over).
			Scan(&baseText, &overText, &want))
		got, err := rundefaults.Merge(rundefaults.Jsonb, []byte(baseText), []byte(overText))
		require.NoError(t, err)
		require.Equal(t, want, string(got), "case %d: %s under %s", i, overText, baseText)
	}
}
