package storepg_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store/storepg"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

// TestOpenForcesCustomPlans: the pool Open makes plans every execution
// (the generic-plan trap, docs/performance.md), unless the URL says
// otherwise.
func TestOpenForcesCustomPlans(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]string{
		storepgtest.DatabaseURL(): "force_custom_plan",
		storepgtest.DatabaseURL() + sep(storepgtest.DatabaseURL()) + "plan_cache_mode=auto": "auto",
	} {
		s, err := storepg.Open(context.Background(), url)
		require.NoError(t, err)
		var got string
		require.NoError(t, s.Pool().QueryRow(context.Background(), "SHOW plan_cache_mode").Scan(&got))
		s.Close()
		require.Equal(t, want, got, url)
	}
}

func sep(url string) string {
	if strings.Contains(url, "?") {
		return "&"
	}
	return "?"
}
