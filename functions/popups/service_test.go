package popups

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

func TestLifecycle(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()

	d := definition()
	d.Status = nil
	d.AllowedOrigins = &[]string{"HTTPS://Shop.Example:443/", "http://localhost:8080"}
	d.Schedule = &Schedule{StartsAt: ptr("2026-03-02T10:00:00+02:00")}
	p := f.create(t, d)
	assert.True(t, ids.Valid("pop", p.ID))
	assert.Equal(t, StatusPaused, p.Status, "paused until activated")
	assert.Equal(t, int64(1), p.Revision)
	assert.Equal(t, defaultFrequency, p.Frequency)
	assert.Equal(t, VisitorsAll, p.Targeting.Visitors)
	assert.Equal(t, []string{shop, "http://localhost:8080"}, p.AllowedOrigins, "origins in the browser's spelling")
	assert.Equal(t, "2026-03-02T08:00:00Z", *p.Schedule.StartsAt, "instants in UTC")
	assert.Equal(t, t0, p.CreatedAt)

	got, err := f.svc.Get(ctx, f.bot, p.ID)
	require.NoError(t, err)
	assert.Equal(t, p, got)

	q := f.create(t, definition())
	all, next, err := f.svc.List(ctx, f.bot, "", 10, "")
	require.NoError(t, err)
	assert.Empty(t, next)
	assert.Equal(t, []string{p.ID, q.ID}, []string{all[0].ID, all[1].ID}, "oldest first")
	active, _, err := f.svc.List(ctx, f.bot, StatusActive, 10, "")
	require.NoError(t, err)
	require.Len(t, active, 1)
	assert.Equal(t, q.ID, active[0].ID)

	// PATCH: a partial change, the revision moves, the status index follows.
	up, err := f.svc.Update(ctx, f.bot, p.ID, 1, Definition{Status: ptr(StatusActive), Targeting: &Targeting{DelaySeconds: 5}})
	require.NoError(t, err)
	assert.Equal(t, int64(2), up.Revision)
	assert.Equal(t, StatusActive, up.Status)
	assert.Equal(t, 5, up.Targeting.DelaySeconds)
	assert.Empty(t, up.Targeting.URLRules, "a given member replaces the whole member")
	assert.Equal(t, p.Content, up.Content, "members not given stay")
	assert.Equal(t, t0.Add(2*time.Second), up.UpdatedAt)
	active, _, err = f.svc.List(ctx, f.bot, StatusActive, 10, "")
	require.NoError(t, err)
	assert.Len(t, active, 2)

	same, err := f.svc.Update(ctx, f.bot, p.ID, 2, Definition{Name: ptr(p.Name)})
	require.NoError(t, err)
	assert.Equal(t, int64(2), same.Revision, "a change that changes nothing makes no revision")

	_, err = f.svc.Update(ctx, f.bot, p.ID, 1, Definition{Name: ptr("x")})
	assert.Equal(t, "stale_revision", httpapitest.AsError(t, err).Code)
	assert.Equal(t, int64(2), httpapitest.AsError(t, err).Extensions["current_revision"])

	// The schedule goes with an empty one.
	up, err = f.svc.Update(ctx, f.bot, p.ID, 2, Definition{Schedule: &Schedule{}})
	require.NoError(t, err)
	assert.Nil(t, up.Schedule)

	// Origins moved on update: the old one no longer allows anything.
	up, err = f.svc.Update(ctx, f.bot, p.ID, 3, Definition{AllowedOrigins: &[]string{"https://other.example"}})
	require.NoError(t, err)
	_, ok, err := f.svc.AllowedOrigin(ctx, f.bot, "http://localhost:8080")
	require.NoError(t, err)
	assert.False(t, ok)
	_, ok, err = f.svc.AllowedOrigin(ctx, f.bot, "https://other.example")
	require.NoError(t, err)
	assert.True(t, ok)
	_, ok, err = f.svc.AllowedOrigin(ctx, f.bot, shop)
	require.NoError(t, err)
	assert.True(t, ok, "q still allows the shop")

	err = f.svc.Delete(ctx, f.bot, p.ID, ptr(int64(1)))
	assert.Equal(t, "stale_revision", httpapitest.AsError(t, err).Code)
	require.NoError(t, f.svc.Delete(ctx, f.bot, p.ID, &up.Revision))
	_, err = f.svc.Get(ctx, f.bot, p.ID)
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err))
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(f.svc.Delete(ctx, f.bot, p.ID, nil)))
	require.NoError(t, f.svc.Delete(ctx, f.bot, q.ID, nil))

	// Nothing is left of either: no origin item, a count of zero.
	for _, it := range f.items(t, popupsPK(f.bot)) {
		assert.Equal(t, countKey(f.bot), it.Key, "only the counter remains")
		assert.Zero(t, it.Count)
	}
	_, ok, err = f.svc.AllowedOrigin(ctx, f.bot, shop)
	require.NoError(t, err)
	assert.False(t, ok)
}

func TestValidationListsEveryProblem(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	bad := Definition{
		Name:   ptr(" "),
		Status: ptr(Status("live")),
		Content: &Content{Title: strings.Repeat("t", MaxTitleLen+1), Body: "ok\x00", ImageURL: ptr("ftp://x/y.png"), ButtonText: "",
			Fields: []Field{{Name: "Email", Label: "E", Type: "date"}, {Name: "email", Label: "", Type: FieldEmail}, {Name: "nope", Label: "N", Type: FieldText}}},
		Targeting: &Targeting{
			URLRules:        []URLRule{{Match: "regex", Value: "x"}, {Match: MatchGlob, Value: "https://shop.example/[a"}, {Match: MatchEquals, Value: "/pricing"}},
			ExcludeURLRules: make([]URLRule, MaxURLRules+1),
			Devices:         []Device{"watch", DeviceMobile, DeviceMobile},
			Visitors:        "everyone", DelaySeconds: 3601, ScrollPercent: 101,
		},
		Frequency:      &Frequency{MaxImpressionsPerVisitor: 0, MinHoursBetween: 8761},
		Schedule:       &Schedule{StartsAt: ptr("2026-04-01T00:00:00Z"), EndsAt: ptr("2026-02-01T00:00:00Z"), DaysOfWeek: []string{"monday"}, Hours: &Hours{From: "9:00", To: "24:00"}},
		Experiment:     &ExperimentInput{Variants: []Variant{{Key: "A", Share: 50}, {Key: "b", Share: 40, Content: &ContentOverride{Title: ptr("")}}}},
		AllowedOrigins: &[]string{"https://shop.example/path", "*.example", shop, "https://SHOP.example"},
	}
	_, err := f.svc.Create(t.Context(), f.bot, bad)
	assert.Equal(t, []string{
		"name", "status",
		"content.title", "content.body", "content.image_url", "content.button_text",
		"content.fields[0].name", "content.fields[0].type", "content.fields[1].label",
		"targeting.url_rules[0].match", "targeting.url_rules[1].value", "targeting.url_rules[2].value",
		"targeting.exclude_url_rules", "targeting.devices[0]", "targeting.devices[2]",
		"targeting.visitors", "targeting.delay_seconds", "targeting.scroll_percent",
		"frequency.max_impressions_per_visitor", "frequency.min_hours_between",
		"schedule.ends_at", "schedule.days_of_week[0]", "schedule.hours.from", "schedule.hours.to",
		"experiment.variants[0].key", "experiment.variants[1].content.title", "experiment.variants",
		"allowed_origins[0]", "allowed_origins[1]", "allowed_origins[3]",
		// The checks against the world come last: the bot's fields, the clock.
		"content.fields[2].name", "schedule.ends_at",
	}, httpapitest.InvalidFields(t, err))
	assert.Empty(t, f.items(t, popupsPK(f.bot)), "nothing written")

	// Missing members: one problem each, not one per member of the absent content.
	_, err = f.svc.Create(t.Context(), f.bot, Definition{})
	assert.Equal(t, []string{"content", "name", "allowed_origins"}, httpapitest.InvalidFields(t, err))

	// PATCH refuses the same problems and changes nothing.
	p := f.create(t, definition())
	_, err = f.svc.Update(t.Context(), f.bot, p.ID, 1, Definition{Targeting: &Targeting{DelaySeconds: -1}, AllowedOrigins: &[]string{}})
	assert.Equal(t, []string{"targeting.delay_seconds", "allowed_origins"}, httpapitest.InvalidFields(t, err))
	got, err := f.svc.Get(t.Context(), f.bot, p.ID)
	require.NoError(t, err)
	assert.Equal(t, p, got)
}

// Checks against the world apply to the members a PATCH gives: a popup whose form field
// was deleted since can still be renamed, but not given that form again.
func TestWorldChecksApplyToGivenMembers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	p := f.create(t, definition())
	f.fields.names = []string{"phone"}
	_, err := f.svc.Update(t.Context(), f.bot, p.ID, 1, Definition{Name: ptr("Renamed")})
	require.NoError(t, err)
	_, err = f.svc.Update(t.Context(), f.bot, p.ID, 2, Definition{Content: &p.Content})
	assert.Equal(t, []string{"content.fields[0].name", "content.fields[1].name"}, httpapitest.InvalidFields(t, err))

	f.fields.err = errBoom
	_, err = f.svc.Update(t.Context(), f.bot, p.ID, 2, Definition{Content: &p.Content})
	require.ErrorIs(t, err, errBoom)
}

func TestLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := sqlitetest.Unrecorded(t.Context())
	require.NoError(t, f.raw.Put(ctx, store.Item{Key: countKey(f.bot), Count: MaxPopups, Revision: 7}, store.MustNotExist))
	_, err := f.svc.Create(t.Context(), f.bot, definition())
	he := httpapitest.AsError(t, err)
	assert.Equal(t, "limit_reached", he.Code)
	assert.Equal(t, 409, he.Status())
	require.NoError(t, f.raw.Put(ctx, store.Item{Key: countKey(f.bot), Count: MaxPopups - 1, Revision: 8}, store.Always))
	p := f.create(t, definition())
	assert.NotEmpty(t, p.ID, "the 200th popup fits")
}

func TestPreflight(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()

	clean := definition()
	res, err := f.svc.Preflight(ctx, f.bot, clean)
	require.NoError(t, err)
	assert.Equal(t, Preflight{OK: true, Problems: []httpapi.FieldError{}, Warnings: []httpapi.FieldError{}}, res)

	d := definition()
	d.Targeting = &Targeting{DelaySeconds: 10, ExitIntent: true, URLRules: []URLRule{{Match: MatchGlob, Value: `https://shop.example/\`}}}
	d.Content.Fields = append(d.Content.Fields, Field{Name: "shoe_size", Label: "Size", Type: FieldNumber})
	d.Schedule = &Schedule{EndsAt: ptr(t0.Add(-time.Minute).Format(time.RFC3339))}
	res, err = f.svc.Preflight(ctx, f.bot, d)
	require.NoError(t, err)
	assert.False(t, res.OK)
	assert.Equal(t, []string{"targeting.url_rules[0].value", "content.fields[2].name", "schedule.ends_at"}, fieldsOf(res.Problems))
	assert.Contains(t, res.Problems[0].Message, "not a valid glob")
	assert.Contains(t, res.Problems[1].Message, `"shoe_size" is not a custom field`)
	assert.Contains(t, res.Problems[2].Message, "has passed")
	assert.Equal(t, []string{"targeting.delay_seconds"}, fieldsOf(res.Warnings))

	d = definition()
	d.Targeting = &Targeting{}
	res, err = f.svc.Preflight(ctx, f.bot, d)
	require.NoError(t, err)
	assert.True(t, res.OK, "a warning is no problem")
	assert.Equal(t, []string{"targeting.url_rules"}, fieldsOf(res.Warnings))
	assert.Contains(t, res.Warnings[0].Message, "every page")
	d.Status = ptr(StatusPaused)
	res, err = f.svc.Preflight(ctx, f.bot, d)
	require.NoError(t, err)
	assert.Empty(t, res.Warnings, "a paused popup shows nowhere")

	mine, err := f.raw.Mentioning(sqlitetest.Unrecorded(ctx), f.bot)
	require.NoError(t, err)
	assert.Empty(t, mine, "preflight writes nothing")

	// Create refuses what preflight reports.
	d = definition()
	d.Content.Fields = []Field{{Name: "shoe_size", Label: "Size", Type: FieldNumber}}
	_, err = f.svc.Create(ctx, f.bot, d)
	assert.Equal(t, []string{"content.fields[0].name"}, httpapitest.InvalidFields(t, err))
}

func fieldsOf(fe []httpapi.FieldError) []string {
	var out []string
	for _, e := range fe {
		out = append(out, e.Field)
	}
	return out
}

func TestExperimentRestartsOnlyWhenTheSplitChanges(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := definition()
	d.Experiment = &ExperimentInput{Variants: []Variant{{Key: "a", Share: 50}, {Key: "b", Share: 50, Content: &ContentOverride{Title: ptr("B")}}}}
	p := f.create(t, d)
	require.NotNil(t, p.Experiment)
	assert.Equal(t, t0, p.Experiment.StartedAt)

	f.clock.Advance(time.Hour)
	d.Experiment.Variants[1].Content.Title = ptr("B2")
	p, err := f.svc.Update(t.Context(), f.bot, p.ID, 1, Definition{Experiment: d.Experiment})
	require.NoError(t, err)
	assert.Equal(t, t0, p.Experiment.StartedAt, "new content, same split")

	p, err = f.svc.Update(t.Context(), f.bot, p.ID, 2, Definition{Experiment: &ExperimentInput{Variants: []Variant{{Key: "a", Share: 30}, {Key: "b", Share: 70}}}})
	require.NoError(t, err)
	assert.Equal(t, f.clock.Now(), p.Experiment.StartedAt)

	p, err = f.svc.Update(t.Context(), f.bot, p.ID, 3, Definition{Experiment: &ExperimentInput{Variants: []Variant{}}})
	require.NoError(t, err)
	assert.Nil(t, p.Experiment, "no variants: no experiment")
}

func TestCanonicalOrigin(t *testing.T) {
	t.Parallel()
	good := map[string]string{
		"https://shop.example":          "https://shop.example",
		"https://Shop.EXAMPLE/":         "https://shop.example",
		"HTTP://shop.example:80":        "http://shop.example",
		"https://shop.example:8443":     "https://shop.example:8443",
		"http://[::1]:3000":             "http://[::1]:3000",
		"https://xn--bcher-kva.example": "https://xn--bcher-kva.example",
	}
	for in, want := range good {
		got, err := canonicalOrigin(in)
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, got, in)
		}
	}
	for _, bad := range []string{"", "shop.example", "ftp://shop.example", "https://shop.example/a", "https://shop.example?x",
		"https://shop.example#x", "https://u:p@shop.example", "https://*.example", "https://shop.example:0", "https://shop.example:99999",
		"null", "https://shop.example\n", "https://" + strings.Repeat("a", MaxOriginLen)} {
		_, err := canonicalOrigin(bad)
		assert.Error(t, err, "%q", bad)
	}
}

func TestGlob(t *testing.T) {
	t.Parallel()
	cases := []struct {
		glob     string
		match    []string
		mismatch []string
	}{
		{"https://shop.example/*", []string{"https://shop.example/", "https://shop.example/a/b?c=1"}, []string{"https://shop.example", "http://shop.example/"}},
		{"https://shop.example/p?", []string{"https://shop.example/p1"}, []string{"https://shop.example/p", "https://shop.example/p12"}},
		{"*/item-[0-9][!a-c]", []string{"https://x/item-7d"}, []string{"https://x/item-7a", "https://x/item-xd"}},
		{`*\*\?.html`, []string{"https://x/*?.html"}, []string{"https://x/ab.html"}},
		{"*[-^\\]]", []string{"x-", "x^", "x]"}, []string{"x\\", "xa"}},
		{"(a|b)+.$", []string{"(a|b)+.$"}, []string{"a", "aa.$"}},
	}
	for _, tc := range cases {
		re, err := globRegexp(tc.glob)
		require.NoError(t, err, tc.glob)
		rx := regexp.MustCompile(re)
		for _, s := range tc.match {
			assert.True(t, rx.MatchString(s), "%s should match %s (%s)", tc.glob, s, re)
		}
		for _, s := range tc.mismatch {
			assert.False(t, rx.MatchString(s), "%s should not match %s (%s)", tc.glob, s, re)
		}
	}
	for _, bad := range []string{"https://x/[a", "https://x/[]", "https://x/[z-a]", `https://x/\`, `[a\`} {
		_, err := globRegexp(bad)
		assert.Error(t, err, bad)
	}
}

func TestParseRange(t *testing.T) {
	t.Parallel()
	today := time.Date(2026, 3, 1, 23, 59, 0, 0, time.UTC)
	date := func(s string) time.Time { d, _ := time.Parse(dayLayout, s); return d }
	r, err := parseRange("", "", today, nil)
	require.NoError(t, err)
	assert.Equal(t, dateRange{From: date("2026-01-31"), To: date("2026-03-01")}, r, "the last 30 days")
	assert.Equal(t, DefaultStatsDays, r.days())
	r, err = parseRange("2025-03-01", "2026-03-01", today, nil)
	require.NoError(t, err)
	assert.Equal(t, MaxStatsDays, r.days(), "366 days is the most")
	started := time.Date(2024, 1, 1, 5, 0, 0, 0, time.UTC)
	r, err = parseRange("", "", today, &started)
	require.NoError(t, err)
	assert.Equal(t, date("2025-03-01"), r.From, "a default start is capped to 366 days")

	for _, tc := range []struct{ from, to, param string }{
		{"2025-02-28", "2026-03-01", "from"},
		{"2026-03-02", "2026-03-01", "from"},
		{"2026-3-1", "", "from"},
		{"", "yesterday", "to"},
		{"2026-02-30", "", "from"},
	} {
		_, err := parseRange(tc.from, tc.to, today, nil)
		he := httpapitest.AsError(t, err)
		assert.Equal(t, "invalid_parameter", he.Code, "%+v", tc)
		assert.Equal(t, tc.param, he.Extensions["parameter"], "%+v", tc)
	}
}
