package server

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"

	"github.com/oncejob/oncejob/store"
)

// A watch cursor is a position in the store's global change order:
// base64url of "w1:<tx>:<id>". Opaque to clients, neither signed nor
// secret: it names a position, not data, and every read is tenant-scoped.
// It does not depend on the filters: a position is a position.
const watchCursorPrefix = "w1:"

var errWatchCursor = errors.New("is not a cursor this server issued")

func encodeWatchCursor(c store.JobChangeCursor) string {
	s := watchCursorPrefix + strconv.FormatInt(c.Tx, 10) + ":" + strconv.FormatInt(c.ID, 10)
	return base64.RawURLEncoding.EncodeToString([]byte(s))
}

// decodeWatchCursor decodes a cursor; empty is the zero cursor, before the
// first event.
func decodeWatchCursor(s string) (store.JobChangeCursor, error) {
	if s == "" {
		return store.JobChangeCursor{}, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
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
