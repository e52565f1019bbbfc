package popups

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/ratelimit"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// post sends an event as a browser on origin would ("" sends no Origin).
func (s *server) post(t *testing.T, origin, body string) httpapitest.Reply {
	t.Helper()
	var h []string
	if origin != "" {
		h = []string{"Origin", origin}
	}
	return s.DoAs(t, "", "POST", "/p/"+s.bot+"/events", body, h...)
}

func event(popup, variant, typ string) string {
	e := map[string]any{"popup_id": popup, "type": typ, "visitor_id": "0123456789abcdef0123456789abcdef"}
	if variant != "" {
		e["variant"] = variant
	}
	b, _ := json.Marshal(e)
	return string(b)
}

func TestEventsCountIntoStatsAndExperiment(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	// No form: a conversion is the button's click.
	d := definition()
	d.Content.Fields = nil
	plain := d
	d.Experiment = &ExperimentInput{Variants: []Variant{{Key: "a", Share: 50}, {Key: "b", Share: 50, Content: &ContentOverride{Title: ptr("B")}}}}
	exp := s.create(t, d)
	pl := s.create(t, plain)

	send := func(popup, variant, typ string, n int) {
		t.Helper()
		for range n {
			res := s.post(t, shop, event(popup, variant, typ))
			require.Equal(t, 202, res.Code, res.Body)
			assert.Equal(t, shop, res.Header.Get("Access-Control-Allow-Origin"))
		}
	}
	send(exp.ID, "a", "impression", 4)
	send(exp.ID, "a", "conversion", 1)
	send(exp.ID, "b", "impression", 2)
	send(exp.ID, "b", "close", 1)
	s.clock.Advance(24 * time.Hour) // the next UTC day
	send(exp.ID, "b", "impression", 2)
	send(exp.ID, "b", "conversion", 2)
	send(pl.ID, "", "impression", 3)

	res := s.Do(t, "GET", "/api/bots/"+s.bot+"/popups/"+exp.ID+"/stats?from=2026-03-01&to=2026-03-03", "")
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, map[string]any{"impressions": float64(8), "closes": float64(1), "conversions": float64(3), "conversion_rate": 0.375}, res.JSON["totals"])
	assert.Equal(t, []any{
		map[string]any{"date": "2026-03-01", "impressions": float64(6), "closes": float64(1), "conversions": float64(1)},
		map[string]any{"date": "2026-03-02", "impressions": float64(2), "closes": float64(0), "conversions": float64(2)},
		map[string]any{"date": "2026-03-03", "impressions": float64(0), "closes": float64(0), "conversions": float64(0)},
	}, res.JSON["days"])

	res = s.Do(t, "GET", "/api/bots/"+s.bot+"/popups/"+exp.ID+"/experiment", "")
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, "2026-03-01", res.JSON["from"], "from the experiment's start")
	assert.Equal(t, "2026-03-02", res.JSON["to"])
	assert.Equal(t, []any{
		map[string]any{"key": "a", "share": float64(50), "impressions": float64(4), "closes": float64(0), "conversions": float64(1), "conversion_rate": 0.25},
		map[string]any{"key": "b", "share": float64(50), "impressions": float64(4), "closes": float64(1), "conversions": float64(2), "conversion_rate": 0.5},
	}, res.JSON["variants"])

	// The other popup's counters are its own.
	st, err := s.svc.Stats(t.Context(), s.bot, pl.ID, "", "")
	require.NoError(t, err)
	assert.Equal(t, int64(3), st.Totals.Impressions)
	assert.Equal(t, int64(0), st.Totals.Conversions)

	tests := []struct{ name, body, field string }{
		{"variant of no experiment", event(pl.ID, "a", "impression"), "variant"},
		{"variant missing", event(exp.ID, "", "impression"), "variant"},
		{"unknown variant", event(exp.ID, "c", "impression"), "variant"},
		{"unknown type", event(exp.ID, "a", "click"), "type"},
		{"fields on an impression", `{"popup_id":"` + pl.ID + `","type":"impression","visitor_id":"v1","fields":{"email":"a@b.example"}}`, "fields"},
		{"visitor id too long", `{"popup_id":"` + pl.ID + `","type":"impression","visitor_id":"` + strings.Repeat("v", 65) + `"}`, "visitor_id"},
		{"visitor id not plain", `{"popup_id":"` + pl.ID + `","type":"impression","visitor_id":"a b"}`, "visitor_id"},
	}
	for _, tc := range tests {
		res := s.post(t, shop, tc.body)
		assert.Equal(t, 400, res.Code, tc.name)
		assert.Equal(t, "validation_failed", res.JSON["code"], tc.name)
		assert.Equal(t, []string{tc.field}, jsonFields(res.JSON["errors"]), tc.name)
	}
	res = s.post(t, shop, `{"popup_id":"`+pl.ID+`","type":"impression","visitor_id":"v1","colour":"red"}`)
	assert.Equal(t, "unknown_field", res.JSON["code"], "the body is strict")
	assert.Equal(t, shop, res.Header.Get("Access-Control-Allow-Origin"), "an allowed page can read its errors")
}

func TestConversionFields(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	p := s.create(t, definition())
	conv := func(fields string) httpapitest.Reply {
		return s.post(t, shop, `{"popup_id":"`+p.ID+`","type":"conversion","visitor_id":"v-1","fields":`+fields+`}`)
	}
	res := conv(`{"email":"ann@shop.example","consent":"true"}`)
	require.Equal(t, 202, res.Code, res.Body)
	assert.Equal(t, []written{{bot: s.bot, visitor: "v-1", values: map[string]string{"email": "ann@shop.example", "consent": "true"}}}, s.writer.all())

	// The event log has the conversion as the visitor's subscriber's; an impression by the
	// same visitor afterwards is theirs too, one by a stranger belongs to no subscriber.
	res = s.post(t, shop, `{"popup_id":"`+p.ID+`","type":"impression","visitor_id":"v-1"}`)
	require.Equal(t, 202, res.Code, res.Body)
	res = s.post(t, shop, `{"popup_id":"`+p.ID+`","type":"impression","visitor_id":"v-2"}`)
	require.Equal(t, 202, res.Code, res.Body)
	var logged []string
	require.NoError(t, s.events.Scan(t.Context(), eventlog.Query{BotID: s.bot, To: t0.Add(time.Hour)}, func(e eventlog.Event) error {
		assert.Equal(t, p.ID, e.Properties["popup_id"])
		assert.Equal(t, eventlog.SourcePopup, e.Source)
		logged = append(logged, e.Name+"/"+e.SubscriberID)
		return nil
	}))
	assert.ElementsMatch(t, []string{"popup_submitted/sub_v-1", "popup_shown/sub_v-1", "popup_shown/"}, logged)

	res = conv(`{"email":"not an address","consent":"yes","shoe_size":"42"}`)
	require.Equal(t, 400, res.Code, res.Body)
	assert.Equal(t, []string{"fields.consent", "fields.email", "fields.shoe_size"}, jsonFields(res.JSON["errors"]))
	res = conv(`{"consent":"false"}`)
	require.Equal(t, 400, res.Code, res.Body)
	assert.Equal(t, []string{"fields.email"}, jsonFields(res.JSON["errors"]), "a required field")
	assert.Len(t, s.writer.all(), 1, "refused events write nothing")

	s.writer.err = errBoom
	res = conv(`{"email":"ann@shop.example"}`)
	assert.Equal(t, 500, res.Code)
	st, err := s.svc.Stats(t.Context(), s.bot, p.ID, "", "")
	require.NoError(t, err)
	assert.Equal(t, int64(1), st.Totals.Conversions, "a conversion whose fields were not written is not counted")

	// Without a writer the fields are checked and dropped.
	s.svc.writer = nil
	res = conv(`{"email":"ann@shop.example"}`)
	assert.Equal(t, 202, res.Code, res.Body)
	res = conv(`{"mail":"ann@shop.example"}`)
	assert.Equal(t, 400, res.Code, res.Body)
}

func TestEventsCORS(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	p := s.create(t, definition())
	events := "/p/" + s.bot + "/events"

	res := s.DoAs(t, "", "OPTIONS", events, nil, "Origin", shop, "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "content-type")
	require.Equal(t, 204, res.Code, res.Body)
	assert.Equal(t, shop, res.Header.Get("Access-Control-Allow-Origin"))
	assert.Equal(t, "POST", res.Header.Get("Access-Control-Allow-Methods"))
	assert.Equal(t, "Content-Type", res.Header.Get("Access-Control-Allow-Headers"))
	assert.Equal(t, "Origin", res.Header.Get("Vary"))

	for _, origin := range []string{"https://evil.example", "https://shop.example.evil", "http://shop.example", "null", ""} {
		h := []string{"Access-Control-Request-Method", "POST"}
		if origin != "" {
			h = append(h, "Origin", origin)
		}
		res := s.DoAs(t, "", "OPTIONS", events, nil, h...)
		assert.Equal(t, 403, res.Code, origin)
		assert.Equal(t, "origin_not_allowed", res.JSON["code"], origin)
		assert.Empty(t, res.Header.Get("Access-Control-Allow-Origin"), origin)
		assert.Equal(t, "Origin", res.Header.Get("Vary"), origin)

		res = s.post(t, origin, event(p.ID, "", "impression"))
		assert.Equal(t, 403, res.Code, origin)
		assert.Equal(t, "origin_not_allowed", res.JSON["code"], origin)
		assert.Empty(t, res.Header.Get("Access-Control-Allow-Origin"), origin)
	}
	st, err := s.svc.Stats(t.Context(), s.bot, p.ID, "", "")
	require.NoError(t, err)
	assert.Zero(t, st.Totals.Impressions, "refused events are not counted")

	// Another bot's popups allow nothing here; a bot without popups (or no bot) is 404.
	res = s.DoAs(t, "", "POST", "/p/"+ids.At("bot", t0)+"/events", event(p.ID, "", "impression"), "Origin", shop)
	assert.Equal(t, 404, res.Code)
	res = s.DoAs(t, "", "POST", "/p/nope/events", event(p.ID, "", "impression"), "Origin", shop)
	assert.Equal(t, 404, res.Code)
	res = s.DoAs(t, "", "OPTIONS", "/p/"+ids.At("bot", t0)+"/events", nil, "Origin", shop)
	assert.Equal(t, 403, res.Code)
}

func TestEventsUnknownOrPausedPopup(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	d := definition()
	d.Status = ptr(StatusPaused)
	paused := s.create(t, d)
	res := s.post(t, shop, event(paused.ID, "", "impression"))
	assert.Equal(t, 404, res.Code, res.Body)
	assert.Equal(t, "not_found", res.JSON["code"])
	res = s.post(t, shop, event("pop_00000000000000000000000000", "", "impression"))
	assert.Equal(t, 404, res.Code, res.Body)
	res = s.post(t, shop, event("../../x", "", "impression"))
	assert.Equal(t, 404, res.Code, res.Body)

	_, err := s.svc.Update(t.Context(), s.bot, paused.ID, 1, Definition{Status: ptr(StatusActive)})
	require.NoError(t, err)
	res = s.post(t, shop, event(paused.ID, "", "impression"))
	assert.Equal(t, 202, res.Code, res.Body)
}

func TestEventsRateLimit(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.svc.limit = ratelimit.Limit{Name: EventLimit.Name, Max: 3, Window: time.Minute}
	d := definition()
	d.AllowedOrigins = &[]string{shop, "https://blog.example"}
	p := s.create(t, d)
	s.clock.Advance(10 * time.Second) // 12:00:11, 49 s before the window ends
	for range 3 {
		res := s.post(t, shop, event(p.ID, "", "impression"))
		require.Equal(t, 202, res.Code, res.Body)
	}
	res := s.post(t, shop, event(p.ID, "", "impression"))
	require.Equal(t, 429, res.Code, res.Body)
	assert.Equal(t, "rate_limited", res.JSON["code"])
	assert.Equal(t, "49", res.Header.Get("Retry-After"))
	assert.Equal(t, shop, res.Header.Get("Access-Control-Allow-Origin"), "the page can read the 429")
	assert.Equal(t, "Retry-After", res.Header.Get("Access-Control-Expose-Headers"), "and its Retry-After")

	res = s.post(t, "https://blog.example", event(p.ID, "", "impression"))
	assert.Equal(t, 202, res.Code, "the limit is per origin")
	s.clock.Advance(time.Minute)
	res = s.post(t, shop, event(p.ID, "", "impression"))
	assert.Equal(t, 202, res.Code, "a new window")

	st, err := s.svc.Stats(t.Context(), s.bot, p.ID, "", "")
	require.NoError(t, err)
	assert.Equal(t, int64(5), st.Totals.Impressions, "the refused event is not counted")
}

// scriptData reads the JSON the script embeds.
func embedded(t *testing.T, js string) scriptData {
	t.Helper()
	const marker = "var D = "
	i := strings.Index(js, marker)
	require.GreaterOrEqual(t, i, 0, "no data in the script")
	rest := js[i+len(marker):]
	line := rest[:strings.Index(rest, ";\n")]
	var d scriptData
	require.NoError(t, json.Unmarshal([]byte(line), &d))
	return d
}

func TestScriptRoute(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	d := definition()
	d.Schedule = &Schedule{DaysOfWeek: []string{"mon", "tue"}}
	d.Content.Title = `</script><script>alert(1)</script> & <!-- ` + "\u2028"
	d.Targeting.URLRules = append(d.Targeting.URLRules, URLRule{Match: MatchGlob, Value: "https://shop.example/p/*"})
	d.Experiment = &ExperimentInput{Variants: []Variant{{Key: "a", Share: 30}, {Key: "b", Share: 70, Content: &ContentOverride{Title: ptr("B")}}}}
	r := s.Do(t, "POST", "/api/bots/"+s.bot+"/popups", d)
	require.Equal(t, 201, r.Code, r.Body)
	active, err := s.svc.Get(t.Context(), s.bot, r.JSON["id"].(string))
	require.NoError(t, err)
	require.NotNil(t, active.Schedule)
	assert.Equal(t, "Europe/Berlin", active.Schedule.Timezone, "a schedule written without a time zone gets the bot's")
	s.clock.Advance(time.Second)
	d = definition()
	d.Status = ptr(StatusPaused)
	s.create(t, d)
	d = definition()
	d.Schedule = &Schedule{EndsAt: ptr(t0.Add(time.Hour).Format(time.RFC3339))}
	ending := s.create(t, d)

	res := s.DoAs(t, "", "GET", "/p/"+s.bot+"/popups.js", nil)
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, "text/javascript; charset=utf-8", res.Header.Get("Content-Type"))
	assert.Equal(t, "public, max-age=60", res.Header.Get("Cache-Control"))
	js := res.Body
	assert.NotContains(t, js, "</script", "the data cannot close the script element")
	assert.NotContains(t, js, "<!--")
	assert.NotContains(t, js, "\u2028")
	assert.Contains(t, js, `\u003c/script\u003e\u003cscript\u003ealert(1)\u003c/script\u003e \u0026 \u003c!-- \u2028`)

	data := embedded(t, js)
	assert.Equal(t, "UTC", data.TZ)
	assert.Equal(t, "Europe/Berlin", data.Popups[0].Schedule.Timezone, "each schedule carries its zone")
	require.Len(t, data.Popups, 2, "the active popups only")
	assert.Equal(t, []string{active.ID, ending.ID}, []string{data.Popups[0].ID, data.Popups[1].ID})
	got := data.Popups[0]
	require.Len(t, got.Variants, 2)
	assert.Equal(t, publicVariant{Key: "a", Share: 30, Content: active.Content}, got.Variants[0])
	assert.Equal(t, "B", got.Variants[1].Content.Title)
	assert.Equal(t, active.Content.Fields, got.Variants[1].Content.Fields, "an override keeps the form")
	assert.Equal(t, `^https://shop\.example/p/.*$`, got.Targeting.URLRules[1].RE)
	assert.Empty(t, got.Targeting.URLRules[0].RE)
	assert.Equal(t, []publicVariant{{Share: 100, Content: ending.Content}}, data.Popups[1].Variants, "no experiment: one variant, no key")

	// Only what a browser needs: no name, status, revision, origins or times.
	var raw struct {
		Popups []map[string]json.RawMessage `json:"popups"`
	}
	line := js[strings.Index(js, "var D = ")+len("var D = "):]
	require.NoError(t, json.Unmarshal([]byte(line[:strings.Index(line, ";\n")]), &raw))
	for _, p := range raw.Popups {
		var keys []string
		for k := range p {
			keys = append(keys, k)
		}
		assert.ElementsMatch(t, []string{"id", "variants", "targeting", "frequency", "schedule"}, keys)
	}
	assert.NotContains(t, js, "Newsletter")
	assert.NotContains(t, js, "allowed_origins")

	// Once its schedule has ended a popup leaves the script.
	s.clock.Advance(2 * time.Hour)
	res = s.DoAs(t, "", "GET", "/p/"+s.bot+"/popups.js", nil)
	require.Equal(t, 200, res.Code)
	assert.Len(t, embedded(t, res.Body).Popups, 1)

	res = s.DoAs(t, "", "GET", "/p/"+ids.At("bot", t0)+"/popups.js", nil)
	require.Equal(t, 200, res.Code)
	assert.Empty(t, embedded(t, res.Body).Popups, "a bot without popups gets a script that does nothing")
	res = s.DoAs(t, "", "GET", "/p/nope/popups.js", nil)
	assert.Equal(t, 404, res.Code)
}

func TestScriptJSONEscapes(t *testing.T) {
	t.Parallel()
	// Whatever produced the JSON, the five characters leave as escapes.
	assert.Equal(t, `"\u003c/script\u003e \u0026 \u2028\u2029"`, scriptJSONEscapes.Replace("\"</script> & \u2028\u2029\""))
	b, err := scriptJSON(map[string]string{"t": "</script>\u2029"})
	require.NoError(t, err)
	assert.Equal(t, `{"t":"\u003c/script\u003e\u2029"}`, string(b))
	var back map[string]string
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, "</script>\u2029", back["t"], "the escapes mean the same")
}

// harness runs the script (its path is argv[1]) twice against a stub page on
// https://shop.example/blog/post: the first view shows the popup and submits its form, the
// second must show nothing (the frequency caps). It prints the events posted and what the
// page held after each view.
const harness = `
const store = {}, session = {}, posted = [];
const storage = (m) => ({ getItem: (k) => (k in m ? m[k] : null), setItem: (k, v) => { m[k] = String(v); }, removeItem: (k) => { delete m[k]; } });
function el(tag) {
  const e = { tagName: tag, style: {}, children: [], attrs: {}, parentNode: null,
    setAttribute(k, v) { this.attrs[k] = v; },
    appendChild(c) { this.children.push(c); c.parentNode = this; return c; },
    removeChild(c) { this.children = this.children.filter((x) => x !== c); c.parentNode = null; } };
  e.elements = { namedItem: (n) => find(e, (x) => x.tagName === "input" && x.name === n) };
  return e;
}
function find(e, ok) {
  if (ok(e)) return e;
  for (const c of e.children || []) { const f = find(c, ok); if (f) return f; }
  return null;
}
const body = el("body");
globalThis.document = { currentScript: { src: "https://api.example/p/bot_x/popups.js?v=2" }, readyState: "complete",
  createElement: el, createTextNode: (t) => ({ text: t }), body, addEventListener() {},
  documentElement: { scrollHeight: 1000, clientHeight: 1000, scrollTop: 0 } };
globalThis.window = { localStorage: storage(store), sessionStorage: storage(session), crypto: require("crypto").webcrypto, addEventListener() {}, pageYOffset: 0 };
Object.defineProperty(globalThis, "navigator", { value: { userAgent: "Mozilla/5.0 (X11; Linux x86_64)", maxTouchPoints: 0 }, configurable: true });
globalThis.location = { href: "https://shop.example/blog/post#top" };
globalThis.fetch = (url, o) => { posted.push({ url, method: o.method, body: JSON.parse(o.body) }); return Promise.resolve({}); };
const run = () => { delete require.cache[require.resolve(process.argv[1])]; require(process.argv[1]); };
const out = {};
run();
out.first = body.children.length;
const form = find(body, (x) => x.tagName === "form");
find(body, (x) => x.name === "email").value = " ann@shop.example ";
find(body, (x) => x.name === "consent").checked = true;
form.onsubmit({ preventDefault() {} });
out.afterSubmit = body.children.length;
run();
out.second = body.children.length;
out.posted = posted;
process.stdout.write(JSON.stringify(out));
`

// The script is valid JavaScript that does what it is for: shows an eligible popup, posts
// its impression and conversion next to where it was loaded from, and respects its caps. A
// browser's RegExp reads the compiled globs as Go does. It needs node; without it there is
// nothing to run the script with.
func TestScriptInNode(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	f := newFixture(t)
	p := f.create(t, definition())
	js, err := f.svc.Script(t.Context(), f.bot)
	require.NoError(t, err)
	dir := t.TempDir()
	script := filepath.Join(dir, "popups.js")
	require.NoError(t, os.WriteFile(script, js, 0o600))
	out, err := exec.Command(node, "--check", script).CombinedOutput()
	require.NoError(t, err, "%s", out)

	out, err = exec.Command(node, "-e", harness, script).CombinedOutput()
	require.NoError(t, err, "%s", out)
	var got struct {
		First, AfterSubmit, Second int
		Posted                     []struct {
			URL, Method string
			Body        map[string]any
		}
	}
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)
	assert.Equal(t, 1, got.First, "the popup is shown")
	assert.Equal(t, 0, got.AfterSubmit, "and closed by its form")
	assert.Equal(t, 0, got.Second, "a converted visitor does not see it again")
	require.Len(t, got.Posted, 2, "%s", out)
	for _, e := range got.Posted {
		assert.Equal(t, "https://api.example/p/bot_x/events", e.URL)
		assert.Equal(t, "POST", e.Method)
		assert.Equal(t, p.ID, e.Body["popup_id"])
		assert.Regexp(t, `^[0-9a-f]{32}$`, e.Body["visitor_id"])
		assert.NotContains(t, e.Body, "variant")
	}
	assert.Equal(t, "impression", got.Posted[0].Body["type"])
	assert.Equal(t, "conversion", got.Posted[1].Body["type"])
	assert.Equal(t, map[string]any{"email": "ann@shop.example", "consent": "true"}, got.Posted[1].Body["fields"])
	// What the script posts, the event route takes.
	var e Event
	b, err := json.Marshal(got.Posted[1].Body)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &e))
	require.NoError(t, e.Validate())
	require.NoError(t, f.svc.Ingest(t.Context(), f.bot, shop, e))

	re, err := globRegexp("https://shop.example/[a-c]?/*.html")
	require.NoError(t, err)
	check := `const re = new RegExp(process.argv[1], "u");
const r = ["https://shop.example/b1/x.html", "https://shop.example/d1/x.html", "https://shop.example/a/x.html", "https://shop.example/aa/x/y.html"].map(u => re.test(u));
process.stdout.write(JSON.stringify(r));`
	out, err = exec.Command(node, "-e", check, re).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, `[true,false,false,true]`, string(out))
}

func TestPurgeStep(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	other := ids.At("bot", t0.Add(time.Nanosecond))
	fill := func(bot string) {
		ctx := t.Context()
		d := definition()
		d.Experiment = &ExperimentInput{Variants: []Variant{{Key: "a", Share: 50}, {Key: "b", Share: 50}}}
		p, err := f.svc.Create(ctx, bot, d)
		require.NoError(t, err)
		gone, err := f.svc.Create(ctx, bot, definition())
		require.NoError(t, err)
		for _, v := range []string{"a", "b"} {
			require.NoError(t, f.svc.Ingest(ctx, bot, shop, Event{PopupID: p.ID, Variant: ptr(v), Type: EventImpression, VisitorID: "v"}))
		}
		require.NoError(t, f.svc.Ingest(ctx, bot, shop, Event{PopupID: gone.ID, Type: EventConversion, VisitorID: "v", Fields: map[string]string{"email": "a@b.example"}}))
		require.NoError(t, f.svc.Delete(ctx, bot, gone.ID, nil))
	}
	fill(f.bot)
	fill(other)
	f.clock.Advance(3 * time.Minute) // the rate-limit counters expire on their own
	ctx := sqlitetest.Unrecorded(t.Context())
	mine, err := f.raw.Mentioning(ctx, f.bot)
	require.NoError(t, err)
	require.NotEmpty(t, mine)
	before, err := f.raw.Mentioning(ctx, other)
	require.NoError(t, err)
	require.Len(t, before, len(mine))

	// The step runs in the jobs Lambda.
	require.NoError(t, purge.Run(sqlitetest.As(t.Context(), "jobs"), PurgeStep(f.raw), purge.Payload{AccountID: "acct_x", BotID: f.bot}))

	left, err := f.raw.Mentioning(ctx, f.bot)
	require.NoError(t, err)
	assert.Empty(t, left, "nothing of the bot remains, the deleted popup's counters included")
	after, err := f.raw.Mentioning(ctx, other)
	require.NoError(t, err)
	assert.Equal(t, before, after, "another bot's popups are untouched")
}
