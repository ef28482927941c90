package server

import (
	"errors"
	"strconv"
	"strings"

	"github.com/oncejob/oncejob/server/pagetoken"
	"github.com/oncejob/oncejob/store"
)

// A watch cursor is a position in the store's global change order,
// "w1:<tx>:<id>", sealed by pagetoken for the caller's tenant
// (docs/architecture.md, "Page tokens"). It does not depend on the
// filters: a position is a position.
const watchCursorPrefix = "w1:"

var errWatchCursor = errors.New("is not a cursor this server issued for this tenant (or its secret has changed since); list again for a new watch_cursor")

func encodeWatchCursor(sig *pagetoken.Signer, tenant string, c store.JobChangeCursor) string {
	s := watchCursorPrefix + strconv.FormatInt(c.Tx, 10) + ":" + strconv.FormatInt(c.ID, 10)
	return sig.Seal(pagetoken.WatchCursor, tenant, []byte(s))
}

// decodeWatchCursor checks a cursor's seal and parses it; empty is the zero
// cursor, before the first event.
func decodeWatchCursor(sig *pagetoken.Signer, tenant, s string) (store.JobChangeCursor, error) {
	if s == "" {
		return store.JobChangeCursor{}, nil
	}
	b, err := sig.Open(pagetoken.WatchCursor, tenant, s)
	if err != nil {
		return store.JobChangeCursor{}, errWatchCursor
	}
	rest, ok := strings.CutPrefix(string(b), watchCursorPrefix)
	txs, ids, ok2 := strings.Cut(rest, ":")
	tx, err1 := strconv.ParseInt(txs, 10, 64)
	id, err2 := strconv.ParseInt(ids, 10, 64)
	if !ok || !ok2 || err1 != nil || err2 != nil || tx < 0 || id < 0 {
		return store.JobChangeCursor{}, errWatchCursor
	}
	return store.JobChangeCursor{Tx: tx, ID: id}, nil
}
