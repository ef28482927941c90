package storepg

import (
	"context"
	"math"
	"time"

	"github.com/oncejob/oncejob/store"
	"github.com/oncejob/oncejob/store/storepg/internal/dbsqlc"
)

var _ store.ProviderLimitStore = (*Store)(nil)

// ProviderLimitDraw implements store.ProviderLimitStore: one call of the
// provider_limit_draw function (migration 0023), on the database's clock.
func (s *Store) ProviderLimitDraw(ctx context.Context, p *store.ProviderLimitDrawParams) (*store.ProviderLimitDrawResult, error) {
	ask := p.Ask
	if ask == nil {
		ask = []int64{}
	}
	row, err := s.q.ProviderLimitDraw(ctx, s.hot(ctx), dbsqlc.ProviderLimitDrawParams{
		Name: p.Name, Holder: p.Holder, Now: epoch(p.Now),
		RequestsPerSecond: p.RequestsPerSecond, RequestBurst: p.RequestBurst,
		TokensPerSecond: p.TokensPerSecond, TokenBurst: p.TokenBurst,
		CallsInFlight: int64(min(max(p.CallsInFlight, 0), math.MaxInt32)), HoldTtl: p.HoldTTL.Seconds(),
		Calls: int64(min(max(p.Calls, 0), math.MaxInt32)), Ask: ask, ReturnTokens: p.ReturnTokens,
		PauseUntil: epoch(p.PauseUntil),
	})
	if err != nil {
		return nil, interpretError(err)
	}
	res := &store.ProviderLimitDrawResult{
		Granted: int(row.Granted), InFlightBound: row.InFlightBound,
		CallsInFlight: int(row.CallsInFlight), Now: fromEpoch(row.DrawnAt),
	}
	if row.NextAt > 0 {
		res.NextAt = fromEpoch(row.NextAt)
	}
	return res, nil
}

func epoch(t *time.Time) *float64 {
	if t == nil {
		return nil
	}
	v := float64(t.UnixNano()) / 1e9
	return &v
}

func fromEpoch(s float64) time.Time { return time.Unix(0, int64(s*1e9)) }
