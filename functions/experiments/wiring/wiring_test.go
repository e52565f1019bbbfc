package wiring

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/content"
	contentwiring "github.com/botplatform/api/functions/content/wiring"
	"github.com/botplatform/api/functions/experiments"
	"github.com/botplatform/api/functions/popups"
	"github.com/botplatform/api/functions/reactions"
	reactionswiring "github.com/botplatform/api/functions/reactions/wiring"
	"github.com/botplatform/api/functions/segments"
	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/infra/access/accesstest"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/family/familytest"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// What the wiring reads and writes runs in the experiments Lambda (infra/access).
func TestMain(m *testing.M) { os.Exit(accesstest.Main(m, "experiments")) }

func ptr[T any](v T) *T { return &v }

// Subjects are asked of the families that own them: a published reaction version, a live
// published content document (at a version it has), a popup.
func TestSubjects(t *testing.T) {
	t.Parallel()
	env := familytest.Env(t, family.Deps{})
	bot := ids.New("bot")
	setup := sqlitetest.Unrecorded(t.Context())
	ctx := t.Context()

	var rc reactions.Content
	require.NoError(t, json.Unmarshal([]byte(`{"name":"Welcome","trigger":{"type":"start"},"steps":[{"id":"a","type":"send_text","text":"Hi"}]}`), &rc))
	rs := reactionswiring.Service(env)
	r, err := rs.Create(setup, bot, rc)
	require.NoError(t, err)
	_, err = rs.Publish(setup, bot, r.ID, r.Revision)
	require.NoError(t, err)
	draftOnly, err := rs.Create(setup, bot, reactions.Content{Name: "Draft", Trigger: rc.Trigger, Steps: rc.Steps})
	require.NoError(t, err)

	cs := contentwiring.New(env)
	doc, err := cs.Create(setup, bot, content.NewDocument{Type: content.TypeMessage, Name: "Offer", Draft: json.RawMessage(`{"text":"10% off"}`)})
	require.NoError(t, err)
	doc, err = cs.Publish(setup, bot, doc.ID, doc.Revision)
	require.NoError(t, err)
	unpublished, err := cs.Create(setup, bot, content.NewDocument{Type: content.TypeMessage, Name: "Later", Draft: json.RawMessage(`{"text":"soon"}`)})
	require.NoError(t, err)
	archived, err := cs.Create(setup, bot, content.NewDocument{Type: content.TypeMessage, Name: "Old", Draft: json.RawMessage(`{"text":"old"}`)})
	require.NoError(t, err)
	_, err = cs.Archive(setup, bot, archived.ID, archived.Revision)
	require.NoError(t, err)

	ps := popups.NewService(env.Store, nil, nil, nil, env.Now, env.Log)
	pop, err := ps.Create(setup, bot, popups.Definition{Name: ptr("Signup"), Content: &popups.Content{Title: "Hi", ButtonText: "Go"},
		AllowedOrigins: &[]string{"https://shop.example"}})
	require.NoError(t, err)

	check := Subjects{Reactions: reactions.NewService(env.Store, nil, env.Now, env.Log), Content: content.NewService(env.Store, nil, nil, env.Now),
		Popups: popups.NewService(env.Store, nil, nil, nil, env.Now, env.Log)}
	tests := []struct {
		s    experiments.Subject
		want string
	}{
		{experiments.Subject{Type: experiments.SubjectReactionVersion, ReactionID: &r.ID, Version: ptr(int64(1))}, ""},
		{experiments.Subject{Type: experiments.SubjectReactionVersion, ReactionID: &r.ID, Version: ptr(int64(2))}, "reaction " + r.ID + " has no published version 2"},
		{experiments.Subject{Type: experiments.SubjectReactionVersion, ReactionID: &draftOnly.ID, Version: ptr(int64(1))}, "reaction " + draftOnly.ID + " has no published version 1"},
		{experiments.Subject{Type: experiments.SubjectReactionVersion, ReactionID: ptr("rct_00000000000000000000000000"), Version: ptr(int64(1))}, "no reaction rct_00000000000000000000000000 in this bot"},
		{experiments.Subject{Type: experiments.SubjectContent, DocumentID: &doc.ID}, ""},
		{experiments.Subject{Type: experiments.SubjectContent, DocumentID: &doc.ID, Version: ptr(int64(1))}, ""},
		{experiments.Subject{Type: experiments.SubjectContent, DocumentID: &doc.ID, Version: ptr(int64(2))}, "content document " + doc.ID + " has no published version 2"},
		{experiments.Subject{Type: experiments.SubjectContent, DocumentID: &unpublished.ID}, "content document " + unpublished.ID + " has no published version; publish it first"},
		{experiments.Subject{Type: experiments.SubjectContent, DocumentID: &archived.ID}, "content document " + archived.ID + " is archived"},
		{experiments.Subject{Type: experiments.SubjectContent, DocumentID: ptr("doc_00000000000000000000000000")}, "no content document doc_00000000000000000000000000 in this bot"},
		{experiments.Subject{Type: experiments.SubjectPopup, PopupID: &pop.ID}, ""},
		{experiments.Subject{Type: experiments.SubjectPopup, PopupID: ptr("pop_00000000000000000000000000")}, "no popup pop_00000000000000000000000000 in this bot"},
	}
	for _, tc := range tests {
		got, err := check.Check(ctx, bot, tc.s)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "%+v", tc.s)
	}
	// Another bot has none of them.
	got, err := check.Check(ctx, ids.New("bot"), experiments.Subject{Type: experiments.SubjectPopup, PopupID: &pop.ID})
	require.NoError(t, err)
	assert.Contains(t, got, "no popup")
}

// The service as the wiring builds it: assignment reads the subscribers family, a cohort
// becomes a segment of the segments family whose source is the experiment's version.
func TestAssignAndCohort(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	env := familytest.Env(t, family.Deps{Now: func() time.Time { return now }})
	bot := ids.At("bot", now)
	setup := sqlitetest.Unrecorded(t.Context())
	ctx := t.Context()
	ps := popups.NewService(env.Store, nil, nil, nil, env.Now, env.Log)
	var pops []string
	for _, name := range []string{"A", "B"} {
		p, err := ps.Create(setup, bot, popups.Definition{Name: ptr(name), Content: &popups.Content{Title: name, ButtonText: "Go"},
			AllowedOrigins: &[]string{"https://shop.example"}})
		require.NoError(t, err)
		pops = append(pops, p.ID)
	}
	sub, _, err := subscribers.NewService(env.Store, env.Now, nil).Upsert(setup, bot, subscribers.ChannelWeb, "v_1", subscribers.Changes{})
	require.NoError(t, err)

	svc := New(env)
	e, err := svc.Create(ctx, bot, experiments.NewExperiment{Name: "Copy", Goal: &experiments.Goal{Event: "purchase"},
		Variants: []experiments.Variant{
			{ID: "a", Name: "A", Weight: 1, Subject: experiments.Subject{Type: experiments.SubjectPopup, PopupID: &pops[0]}},
			{ID: "b", Name: "B", Weight: 1, Subject: experiments.Subject{Type: experiments.SubjectPopup, PopupID: &pops[1]}},
		}})
	require.NoError(t, err)
	e, err = svc.Transition(ctx, bot, e.ID, e.Revision, experiments.ActionStart)
	require.NoError(t, err)
	a, err := svc.Assign(ctx, bot, e.ID, sub.ID)
	require.NoError(t, err)
	assert.True(t, a.FirstExposure)
	_, err = svc.Assign(ctx, bot, e.ID, "sub_00000000000000000000000000")
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err))

	from, to := now.Add(-time.Hour).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339)
	saved, err := svc.SaveCohort(ctx, bot, e.ID, experiments.CohortRequest{Name: "Exposed", VariantID: a.VariantID, Converted: ptr(false), From: &from, To: &to})
	require.NoError(t, err)
	var seg segments.Segment
	require.NoError(t, json.Unmarshal(saved.JSON, &seg))
	assert.Equal(t, saved.ID, seg.ID)
	assert.Equal(t, int64(1), seg.MemberCount)
	assert.Equal(t, segments.Source{Kind: segments.KindExperimentCohort, ID: e.ID, Revision: 1, Definition: seg.Source.Definition}, seg.Source)
	assert.JSONEq(t, `{"version":1,"variant_id":"`+a.VariantID+`","converted":false,"from":"`+from+`","to":"`+to+`"}`, string(seg.Source.Definition))
}
