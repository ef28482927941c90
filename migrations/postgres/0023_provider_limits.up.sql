-- 0023_provider_limits: the provider limits every process draws from
-- (docs/architecture.md, "Provider limits"). One row per limit: the
-- time its request and token buckets are whole again (GCRA, in seconds
-- since the epoch), a pause a 429 set, and each holder's calls in flight
-- with their expiry, so a killed process's share comes back.
--
-- UNLOGGED: the row is a pacing state, not a record. Its updates write no
-- WAL, so a draw's commit waits for no flush; after a crash the table is
-- empty and every limit starts whole, which the provider's 429s and rate
-- headers correct within a window.
CREATE UNLOGGED TABLE provider_limits (
    name         text             PRIMARY KEY,
    requests_tat double precision NOT NULL DEFAULT 0,
    tokens_tat   double precision NOT NULL DEFAULT 0,
    paused_until double precision NOT NULL DEFAULT 0,
    holds        jsonb            NOT NULL DEFAULT '{}'
) WITH (fillfactor = 50);

-- provider_limit_draw is store.ProviderLimitStore.ProviderLimitDraw: one
-- statement from the client, the limit's row locked for its duration, so
-- concurrent draws of every process apply one after the other.
-- store.ProviderLimitState.Draw is its reference; storetest checks both.
CREATE FUNCTION provider_limit_draw(
    p_name text, p_holder text, p_now double precision,
    p_requests_per_second double precision, p_request_burst double precision,
    p_tokens_per_second double precision, p_token_burst double precision,
    p_calls_in_flight integer, p_hold_ttl double precision,
    p_calls integer, p_ask bigint[], p_return_tokens bigint, p_pause_until double precision,
    OUT granted integer, OUT next_at double precision, OUT in_flight_bound boolean,
    OUT calls_in_flight integer, OUT drawn_at double precision)
LANGUAGE plpgsql AS $$
DECLARE
    l      provider_limits%ROWTYPE;
    t      double precision := coalesce(p_now, extract(epoch FROM clock_timestamp()));
    others integer;
    calls  integer := greatest(p_calls, 0);
    tokens bigint;
    req_at double precision;
    tok_at double precision;
BEGIN
    SELECT * INTO l FROM provider_limits WHERE name = p_name FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO provider_limits (name) VALUES (p_name) ON CONFLICT (name) DO NOTHING;
        SELECT * INTO l FROM provider_limits WHERE name = p_name FOR UPDATE;
    END IF;
    -- 1. Expired holds go; the holder's count and the settlement.
    SELECT coalesce(jsonb_object_agg(key, value), '{}') INTO l.holds
    FROM jsonb_each(l.holds) WHERE (value->>'exp')::double precision > t;
    SELECT coalesce(sum((value->>'n')::integer), 0) INTO others
    FROM jsonb_each(l.holds) WHERE key <> p_holder;
    IF p_tokens_per_second > 0 AND p_return_tokens > 0 THEN
        l.tokens_tat := l.tokens_tat - p_return_tokens / p_tokens_per_second;
    ELSIF p_tokens_per_second > 0 AND p_return_tokens < 0 THEN
        l.tokens_tat := greatest(l.tokens_tat, t) - p_return_tokens / p_tokens_per_second;
    END IF;
    -- 2. A pause empties the buckets as of its end.
    IF p_pause_until IS NOT NULL THEN
        l.paused_until := greatest(l.paused_until, p_pause_until);
        IF p_requests_per_second > 0 THEN
            l.requests_tat := greatest(l.requests_tat, p_pause_until + p_request_burst / p_requests_per_second);
        END IF;
        IF p_tokens_per_second > 0 THEN
            l.tokens_tat := greatest(l.tokens_tat, p_pause_until + p_token_burst / p_tokens_per_second);
        END IF;
    END IF;
    -- 3. The longest prefix of the calls asked that fits.
    granted := 0;
    in_flight_bound := false;
    FOREACH tokens IN ARRAY coalesce(p_ask, '{}') LOOP
        IF l.paused_until > t THEN
            next_at := l.paused_until;
            EXIT;
        END IF;
        req_at := t;
        IF p_requests_per_second > 0 THEN
            req_at := greatest(l.requests_tat, t) + (1 - greatest(p_request_burst, 1)) / p_requests_per_second;
        END IF;
        tok_at := t;
        IF p_tokens_per_second > 0 THEN
            tok_at := greatest(l.tokens_tat, t) + (tokens - greatest(p_token_burst, tokens)) / p_tokens_per_second;
        END IF;
        IF greatest(req_at, tok_at) > t + 1e-6 THEN
            next_at := greatest(req_at, tok_at);
            EXIT;
        END IF;
        IF p_calls_in_flight > 0 AND others + calls >= p_calls_in_flight THEN
            in_flight_bound := true;
            EXIT;
        END IF;
        IF p_requests_per_second > 0 THEN
            l.requests_tat := greatest(l.requests_tat, t) + 1 / p_requests_per_second;
        END IF;
        IF p_tokens_per_second > 0 THEN
            l.tokens_tat := greatest(l.tokens_tat, t) + tokens / p_tokens_per_second;
        END IF;
        calls := calls + 1;
        granted := granted + 1;
    END LOOP;
    IF calls > 0 THEN
        l.holds := l.holds || jsonb_build_object(p_holder, jsonb_build_object('n', calls, 'exp', t + p_hold_ttl));
    ELSE
        l.holds := l.holds - p_holder;
    END IF;
    UPDATE provider_limits
    SET requests_tat = l.requests_tat, tokens_tat = l.tokens_tat,
        paused_until = l.paused_until, holds = l.holds
    WHERE name = p_name;
    calls_in_flight := others + calls;
    drawn_at := t;
END
$$;
