package rundefaults_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/jobkey"
	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/internal/rundefaults"
)

// names are member names either style orders or quotes its own way: of
// every length, escapes, non-ASCII, HTML characters.
var names = []string{"a", "b", "bb", "é", "\"q", "z\n", "tab\t", "<&>", "ü", "long member name", "", "\u2028", "x\\y", "\x01"}

// randomObject is an object of some of names with values of every kind.
func randomObject(r *rand.Rand) map[string]any {
	values := []any{nil, true, 1.5, 7.0, "text", "two words", []any{1.0, "x", nil}, map[string]any{"k": map[string]any{"y": 1.0, "x": "é"}}}
	out := map[string]any{}
	for _, n := range names {
		if r.IntN(2) == 0 {
			out[n] = values[r.IntN(len(values))]
		}
	}
	return out
}

// TestMergeCanonical: Merge of two canonical objects is the canonical JSON
// of the object merged as SubmitJobs merges a run's params and an item's
// (the item's members win), byte for byte.
func TestMergeCanonical(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		base, over := randomObject(r), randomObject(r)
		merged := maps.Clone(base)
		maps.Copy(merged, over)
		want, err := jobkey.Canonical(merged)
		require.NoError(t, err)
		b, _ := jobkey.Canonical(base)
		o, _ := jobkey.Canonical(over)
		got, err := rundefaults.Merge(rundefaults.Canonical, b, o)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "case %d: %s under %s", i, b, o)
	}
}

// TestMergeRefusesWhatIsNoObject: a column that holds no JSON object is an
// error, not a panic or a guess.
func TestMergeRefusesWhatIsNoObject(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{`[1]`, `"x"`, `{"a":`, `{"a" 1}`} {
		_, err := rundefaults.Merge(rundefaults.Jsonb, []byte(bad), []byte(`{"b": 1}`))
		require.Error(t, err, bad)
		_, err = rundefaults.Merge(rundefaults.Canonical, []byte(`{"b":1}`), []byte(bad))
		require.Error(t, err, bad)
	}
}

// BenchmarkApply: a job of a run of 20 KB of params (cached) with one
// member of its own, what a read of such a job adds.
func BenchmarkApply(b *testing.B) {
	base := map[string]any{}
	for i := range 5 {
		base[fmt.Sprintf("d%d", i)] = strings.Repeat("x", 4000)
	}
	text, _ := jobkey.Canonical(base)
	c := rundefaults.New(rundefaults.Canonical, nil)
	c.Put("run", rundefaults.Defaults{Params: text, Labels: map[string]string{"run": "1"}})
	for b.Loop() {
		j := &store.Job{RunID: "run", Params: []byte(`{"page":7}`), Labels: map[string]string{"item": "7"}}
		if err := c.Apply(b.Context(), j); err != nil {
			b.Fatal(err)
		}
	}
}
