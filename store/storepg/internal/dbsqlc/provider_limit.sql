-- name: ProviderLimitDraw :one
-- One draw of a provider limit (store.ProviderLimitStore); @now NULL is the
-- database's clock.
SELECT d.granted::integer AS granted, coalesce(d.next_at, 0)::double precision AS next_at,
    d.in_flight_bound::boolean AS in_flight_bound, d.calls_in_flight::integer AS calls_in_flight,
    d.drawn_at::double precision AS drawn_at
FROM provider_limit_draw(
    @name::text, @holder::text, sqlc.narg(now)::double precision,
    @requests_per_second::double precision, @request_burst::double precision,
    @tokens_per_second::double precision, @token_burst::double precision,
    @calls_in_flight::integer, @hold_ttl::double precision,
    @calls::integer, @ask::bigint[], @return_tokens::bigint, sqlc.narg(pause_until)::double precision) AS d;
