package channels

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The catalog reader sees what the service stored, with the store alone: nothing for a bot
// without WhatsApp, the channel's templates with their statuses otherwise, none once the
// channel is disconnected.
func TestCatalogReadsTheStoredTemplates(t *testing.T) {
	t.Parallel()
	s := newTServer(t, true)
	ctx := t.Context()
	cat := NewCatalog(s.Store)

	_, list, ok, err := cat.BotTemplates(ctx, botA)
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Empty(t, list)

	ch := s.connect(t, botA)
	r := s.do(t, "owner", "POST", templatesPath(botA, ch), orderTemplate("order_update"))
	require.Equal(t, http.StatusCreated, r.Code, "%s", r.Body)
	require.NoError(t, s.wa.Approve("order_update", "en_US"))
	r = s.do(t, "owner", "POST", templatesPath(botA, ch), orderTemplate("order_pending"))
	require.Equal(t, http.StatusCreated, r.Code, "%s", r.Body)
	r = s.do(t, "owner", "POST", templatesPath(botA, ch)+"/sync", nil)
	require.Equal(t, http.StatusOK, r.Code, "%s", r.Body)

	got, list, ok, err := cat.BotTemplates(ctx, botA)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, ch, got)
	require.Len(t, list, 2)
	assert.Equal(t, []string{"order_update", "order_pending"}, []string{list[0].Name, list[1].Name})
	assert.Equal(t, []string{TemplateApproved, TemplatePending}, []string{list[0].Status, list[1].Status})
	assert.Equal(t, "en_US", list[0].Language)
	assert.JSONEq(t, `[{"type":"BODY","text":"Hi {{1}}, order {{2}} ships today.","example":{"body_text":[["Ann","#42"]]}}]`, string(list[0].Components))

	_, _, ok, err = cat.BotTemplates(ctx, botB)
	require.NoError(t, err)
	assert.False(t, ok, "another bot's catalog is not this one's")

	require.Equal(t, http.StatusNoContent, s.do(t, "owner", "DELETE", "/api/bots/"+botA+"/channels/"+ch, nil).Code)
	_, _, ok, err = cat.BotTemplates(ctx, botA)
	require.NoError(t, err)
	assert.False(t, ok)
}
