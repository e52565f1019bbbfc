package emailcampaigns

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// inState returns a fixture with a campaign in state s, reached the way a client and the
// send job reach it.
func inState(t *testing.T, s State) (*fixture, Campaign) {
	t.Helper()
	f := newFixture(t, 300) // 3 steps of 100: one step leaves the campaign sending
	c := f.create(t)
	var err error
	switch s {
	case Draft:
	case Scheduled:
		later := t0.Add(time.Hour)
		c, err = f.svc.Schedule(t.Context(), f.bot, c.ID, c.Revision, &later)
	case Sending, Paused:
		c = f.schedule(t, c)
		_, err, _ := f.deliver(t)
		require.NoError(t, err)
		c = f.get(t, c.ID)
		require.Equal(t, Sending, c.State)
		if s == Paused {
			c, err = f.svc.Pause(t.Context(), f.bot, c.ID, c.Revision)
			require.NoError(t, err)
		}
	case Sent:
		c = f.schedule(t, c)
		f.drain(t)
		c = f.get(t, c.ID)
	case Canceled:
		c = f.schedule(t, c)
		c, err = f.svc.Cancel(t.Context(), f.bot, c.ID, c.Revision)
	case Archived:
		c, err = f.svc.Archive(t.Context(), f.bot, c.ID, c.Revision)
	}
	require.NoError(t, err)
	require.Equal(t, s, c.State)
	c.Counts = nil
	return f, c
}

// Every action from every state: the transitions of the table go through, every other
// answers 409 invalid_transition with the current state.
func TestLifecycleTransitions(t *testing.T) {
	t.Parallel()
	type action struct {
		name string
		do   func(f *fixture, ctx context.Context, c Campaign) (Campaign, error)
		to   State
	}
	actions := []action{
		{"schedule", func(f *fixture, ctx context.Context, c Campaign) (Campaign, error) {
			return f.svc.Schedule(ctx, f.bot, c.ID, c.Revision, nil)
		}, Scheduled},
		{"pause", func(f *fixture, ctx context.Context, c Campaign) (Campaign, error) {
			return f.svc.Pause(ctx, f.bot, c.ID, c.Revision)
		}, Paused},
		{"resume", func(f *fixture, ctx context.Context, c Campaign) (Campaign, error) {
			return f.svc.Resume(ctx, f.bot, c.ID, c.Revision)
		}, Sending},
		{"cancel", func(f *fixture, ctx context.Context, c Campaign) (Campaign, error) {
			return f.svc.Cancel(ctx, f.bot, c.ID, c.Revision)
		}, Canceled},
		{"archive", func(f *fixture, ctx context.Context, c Campaign) (Campaign, error) {
			return f.svc.Archive(ctx, f.bot, c.ID, c.Revision)
		}, Archived},
	}
	for _, s := range States() {
		for _, a := range actions {
			t.Run(string(s)+"/"+a.name, func(t *testing.T) {
				t.Parallel()
				f, c := inState(t, s)
				got, err := a.do(f, t.Context(), c)
				if slices.Contains(from[a.name], s) {
					require.NoError(t, err)
					assert.Equal(t, a.to, got.State)
					assert.Equal(t, c.Revision+1, got.Revision)
					return
				}
				he := httpapitest.AsError(t, err)
				assert.Equal(t, 409, he.Status())
				assert.Equal(t, "invalid_transition", he.Code)
				assert.Equal(t, s, he.Extensions["state"])
				assert.Equal(t, c.Revision, f.get(t, c.ID).Revision, "nothing changed")
			})
		}
		t.Run(string(s)+"/patch", func(t *testing.T) {
			t.Parallel()
			f, c := inState(t, s)
			got, err := f.svc.Update(t.Context(), f.bot, c.ID, c.Revision, Definition{Name: ptr("Renamed")})
			if s == Draft {
				require.NoError(t, err)
				assert.Equal(t, "Renamed", got.Name)
				return
			}
			he := httpapitest.AsError(t, err)
			assert.Equal(t, "campaign_not_editable", he.Code)
			assert.Equal(t, 409, he.Status())
		})
	}
}

// Every mutation is revisioned: a stale expected_revision is 409 stale_revision with the
// current revision, and changes nothing.
func TestStaleRevision(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 3)
	c := f.create(t)
	c2, err := f.svc.Update(t.Context(), f.bot, c.ID, c.Revision, Definition{Audience: &Segment{LabelIDs: []string{"lbl_vip"}}})
	require.NoError(t, err)
	assert.Equal(t, []string{"lbl_vip"}, c2.Audience.LabelIDs)
	for name, do := range map[string]func() error{
		"patch": func() error {
			_, err := f.svc.Update(t.Context(), f.bot, c.ID, c.Revision, Definition{Name: ptr("x")})
			return err
		},
		"schedule": func() error { _, err := f.svc.Schedule(t.Context(), f.bot, c.ID, c.Revision, nil); return err },
		"archive":  func() error { _, err := f.svc.Archive(t.Context(), f.bot, c.ID, c.Revision); return err },
	} {
		he := httpapitest.AsError(t, do())
		assert.Equal(t, "stale_revision", he.Code, name)
		assert.Equal(t, int64(2), he.Extensions["current_revision"], name)
	}
	assert.Equal(t, Draft, f.get(t, c.ID).State)
}

// Schedule runs every check, each whatever the others found, and lists them all.
func TestScheduleNotReadyListsEveryCheck(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 0)
	c, err := f.svc.Create(t.Context(), f.bot, Definition{Name: ptr("Draft"), ContentID: ptr("doc_draft")})
	require.NoError(t, err)
	_, err = f.svc.Schedule(t.Context(), f.bot, c.ID, c.Revision, nil)
	he := httpapitest.AsError(t, err)
	assert.Equal(t, 422, he.Status())
	assert.Equal(t, "campaign_not_ready", he.Code)
	checks := he.Extensions["checks"].([]Check)
	require.Len(t, checks, 3)
	for i, name := range []string{"content", "domain", "audience"} {
		assert.Equal(t, name, checks[i].Check)
		assert.False(t, checks[i].OK, name)
		assert.NotEmpty(t, checks[i].Message, name)
	}
	assert.Contains(t, checks[0].Message, "no published version")
	assert.Contains(t, checks[2].Message, "the audience is empty")

	// Published content, an unverified domain, an audience with no one to send to.
	f.aud.people = []Person{{SubscriberID: "sub_1", Email: "a@mail.example"}, {SubscriberID: "sub_2"}}
	f.content.from = "news@other.example"
	c, err = f.svc.Update(t.Context(), f.bot, c.ID, c.Revision, Definition{ContentID: ptr("doc_news")})
	require.NoError(t, err)
	_, err = f.svc.Schedule(t.Context(), f.bot, c.ID, c.Revision, nil)
	checks = httpapitest.AsError(t, err).Extensions["checks"].([]Check)
	assert.True(t, checks[0].OK)
	assert.False(t, checks[1].OK)
	assert.Contains(t, checks[1].Message, "news@other.example")
	assert.False(t, checks[2].OK)
	assert.Contains(t, checks[2].Message, "1 have no email address, 1 no consent")
	assert.Equal(t, Draft, f.get(t, c.ID).State, "nothing changed")
	assert.Zero(t, len(f.q.Sent()), "no job started")
}

func TestScheduleSendAt(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 2)
	c := f.create(t)
	for _, at := range []time.Time{t0.Add(-2 * time.Minute), t0.Add(MaxScheduleAhead + time.Hour)} {
		_, err := f.svc.Schedule(t.Context(), f.bot, c.ID, c.Revision, &at)
		assert.Equal(t, []string{"send_at"}, httpapitest.InvalidFields(t, err))
	}
	almost := t0.Add(-30 * time.Second) // within a minute: now
	got, err := f.svc.Schedule(t.Context(), f.bot, c.ID, c.Revision, &almost)
	require.NoError(t, err)
	assert.Equal(t, t0, *got.SendAt)
	assert.Equal(t, t0, *got.ScheduledAt)
}

func TestConsentPreview(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1000)
	f.mixedAudience(t)
	f.supp.add(f.aud.people[40].Email, "bounced")
	f.supp.add(f.aud.people[41].Email, "complained")
	c := f.create(t)
	p, err := f.svc.ConsentPreview(t.Context(), f.bot, c.ID)
	require.NoError(t, err)
	assert.Equal(t, PreviewCounts{Sendable: 968, Unsubscribed: 5, Bounced: 1, Complained: 1, NoEmail: 10, NoConsent: 10, Duplicate: 5, Total: 1000}, p.Counts)
	assert.Equal(t, []string{"sub_00040"}, p.Samples[SkipBounced])
	assert.Len(t, p.Samples["sendable"], maxSamples)
	assert.Equal(t, []string{"sub_00000", "sub_00001", "sub_00002", "sub_00003", "sub_00004"}, p.Samples[SkipNoEmail])
	assert.Len(t, f.rows(t, c.ID), 0, "a preview writes nothing")

	// Labels narrow the audience.
	f.aud.labels["sub_00500"] = []string{"lbl_vip"}
	f.aud.labels["sub_00501"] = []string{"lbl_other", "lbl_vip"}
	c2, err := f.svc.Create(t.Context(), f.bot, Definition{Name: ptr("VIP"), ContentID: ptr("doc_news"), Audience: &Segment{LabelIDs: []string{"lbl_vip"}}})
	require.NoError(t, err)
	p, err = f.svc.ConsentPreview(t.Context(), f.bot, c2.ID)
	require.NoError(t, err)
	assert.Equal(t, 2, p.Counts.Total)

	small := newFixture(t, 11, func(c *Config) { c.MaxAudience = 10 })
	_, err = small.svc.ConsentPreview(t.Context(), small.bot, small.create(t).ID)
	he := httpapitest.AsError(t, err)
	assert.Equal(t, "audience_too_large", he.Code)
	assert.Equal(t, 422, he.Status())
}

func TestCreateChecksAndLimits(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 0)
	_, err := f.svc.Create(t.Context(), f.bot, Definition{})
	assert.Equal(t, []string{"name", "content_id"}, httpapitest.InvalidFields(t, err))
	long := string(make([]rune, MaxNameLen+1))
	labels := make([]string, MaxLabels+1)
	for i := range labels {
		labels[i] = "lbl_" + string(rune('a'+i))
	}
	_, err = f.svc.Create(t.Context(), f.bot, Definition{Name: &long, ContentID: ptr("doc_news"), Audience: &Segment{LabelIDs: append(labels[:1:1], "", labels[0])}})
	assert.Equal(t, []string{"name", "audience.label_ids[1]", "audience.label_ids[2]"}, httpapitest.InvalidFields(t, err))
	_, err = f.svc.Create(t.Context(), f.bot, Definition{Name: ptr("x"), ContentID: ptr("doc_news"), Audience: &Segment{LabelIDs: labels}})
	assert.Equal(t, []string{"audience.label_ids"}, httpapitest.InvalidFields(t, err))

	c := f.create(t)
	assert.Equal(t, []string{}, c.Audience.LabelIDs)
	clone, err := f.svc.Clone(t.Context(), f.bot, c.ID, nil)
	require.NoError(t, err)
	assert.Equal(t, "March news (copy)", clone.Name)
	assert.Equal(t, Draft, clone.State)
	assert.NotEqual(t, c.ID, clone.ID)

	_, err = f.svc.Get(t.Context(), f.bot, "ecmp_nope")
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err))
	_, err = f.svc.Get(t.Context(), "bot_other", c.ID)
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err))
}

func TestCampaignLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 0)
	c := f.create(t)
	// Set the count at the limit, as MaxCampaigns creations would.
	ctx := sqlitetest.Unrecorded(t.Context())
	it, err := f.st.Get(ctx, countKey(f.bot))
	require.NoError(t, err)
	assert.Equal(t, int64(1), it.Count)
	it.Count, it.Revision = MaxCampaigns, it.Revision+1
	require.NoError(t, f.st.Put(ctx, it, store.RevisionIs(it.Revision-1)))
	_, err = f.svc.Create(t.Context(), f.bot, Definition{Name: ptr("one more"), ContentID: ptr("doc_news")})
	he := httpapitest.AsError(t, err)
	assert.Equal(t, "limit_reached", he.Code)
	// Archiving frees a place.
	_, err = f.svc.Archive(t.Context(), f.bot, c.ID, c.Revision)
	require.NoError(t, err)
	_, err = f.svc.Create(t.Context(), f.bot, Definition{Name: ptr("one more"), ContentID: ptr("doc_news")})
	require.NoError(t, err)
}
