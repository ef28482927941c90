package storepg_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/oncejob/oncejob/store/storepg"
	"github.com/oncejob/oncejob/store/storepg/storepgtest"
)

// TestOpenPlans: the pool Open makes runs under plan_cache_mode = auto,
// every statement an unnamed one planned at each execution but the
// engine's per-job ones (plan_cache.go; the generic-plan trap,
// docs/performance.md), unless the URL says otherwise.
func TestOpenPlans(t *testing.T) {
	t.Parallel()
	url := storepgtest.DatabaseURL()
	for _, c := range []struct {
		url  string
		mode string
		exec pgx.QueryExecMode
	}{
		{url, "auto", pgx.QueryExecModeCacheDescribe},
		{url + sep(url) + "plan_cache_mode=force_custom_plan", "force_custom_plan", pgx.QueryExecModeCacheDescribe},
		{url + sep(url) + "default_query_exec_mode=cache_statement", "auto", pgx.QueryExecModeCacheStatement},
	} {
		s, err := storepg.Open(context.Background(), c.url)
		require.NoError(t, err)
		var got string
		require.NoError(t, s.Pool().QueryRow(context.Background(), "SHOW plan_cache_mode").Scan(&got))
		exec := s.Pool().Config().ConnConfig.DefaultQueryExecMode
		s.Close()
		require.Equal(t, c.mode, got, c.url)
		require.Equal(t, c.exec, exec, c.url)
	}
}

func sep(url string) string {
	if strings.Contains(url, "?") {
		return "&"
	}
	return "?"
}
