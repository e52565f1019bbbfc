package crm

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/auth"
	crmapi "github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/crm/dynamics"
	"github.com/botplatform/api/shared/crm/hubspot"
	"github.com/botplatform/api/shared/crm/pipedrive"
	"github.com/botplatform/api/shared/ratelimit"
	"github.com/botplatform/api/shared/secrets/keyfile"
	"github.com/botplatform/api/shared/secrets/kms"
	"github.com/botplatform/api/shared/secrets/secretstest"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
	dynamicsfake "github.com/botplatform/api/tests/fakes/crm/dynamics"
	hubspotfake "github.com/botplatform/api/tests/fakes/crm/hubspot"
	pipedrivefake "github.com/botplatform/api/tests/fakes/crm/pipedrive"
)

// mappingFixture serves the family with the real HubSpot, Pipedrive and Dynamics clients
// against their fakes, and the real subscribers family beneath the mappings. The Dynamics
// connection is made by the tests that want one (connectDynamics).
type mappingFixture struct {
	*fixture
	hs    *hubspotfake.Server
	pd    *pipedrivefake.Server
	dyn   *dynamicsfake.Server
	subs  *subscribers.Service
	hsID  string // a HubSpot connection of f.bot
	pdID  string // a Pipedrive connection of f.bot
	hsURL string // its routes' base
	pdURL string
	jobs  *starts // the jobs the service started
	// beforeDynamics, when set, is called as a Dynamics client is built (with the
	// connection's entities), before it makes any request.
	beforeDynamics func(Entities)
}

func newMappingFixture(t *testing.T) *mappingFixture {
	t.Helper()
	f := &mappingFixture{fixture: newFixture(t), hs: hubspotfake.New(t), pd: pipedrivefake.New(t), dyn: dynamicsfake.New(t), jobs: &starts{}}
	f.subs = subscribers.NewService(f.raw, f.clock.Now, nil)
	newClient := func(provider string, creds crmapi.Credentials, entities Entities) (crmapi.Client, error) {
		switch provider {
		case crmapi.Dynamics:
			if f.beforeDynamics != nil {
				f.beforeDynamics(entities)
			}
			return dynamics.New(dynamics.Config{LoginURL: f.dyn.URL(), AllowPrivate: true, Contacts: entities.Contacts}, creds)
		case crmapi.HubSpot:
			return hubspot.New(hubspot.Config{BaseURL: f.hs.URL(), AllowPrivate: true}, creds)
		case crmapi.Pipedrive:
			return pipedrive.New(pipedrive.Config{BaseURL: f.pd.URL(), AllowPrivate: true}, creds)
		}
		return nil, fmt.Errorf("no client for %s", provider)
	}
	key, err := keyfile.New(make([]byte, 32))
	require.NoError(t, err)
	// Dynamics connections are made with the Dynamics fake's Entra ID and environment.
	set := settings(f.auth)
	set.DynamicsLoginURL, set.DynamicsOrigins = f.dyn.URL(), []string{f.dyn.URL()}
	f.svc, err = New(Config{Store: f.raw, Sealer: secretstest.Wrap(key, kms.PurposeCRMCredentials), Bots: bots{account: f.Account.ID, ids: []string{f.bot, f.otherBot}},
		Audit: sink{audit.NewLog(f.raw)}, Limiter: ratelimit.New(f.raw, f.clock.Now), NewClient: newClient,
		Subscribers: SubscribersOf(f.subs), HTTPClient: f.auth.Client(), Settings: set, Jobs: f.jobs,
		Log: slog.New(slog.DiscardHandler), Now: f.clock.Now})
	require.NoError(t, err)
	f.Mux = f.NewMux(t)
	Routes(f.Mux, f.svc, f.Cursors)

	ctx := t.Context()
	access, refresh := f.hs.IssueToken()
	c, _, err := f.svc.connect(ctx, f.bot, Connection{Provider: crmapi.HubSpot, Auth: crmapi.AuthOAuth, Account: crmapi.Account{ID: "62515"}},
		crmapi.Credentials{AccessToken: access, RefreshToken: refresh, Expiry: f.clock.Now().Add(20 * time.Minute)})
	require.NoError(t, err)
	f.hsID, f.hsURL = c.ID, f.base+"/"+c.ID
	c, _, err = f.svc.connect(ctx, f.bot, Connection{Provider: crmapi.Pipedrive, Auth: crmapi.AuthAPIKey, Account: crmapi.Account{ID: "7350001"}},
		crmapi.Credentials{APIKey: pipedrivefake.APIToken})
	require.NoError(t, err)
	f.pdID, f.pdURL = c.ID, f.base+"/"+c.ID
	return f
}

// catalog gives the bot custom fields and labels.
func (f *mappingFixture) catalog(t *testing.T, bot string) {
	t.Helper()
	ctx := sqlitetest.Unrecorded(t.Context())
	for _, spec := range []subscribers.FieldSpec{{Name: "email", Type: subscribers.TypeString}, {Name: "plan", Type: subscribers.TypeString},
		{Name: "orders", Type: subscribers.TypeNumber}, {Name: "vip", Type: subscribers.TypeBoolean},
		{Name: "birthday", Type: subscribers.TypeDatetime}, {Name: "stage", Type: subscribers.TypeString}} {
		_, err := f.subs.CreateField(ctx, bot, spec)
		require.NoError(t, err)
	}
	_, err := f.subs.CreateLabel(ctx, bot, "Customer")
	require.NoError(t, err)
}

// subscriber adds a subscriber of bot with fields and the label Customer.
func (f *mappingFixture) subscriber(t *testing.T, bot, external string, fields map[string]any, customer bool) string {
	t.Helper()
	ctx := sqlitetest.Unrecorded(t.Context())
	first, last := "Ann", "Lee"
	ch := subscribers.Changes{FirstName: &first, LastName: &last, Fields: fields}
	if customer {
		id, err := f.subs.LabelNamed(ctx, bot, "Customer")
		require.NoError(t, err)
		ch.AddLabels = []string{id}
	}
	sub, _, err := f.subs.Upsert(ctx, bot, subscribers.ChannelTelegram, external, ch)
	require.NoError(t, err)
	return sub.ID
}

// hubspotMapping is a valid mapping of the HubSpot fake's contacts.
const hubspotMapping = `{"object":"contacts","key":"email","fields":[
	{"source":"subscriber:first_name","target":"firstname","direction":"push"},
	{"source":"subscriber:last_name","target":"lastname","direction":"both"},
	{"source":"field:orders","target":"bot_conversations","direction":"push"},
	{"source":"label:Customer","target":"bot_subscribed","direction":"push"},
	{"source":"field:birthday","target":"date_of_birth","direction":"push"},
	{"source":"field:stage","target":"lifecyclestage","direction":"push","values":{"paid":"customer"}},
	{"source":"field:plan","target":"hs_object_id","direction":"pull"}
],"deal":{"pipeline":"default","stage":"appointmentscheduled"}}`

func TestDiscovery(t *testing.T) {
	t.Parallel()
	f := newMappingFixture(t)

	res := f.Do(t, "GET", f.hsURL+"/objects", nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, []any{map[string]any{"name": "contacts", "label": "Contacts"}, map[string]any{"name": "companies", "label": "Companies"},
		map[string]any{"name": "deals", "label": "Deals"}}, res.JSON["data"])

	res = f.Do(t, "GET", f.hsURL+"/objects/contacts/fields", nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	byName := map[string]map[string]any{}
	for _, v := range res.JSON["data"].([]any) {
		byName[v.(map[string]any)["name"].(string)] = v.(map[string]any)
	}
	assert.Equal(t, "email", byName["email"]["type"])
	assert.Equal(t, "phone", byName["phone"]["type"])
	assert.Equal(t, "bool", byName["bot_subscribed"]["type"])
	assert.Equal(t, "number", byName["bot_conversations"]["type"])
	assert.Equal(t, "date", byName["date_of_birth"]["type"])
	assert.Equal(t, "enum", byName["lifecyclestage"]["type"])
	assert.Contains(t, byName["lifecyclestage"]["options"], "customer")
	assert.Equal(t, true, byName["hs_object_id"]["read_only"])
	fetched := res.JSON["fetched_at"]

	// Served from the store within the TTL; ?refresh=true asks the CRM.
	calls := f.hs.Requests()
	f.clock.Advance(time.Minute)
	res = f.Do(t, "GET", f.hsURL+"/objects/contacts/fields", nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, calls, f.hs.Requests(), "cached")
	assert.Equal(t, fetched, res.JSON["fetched_at"])
	res = f.Do(t, "GET", f.hsURL+"/objects/contacts/fields?refresh=true", nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, calls+1, f.hs.Requests())
	assert.NotEqual(t, fetched, res.JSON["fetched_at"])
	calls = f.hs.Requests()
	f.clock.Advance(DiscoveryTTL)
	res = f.Do(t, "GET", f.hsURL+"/objects/contacts/fields", nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, calls+1, f.hs.Requests(), "expired")

	res = f.Do(t, "GET", f.hsURL+"/objects/contacts/fields?refresh=yes", nil)
	assert.Equal(t, "invalid_parameter", res.Problem())
	res = f.Do(t, "GET", f.hsURL+"/objects/tickets/fields", nil)
	assert.Equal(t, http.StatusNotFound, res.Code, res.Body)

	res = f.Do(t, "GET", f.hsURL+"/pipelines", nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	pl := res.JSON["data"].([]any)[0].(map[string]any)
	assert.Equal(t, "default", pl["id"])
	assert.Equal(t, "appointmentscheduled", pl["stages"].([]any)[0].(map[string]any)["id"], "in display order")

	// Pipedrive: custom fields by their keys, enum options by id, pipelines in order.
	res = f.Do(t, "GET", f.pdURL+"/objects/persons/fields", nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Contains(t, res.Body, pipedrivefake.KeySubscribed)
	res = f.Do(t, "GET", f.pdURL+"/pipelines", nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, "Sales", res.JSON["data"].([]any)[0].(map[string]any)["label"])

	// Provider failures map to the family's problems.
	f.hs.FailNext(1, http.StatusBadGateway)
	res = f.Do(t, "GET", f.hsURL+"/pipelines?refresh=true", nil)
	assert.Equal(t, http.StatusServiceUnavailable, res.Code, res.Body)
	assert.Equal(t, "provider_unavailable", res.Problem())
	f.pd.RevokeToken(pipedrivefake.APIToken)
	res = f.Do(t, "GET", f.pdURL+"/objects/persons/fields?refresh=true", nil)
	assert.Equal(t, http.StatusUnprocessableEntity, res.Code, res.Body)
	assert.Equal(t, "crm_credentials_rejected", res.Problem())
	res = f.Do(t, "GET", f.pdURL, nil)
	assert.Equal(t, "reconnect_required", res.JSON["status"])

	res = f.Do(t, "GET", f.base+"/crm_00000000000000000000000000/objects", nil)
	assert.Equal(t, http.StatusNotFound, res.Code)
	assert.NotContains(t, f.partition(t), pipedrivefake.APIToken)
}

func TestMappingValidation(t *testing.T) {
	t.Parallel()
	f := newMappingFixture(t)
	f.catalog(t, f.bot)
	field := func(source, target, direction string, extra ...string) string {
		return fmt.Sprintf(`{"object":"contacts","key":"email","fields":[{"source":%q,"target":%q,"direction":%q%s}]}`,
			source, target, direction, strings.Join(extra, ""))
	}
	for _, c := range []struct {
		name, body string
		status     int
		field      string
	}{
		{"unknown target", field("field:plan", "nickname", "push"), 422, "fields[0].target"},
		{"read-only target pushed", field("field:plan", "hs_object_id", "push"), 422, "fields[0].target"},
		{"read-only target both", field("field:plan", "createdate", "both"), 422, "fields[0].target"},
		{"number to bool", field("field:orders", "bot_subscribed", "push"), 422, "fields[0].target"},
		{"string to number", field("field:plan", "bot_conversations", "push"), 422, "fields[0].target"},
		{"datetime to number", field("field:birthday", "bot_conversations", "push"), 422, "fields[0].target"},
		{"label to number", field("label:Customer", "bot_conversations", "push"), 422, "fields[0].target"},
		{"bool to enum without values", field("field:vip", "lifecyclestage", "push"), 422, "fields[0].values"},
		{"value not an option", field("field:plan", "lifecyclestage", "push", `,"values":{"pro":"whale"}`), 422, "fields[0].values.pro"},
		{"bool values other than true and false", field("label:Customer", "lifecyclestage", "push", `,"values":{"yes":"customer"}`), 422, "fields[0].values.yes"},
		{"values for a number target", field("field:orders", "bot_conversations", "push", `,"values":{"1":"2"}`), 422, "fields[0].values"},
		{"unknown custom field", field("field:nope", "firstname", "push"), 422, "fields[0].source"},
		{"unknown label", field("label:Nope", "bot_subscribed", "push"), 422, "fields[0].source"},
		{"read-only attribute pulled", field("subscriber:id", "firstname", "pull"), 422, "fields[0].direction"},
		{"unknown object", `{"object":"tickets","key":"email","fields":[]}`, 422, "object"},
		{"unknown key", `{"object":"contacts","key":"nope","fields":[]}`, 422, "key"},
		{"read-only key", `{"object":"contacts","key":"hs_object_id","fields":[]}`, 422, "key"},
		{"bool key source", `{"object":"contacts","key":"email","key_source":"field:vip","fields":[]}`, 422, "key_source"},
		{"unknown stage", `{"object":"contacts","key":"email","fields":[],"deal":{"pipeline":"default","stage":"nope"}}`, 422, "deal.stage"},
		{"unknown pipeline", `{"object":"contacts","key":"email","fields":[],"deal":{"pipeline":"nope","stage":"x"}}`, 422, "deal.pipeline"},
		{"duplicate target", `{"object":"contacts","key":"email","fields":[{"source":"field:plan","target":"firstname","direction":"push"},
			{"source":"subscriber:first_name","target":"firstname","direction":"push"}]}`, 422, "fields[1].target"},
		{"two pulls into one source", `{"object":"contacts","key":"email","fields":[{"source":"field:plan","target":"firstname","direction":"pull"},
			{"source":"field:plan","target":"lastname","direction":"both"}]}`, 422, "fields[1].source"},
		{"bad direction", field("field:plan", "firstname", "sideways"), 400, "fields[0].direction"},
		{"bad source", field("plan", "firstname", "push"), 400, "fields[0].source"},
		{"unknown attribute", field("subscriber:age", "firstname", "push"), 400, "fields[0].source"},
		{"no object", `{"key":"email","fields":[]}`, 400, "object"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := f.Do(t, "PUT", f.hsURL+"/mapping", c.body)
			require.Equal(t, c.status, res.Code, res.Body)
			want := map[int]string{400: "validation_failed", 422: "invalid_mapping"}[c.status]
			assert.Equal(t, want, res.Problem())
			var fields []string
			for _, e := range res.JSON["errors"].([]any) {
				fields = append(fields, e.(map[string]any)["field"].(string))
			}
			assert.Contains(t, fields, c.field, res.Body)
		})
	}

	// At most 200 fields.
	var many []string
	for i := range MaxMappingFields + 1 {
		many = append(many, fmt.Sprintf(`{"source":"field:plan","target":"f%d","direction":"push"}`, i))
	}
	res := f.Do(t, "PUT", f.hsURL+"/mapping", `{"object":"contacts","key":"email","fields":[`+strings.Join(many, ",")+`]}`)
	assert.Equal(t, http.StatusBadRequest, res.Code)
	assert.Contains(t, res.Body, "at most 200")

	// What passes: every compatible pair, a read-only target pulled, enum values that are
	// options, labels to bool.
	res = f.Do(t, "PUT", f.hsURL+"/mapping", hubspotMapping)
	require.Equal(t, http.StatusCreated, res.Code, res.Body)

	// A field added in the CRM after the cache was filled is found: a problem is checked
	// again against a fresh discovery. (The HubSpot fake's schema is fixed, so the
	// Pipedrive connection's cache is filled, and the check proves the refetch by count.)
	res = f.Do(t, "GET", f.pdURL+"/objects/persons/fields", nil)
	require.Equal(t, http.StatusOK, res.Code)
	calls := f.pd.Requests()
	res = f.Do(t, "PUT", f.pdURL+"/mapping", `{"object":"persons","key":"email","fields":[{"source":"field:plan","target":"nope","direction":"push"}]}`)
	assert.Equal(t, http.StatusUnprocessableEntity, res.Code)
	assert.Greater(t, f.pd.Requests(), calls, "the cached discovery was checked against the CRM again")
}

func TestMappingRevisions(t *testing.T) {
	t.Parallel()
	f := newMappingFixture(t)
	f.catalog(t, f.bot)
	res := f.Do(t, "GET", f.hsURL+"/mapping", nil)
	assert.Equal(t, http.StatusNotFound, res.Code)

	res = f.Do(t, "PUT", f.hsURL+"/mapping", hubspotMapping)
	require.Equal(t, http.StatusCreated, res.Code, res.Body)
	assert.Equal(t, float64(1), res.JSON["revision"])
	assert.Equal(t, "subscriber:email", res.JSON["key_source"], "the default key source")
	assert.Equal(t, f.Owner.ID, res.JSON["saved_by"])
	assert.Equal(t, f.hsID, res.JSON["connection_id"])

	// Without expected_revision a PUT only creates; a stale one is 409; 0 is no revision.
	res = f.Do(t, "PUT", f.hsURL+"/mapping", hubspotMapping)
	assert.Equal(t, http.StatusConflict, res.Code)
	assert.Equal(t, "stale_revision", res.Problem())
	assert.Equal(t, float64(1), res.JSON["current_revision"])
	withRev := func(rev int, body string) string {
		return fmt.Sprintf(`{"expected_revision":%d,%s`, rev, strings.TrimPrefix(body, "{"))
	}
	res = f.Do(t, "PUT", f.hsURL+"/mapping", withRev(0, hubspotMapping))
	assert.Equal(t, http.StatusBadRequest, res.Code)
	assert.Equal(t, "invalid_body", res.Problem())
	res = f.Do(t, "PUT", f.pdURL+"/mapping", withRev(1, `{"object":"persons","key":"email","fields":[]}`))
	assert.Equal(t, "stale_revision", res.Problem(), "no mapping yet")
	assert.Equal(t, float64(0), res.JSON["current_revision"])

	// The same mapping again saves nothing.
	res = f.Do(t, "PUT", f.hsURL+"/mapping", withRev(1, hubspotMapping))
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, float64(1), res.JSON["revision"])

	second := `{"object":"contacts","key":"email","fields":[{"source":"field:plan","target":"firstname","direction":"push"}]}`
	res = f.Do(t, "PUT", f.hsURL+"/mapping", withRev(1, second))
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, float64(2), res.JSON["revision"])
	res = f.Do(t, "PUT", f.hsURL+"/mapping", withRev(1, second))
	assert.Equal(t, "stale_revision", res.Problem())
	assert.Equal(t, float64(2), res.JSON["current_revision"])
	third := `{"object":"contacts","key":"email","fields":[]}`
	res = f.Do(t, "PUT", f.hsURL+"/mapping", withRev(2, third))
	require.Equal(t, http.StatusOK, res.Code, res.Body)

	res = f.Do(t, "GET", f.hsURL+"/mapping", nil)
	require.Equal(t, http.StatusOK, res.Code)
	assert.Equal(t, float64(3), res.JSON["revision"])
	assert.Equal(t, []any{}, res.JSON["fields"])

	// Every revision is kept, newest first, paged.
	res = f.Do(t, "GET", f.hsURL+"/mapping/revisions?limit=2", nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	page := res.JSON["data"].([]any)
	require.Len(t, page, 2)
	assert.Equal(t, float64(3), page[0].(map[string]any)["revision"])
	assert.Equal(t, float64(2), page[1].(map[string]any)["revision"])
	res = f.Do(t, "GET", f.hsURL+"/mapping/revisions?limit=2&cursor="+url.QueryEscape(res.JSON["next_cursor"].(string)), nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	require.Len(t, res.JSON["data"], 1)
	assert.Nil(t, res.JSON["next_cursor"])
	res = f.Do(t, "GET", f.hsURL+"/mapping/revisions/1", nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Len(t, res.JSON["fields"], 7)
	assert.Equal(t, map[string]any{"pipeline": "default", "stage": "appointmentscheduled"}, res.JSON["deal"])
	for _, bad := range []string{"4", "0", "01", "x"} {
		res = f.Do(t, "GET", f.hsURL+"/mapping/revisions/"+bad, nil)
		assert.Equal(t, http.StatusNotFound, res.Code, bad)
	}
	res = f.Do(t, "GET", f.pdURL+"/mapping/revisions", nil)
	assert.Equal(t, []any{}, res.JSON["data"])

	// Every PUT is audited, refused ones too.
	events, _, err := audit.NewLog(f.raw).List(sqlitetest.Unrecorded(t.Context()), f.Account.ID, f.bot, 50, "")
	require.NoError(t, err)
	var statuses []int
	for _, e := range events {
		if e.Route == "PUT /api/bots/{botID}/crm/connections/{connectionID}/mapping" {
			statuses = append(statuses, e.Status)
		}
	}
	assert.ElementsMatch(t, []int{201, 409, 400, 409, 200, 200, 409, 200}, statuses)

	// Disconnecting removes the mapping and its revisions.
	res = f.Do(t, "DELETE", f.hsURL, nil)
	require.Equal(t, http.StatusNoContent, res.Code, res.Body)
	assert.NotContains(t, f.partition(t), `"connection_id":"`+f.hsID)
}

func TestPreview(t *testing.T) {
	t.Parallel()
	f := newMappingFixture(t)
	f.catalog(t, f.bot)
	res := f.Do(t, "PUT", f.hsURL+"/mapping", hubspotMapping)
	require.Equal(t, http.StatusCreated, res.Code, res.Body)
	sub := f.subscriber(t, f.bot, "111", map[string]any{"email": "ann@example.com", "orders": 3, "birthday": "1990-04-05T10:00:00Z",
		"stage": "paid"}, true)

	// No record has the email: a sync would create one, with its deal.
	writes := f.hs.Count("contacts")
	res = f.Do(t, "POST", f.hsURL+"/preview", fmt.Sprintf(`{"subscriber_id":%q}`, sub))
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, "create", res.JSON["action"])
	assert.Equal(t, map[string]any{"field": "email", "source": "subscriber:email", "value": "ann@example.com"}, res.JSON["key"])
	assert.Equal(t, map[string]any{"firstname": "Ann", "lastname": "Lee", "bot_conversations": float64(3), "bot_subscribed": true,
		"date_of_birth": "1990-04-05", "lifecyclestage": "customer"}, res.JSON["properties"])
	assert.Equal(t, map[string]any{"pipeline": "default", "stage": "appointmentscheduled"}, res.JSON["deal"])
	last := res.JSON["fields"].([]any)[6].(map[string]any)
	assert.Equal(t, "skip", last["status"])
	assert.Equal(t, "pull_only", last["reason"])
	assert.Equal(t, float64(1), res.JSON["mapping_revision"])

	// A record with the email: an update, with what changes.
	id := f.hs.Create("contacts", map[string]string{"email": "ann@example.com", "firstname": "Ann", "lastname": "Smith", "bot_conversations": "3"})
	res = f.Do(t, "POST", f.hsURL+"/preview", fmt.Sprintf(`{"subscriber_id":%q}`, sub))
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, "update", res.JSON["action"])
	assert.Equal(t, id, res.JSON["record_id"])
	assert.Equal(t, map[string]any{"pipeline": "default", "stage": "appointmentscheduled"}, res.JSON["deal"],
		"the record has no open deal in the pipeline: the sync would open one")
	f.hs.CreateDeal(id, map[string]string{"dealname": "Ann's", "pipeline": "default", "dealstage": "appointmentscheduled"})
	res = f.Do(t, "POST", f.hsURL+"/preview", fmt.Sprintf(`{"subscriber_id":%q}`, sub))
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Nil(t, res.JSON["deal"], "the record's open deal would be taken")
	changed := map[string]any{}
	for _, v := range res.JSON["fields"].([]any) {
		pf := v.(map[string]any)
		if pf["status"] == "write" {
			changed[pf["target"].(string)] = pf["changed"]
		}
	}
	assert.Equal(t, map[string]any{"firstname": false, "lastname": true, "bot_conversations": false, "bot_subscribed": true,
		"date_of_birth": true, "lifecyclestage": true}, changed)
	f.hs.Change("contacts", id, map[string]string{"lastname": "Lee", "bot_subscribed": "true", "date_of_birth": "1990-04-05",
		"lifecyclestage": "customer"})
	res = f.Do(t, "POST", f.hsURL+"/preview", fmt.Sprintf(`{"subscriber_id":%q}`, sub))
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, "unchanged", res.JSON["action"])

	// Missing values are skipped with the reason; no email, no record to match.
	bare := f.subscriber(t, f.bot, "222", map[string]any{"stage": "trial"}, false)
	res = f.Do(t, "POST", f.hsURL+"/preview", fmt.Sprintf(`{"subscriber_id":%q}`, bare))
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, "skip", res.JSON["action"])
	assert.Equal(t, "missing_key", res.JSON["reason"])
	reasons := map[string]any{}
	for _, v := range res.JSON["fields"].([]any) {
		reasons[v.(map[string]any)["target"].(string)] = v.(map[string]any)["reason"]
	}
	assert.Equal(t, "missing_value", reasons["bot_conversations"])
	assert.Equal(t, "no_translation", reasons["lifecyclestage"])
	assert.Nil(t, reasons["bot_subscribed"], "a label the subscriber lacks is false")

	// No subscriber: the sample, with a value of every mapped kind, and no CRM read.
	calls := f.hs.Requests()
	res = f.Do(t, "POST", f.hsURL+"/preview", nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, true, res.JSON["sample"])
	assert.Equal(t, "create", res.JSON["action"])
	assert.Equal(t, float64(42), res.JSON["properties"].(map[string]any)["bot_conversations"])
	assert.Equal(t, calls, f.hs.Requests())

	// Other bots' and accounts' subscribers are not found; nothing was written to the CRM.
	f.catalog(t, f.otherBot)
	foreign := f.subscriber(t, f.otherBot, "333", map[string]any{"email": "eve@example.com"}, false)
	res = f.Do(t, "POST", f.hsURL+"/preview", fmt.Sprintf(`{"subscriber_id":%q}`, foreign))
	assert.Equal(t, http.StatusNotFound, res.Code, res.Body)
	res = f.Do(t, "POST", f.hsURL+"/preview", `{"subscriber_id":"sub_nope"}`)
	assert.Equal(t, http.StatusNotFound, res.Code, res.Body)
	res = f.Do(t, "POST", "/api/bots/bot_00000000000000000000000000/crm/connections/"+f.hsID+"/preview", fmt.Sprintf(`{"subscriber_id":%q}`, sub))
	assert.Equal(t, http.StatusNotFound, res.Code, res.Body)
	assert.Equal(t, writes+1, f.hs.Count("contacts"), "only the test's own record")
	assert.Empty(t, f.hs.Notes())

	// A connection without a mapping has nothing to preview.
	res = f.Do(t, "POST", f.pdURL+"/preview", nil)
	assert.Equal(t, http.StatusNotFound, res.Code)
}

// Pipedrive: a label to an enum by option id, a number to a double, the record found by
// the email Pipedrive keeps as a list.
func TestPreviewPipedrive(t *testing.T) {
	t.Parallel()
	f := newMappingFixture(t)
	f.catalog(t, f.bot)
	body := fmt.Sprintf(`{"object":"persons","key":"email","fields":[
		{"source":"subscriber:name","target":"name","direction":"push"},
		{"source":"label:Customer","target":%q,"direction":"push","values":{"true":"31","false":"32"}},
		{"source":"field:orders","target":%q,"direction":"push"},
		{"source":"subscriber:channel","target":%q,"direction":"push"}],
		"deal":{"pipeline":"1","stage":"2"}}`, pipedrivefake.KeySubscribed, pipedrivefake.KeyConversations, pipedrivefake.KeyChannel)
	res := f.Do(t, "PUT", f.pdURL+"/mapping", body)
	require.Equal(t, http.StatusCreated, res.Code, res.Body)
	bad := strings.Replace(body, `"31"`, `"99"`, 1)
	res = f.Do(t, "PUT", f.pdURL+"/mapping", `{"expected_revision":1,`+strings.TrimPrefix(strings.TrimSpace(bad), "{"))
	assert.Equal(t, "invalid_mapping", res.Problem())
	assert.Contains(t, res.Body, "fields[1].values.true")

	sub := f.subscriber(t, f.bot, "111", map[string]any{"email": "ann@example.com", "orders": 7}, true)
	res = f.Do(t, "POST", f.pdURL+"/preview", fmt.Sprintf(`{"subscriber_id":%q}`, sub))
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, "create", res.JSON["action"])
	assert.Equal(t, map[string]any{"name": "Ann Lee", pipedrivefake.KeySubscribed: "31", pipedrivefake.KeyConversations: float64(7),
		pipedrivefake.KeyChannel: "telegram"}, res.JSON["properties"])

	id := f.pd.Create("persons", map[string]any{"name": "Ann Lee", "email": "ann@example.com", pipedrivefake.KeySubscribed: 32,
		pipedrivefake.KeyConversations: 7, pipedrivefake.KeyChannel: "telegram"})
	res = f.Do(t, "POST", f.pdURL+"/preview", fmt.Sprintf(`{"subscriber_id":%q}`, sub))
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, "update", res.JSON["action"])
	assert.Equal(t, fmt.Sprint(id), res.JSON["record_id"])
	for _, v := range res.JSON["fields"].([]any) {
		pf := v.(map[string]any)
		assert.Equal(t, pf["target"] == pipedrivefake.KeySubscribed, pf["changed"], pf)
	}
}

// Reads need crm:read, the mapping's PUT and the preview crm:write; all need Reactions.
func TestMappingAccess(t *testing.T) {
	t.Parallel()
	f := newMappingFixture(t)
	f.catalog(t, f.bot)
	reader := f.PAT(t, f.Owner, "crm:read")
	for _, path := range []string{"/objects", "/objects/contacts/fields", "/pipelines", "/mapping/revisions"} {
		res := f.DoAs(t, reader, "GET", f.hsURL+path, nil)
		assert.Equal(t, http.StatusOK, res.Code, path+res.Body)
	}
	res := f.DoAs(t, reader, "PUT", f.hsURL+"/mapping", hubspotMapping)
	assert.Equal(t, http.StatusForbidden, res.Code)
	assert.Equal(t, "insufficient_scope", res.Problem())
	res = f.DoAs(t, reader, "POST", f.hsURL+"/preview", nil)
	assert.Equal(t, "insufficient_scope", res.Problem())
	res = f.DoAs(t, f.PAT(t, f.Owner, "integrations:*"), "GET", f.hsURL+"/objects", nil)
	assert.Equal(t, "insufficient_scope", res.Problem())
	analyst, err := f.Auth.CreateUser(t.Context(), f.Account.ID, "analyst", auth.RightsOf(auth.RightAnalytics))
	require.NoError(t, err)
	res = f.DoAs(t, f.PAT(t, analyst, "crm:*"), "GET", f.hsURL+"/mapping", nil)
	assert.Equal(t, "missing_right", res.Problem())

	// A service without a subscriber reader answers 503 for what needs one.
	f.svc.subscribers = nil
	res = f.Do(t, "PUT", f.hsURL+"/mapping", hubspotMapping)
	assert.Equal(t, http.StatusServiceUnavailable, res.Code)
	assert.Equal(t, "subscribers_unavailable", res.Problem())
}
