package sqlitelog

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/eventlog"
)

// Every scan reads an index in (at, id) order: none sorts (a temporary B-tree would read a
// million events before returning the first), and a scan of several names merges one
// ordered range per name.
func TestScansReadInOrderWithoutSorting(t *testing.T) {
	t.Parallel()
	l := open(t)
	from, to := time.Unix(0, 0), time.Now()
	many := make([]string, maxMergedNames+1)
	for i := range many {
		many[i] = string(rune('a'+i%26)) + strings.Repeat("x", i/26)
	}
	for _, tc := range []struct {
		q    eventlog.Query
		want string
	}{
		{eventlog.Query{BotID: "b", Names: []string{"a", "b", "c"}, From: from, To: to}, "MERGE (UNION ALL)"},
		{eventlog.Query{BotID: "b", Names: []string{"a"}, From: from, To: to, AfterID: "x"}, "USING PRIMARY KEY (bot=? AND name=? AND at>? AND at<?)"},
		{eventlog.Query{BotID: "b", From: from, To: to}, "USING INDEX events_at"},
		{eventlog.Query{BotID: "b", Names: many, From: from, To: to}, "USING INDEX events_at"},
		{eventlog.Query{BotID: "b", SubscriberID: "s", Names: []string{"a", "b"}, From: from, To: to}, "USING INDEX events_sub"},
	} {
		query, args := scanSQL(tc.q)
		args[0] = 1
		rows, err := l.read.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+query, args...)
		require.NoError(t, err)
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			require.NoError(t, rows.Scan(&id, &parent, &unused, &detail))
			plan = append(plan, detail)
		}
		require.NoError(t, rows.Err())
		rows.Close()
		text := strings.Join(plan, "\n")
		assert.Contains(t, text, tc.want, "names %d, subscriber %q", len(tc.q.Names), tc.q.SubscriberID)
		assert.NotContains(t, text, "TEMP B-TREE", text)
	}
}
