package wiring

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/reactions"
	reactionswiring "github.com/botplatform/api/functions/reactions/wiring"
	"github.com/botplatform/api/functions/runtime"
	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/family/familytest"
	"github.com/botplatform/api/shared/ids"
)

// The adapters map the families' answers to what the runtime branches on.
func TestRuntimeAdapters(t *testing.T) {
	t.Parallel()
	env := familytest.Env(t, family.Deps{})
	ctx := t.Context()
	bot := ids.New("bot")
	svc := subscribers.NewService(env.Store, env.Now, nil)
	subs := runtimeSubscribers{svc}

	sub, created, err := subs.Upsert(ctx, bot, channel.Telegram, "42", runtime.Profile{FirstName: "Ann", Locale: "pt-br", SeenAt: time.Now()}, nil)
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, channel.Telegram, sub.Channel)
	_, _, err = subs.Upsert(ctx, bot, channel.Telegram, "42", runtime.Profile{Locale: "not a locale!", SeenAt: time.Now()}, nil)
	assert.ErrorIs(t, err, runtime.ErrInvalid)
	_, _, err = subs.Upsert(ctx, bot, channel.Telegram, "has space", runtime.Profile{SeenAt: time.Now()}, nil)
	assert.ErrorIs(t, err, runtime.ErrInvalid)

	_, err = subs.Get(ctx, bot, ids.New("sub"))
	assert.ErrorIs(t, err, runtime.ErrNotFound)
	_, err = subs.AddLabel(ctx, bot, sub.ID, ids.New("lbl"))
	assert.ErrorIs(t, err, runtime.ErrInvalid, "a label the bot does not have")
	_, err = subs.SetField(ctx, bot, sub.ID, ids.New("fld"), "x")
	assert.ErrorIs(t, err, runtime.ErrInvalid, "a field the bot does not have")
	_, err = subs.AddLabel(ctx, bot, ids.New("sub"), ids.New("lbl"))
	assert.ErrorIs(t, err, runtime.ErrNotFound, "a subscriber erased")

	label, err := svc.CreateLabel(ctx, bot, "VIP")
	require.NoError(t, err)
	ids, err := svc.EnsureFields(ctx, bot, []subscribers.FieldSpec{{Name: "plan", Type: subscribers.TypeString}})
	require.NoError(t, err)
	got, err := subs.AddLabel(ctx, bot, sub.ID, label.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{label.ID}, got.Labels)
	got, err = subs.SetField(ctx, bot, sub.ID, ids["plan"], "gold")
	require.NoError(t, err)
	assert.Equal(t, "gold", got.Fields["plan"])
	got, err = subs.SetField(ctx, bot, sub.ID, ids["plan"], nil)
	require.NoError(t, err)
	assert.NotContains(t, got.Fields, "plan")
	labels, err := subs.Labels(ctx, bot)
	require.NoError(t, err)
	assert.Equal(t, []string{label.ID}, labels)
	fields, err := subs.Fields(ctx, bot)
	require.NoError(t, err)
	assert.Equal(t, []runtime.Field{{ID: ids["plan"], Name: "plan", Type: "string"}}, fields)

	// A published version crosses as the JSON of docs/reactions.md, every step type intact.
	rx := reactions.NewService(env.Store, reactionswiring.Vocabulary(env), env.Now, env.Log)
	steps := fmt.Sprintf(`[
		{"id":"t","type":"send_text","text":"hi"},
		{"id":"m","type":"send_media","media_type":"image","url":"https://example.com/a.png","caption":"c"},
		{"id":"b","type":"buttons","text":"?","style":"quick_replies","buttons":[{"title":"Y","step_id":"t"},{"title":"P","payload":"p"}]},
		{"id":"f","type":"set_field","field_id":%q,"value":"x"},
		{"id":"g","type":"clear_field","field_id":%q},
		{"id":"l","type":"add_label","label_id":%q},
		{"id":"r","type":"remove_label","label_id":%q},
		{"id":"c","type":"condition","match":"any","conditions":[{"label_id":%q,"op":"has"},{"field_id":%q,"op":"eq","value":"x"}],"then":"w","else":"e"},
		{"id":"w","type":"wait","seconds":60},
		{"id":"j","type":"goto","step_id":"e"},
		{"id":"e","type":"end"}]`, ids["plan"], ids["plan"], label.ID, label.ID, label.ID, ids["plan"])
	var c reactions.Content
	require.NoError(t, json.Unmarshal([]byte(`{"name":"All","trigger":{"type":"keyword","keywords":["go"]},"steps":`+steps+`}`), &c))
	r, err := rx.Create(ctx, bot, c)
	require.NoError(t, err)
	_, err = rx.Publish(ctx, bot, r.ID, 1)
	require.NoError(t, err)

	rr := runtimeReactions{rx}
	published, err := rr.Published(ctx, bot)
	require.NoError(t, err)
	require.Len(t, published, 1)
	assert.Equal(t, runtime.Published{ReactionID: r.ID, Version: 1, Trigger: runtime.Trigger{Type: "keyword", Keywords: []string{"go"}}}, published[0])
	flow, err := rr.Flow(ctx, bot, r.ID, 1)
	require.NoError(t, err)
	require.Len(t, flow.Steps, 11)
	var want []runtime.Step
	require.NoError(t, json.Unmarshal([]byte(steps), &want))
	assert.Equal(t, want, flow.Steps)
	_, err = rr.Flow(ctx, bot, r.ID, 2)
	assert.ErrorIs(t, err, runtime.ErrNotFound)
	require.NoError(t, rx.Delete(ctx, bot, r.ID, nil))
	_, err = rr.Flow(ctx, bot, r.ID, 1)
	assert.ErrorIs(t, err, runtime.ErrNotFound)
}
