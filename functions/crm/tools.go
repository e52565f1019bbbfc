package crm

import (
	"context"
	"errors"
	"math"
	"net/url"
	"strconv"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/mcptool"
)

// connectionsRoute is the REST path of a bot's connections, as the routes declare it.
const connectionsRoute = "/api/bots/{botID}/crm/connections"

// Tools are the CRM family's MCP tools (issue 14, item 5): the reads of a bot's CRM
// connections, of a connection's discovered fields and pipelines, of its mapping, of its
// sync jobs and of its conflicts. Each mirrors its REST route, with the read routes' access
// (crm:read, the Reactions right, the crm plan feature) and answer, through the same
// Service methods; none changes anything (the discovery cache aside, which the routes fill
// too), so none is audited.
func Tools(svc *Service, cursors *httpapi.Cursors) []mcptool.Tool {
	read := httpapi.Need("crm:read", auth.RightReactions).InPlan(auth.FeatureCRM)
	return []mcptool.Tool{
		mcptool.New("list_crm_connections", "List a bot's CRM connections, newest first: each one's id (crm_...), provider "+
			"(hubspot, salesforce, pipedrive, dynamics), auth, status (active, or reconnect_required when the CRM refused "+
			"its credentials), the CRM account it acts as, and revision. Never a credential.",
			read, func(ctx context.Context, in listConnectionsArgs) (any, error) {
				path := "/api/bots/" + url.PathEscape(in.BotID) + "/crm/connections"
				return mcptool.List(ctx, cursors, path, nil, in.Page, func(limit int, cursor string) ([]Connection, string, error) {
					return svc.List(ctx, in.BotID, limit, cursor)
				})
			}).Mirroring("GET " + connectionsRoute),
		mcptool.New("get_crm_fields", "Get the fields of one object of a CRM connection (HubSpot contacts, Salesforce "+
			"Contact, Pipedrive persons, a Dataverse entity set...): each field's API name (what a mapping's target names), "+
			"label, normalized type (string, number, bool, date, datetime, enum, email, phone), an enum's options, read_only "+
			"and required. Answers {data, fetched_at}: the whole set, served from a 10-minute cache unless refresh is true. "+
			"An object the CRM does not have is 404 not_found; a CRM that refuses the connection's credentials is 422 "+
			"crm_credentials_rejected (the connection is then reconnect_required); a CRM that is down or rate limiting is "+
			"503 provider_unavailable (retry_after_seconds when it said how long to wait).",
			read, func(ctx context.Context, in fieldsArgs) (any, error) {
				d, err := svc.Fields(ctx, in.BotID, in.ConnectionID, in.Object, refresh(in.Refresh))
				return d, withRetryAfter(err)
			}).Mirroring("GET " + connectionsRoute + "/{connectionID}/objects/{object}/fields"),
		mcptool.New("list_crm_pipelines", "List the deal pipelines of a CRM connection with their stages, in the CRM's "+
			"order: each pipeline's id, label and stages (id, label), which a mapping's deal names. Answers {data, "+
			"fetched_at}: the whole set, served from a 10-minute cache unless refresh is true. The CRM's refusals are "+
			"answered as by get_crm_fields.",
			read, func(ctx context.Context, in pipelinesArgs) (any, error) {
				d, err := svc.Pipelines(ctx, in.BotID, in.ConnectionID, refresh(in.Refresh))
				return d, withRetryAfter(err)
			}).Mirroring("GET " + connectionsRoute + "/{connectionID}/pipelines"),
		mcptool.New("get_crm_mapping", "Get the mapping of a CRM connection: the CRM object subscribers become, the key "+
			"field records are matched by and its subscriber source, the mapped fields (source, target CRM field, direction "+
			"push, pull or both, value translations) and the deal of new records, with its revision, saved_at and saved_by. "+
			"Without revision, the current mapping (404 not_found when the connection has none); with revision, that saved "+
			"revision (404 not_found for one never saved).",
			read, func(ctx context.Context, in mappingArgs) (any, error) {
				if in.Revision == nil {
					return svc.Mapping(ctx, in.BotID, in.ConnectionID)
				}
				return svc.Revision(ctx, in.BotID, in.ConnectionID, strconv.FormatInt(*in.Revision, 10))
			}).Mirroring("GET " + connectionsRoute + "/{connectionID}/mapping"),
		mcptool.New("list_crm_jobs", "List the sync jobs of a CRM connection, newest first, or read one with job_id: each "+
			"job's id (job_...), kind (initial_sync, reconcile), status (queued, running, succeeded, failed, cancelled), "+
			"phase (a reconcile's pull or push), the mapping revision it syncs with, progress (processed, written, unchanged, "+
			"skipped, failed, pulled, conflicts), errors_recorded, the failure's code and message, and its times. With "+
			"job_id and errors true, the job's per-record errors instead (subscriber, record, code, the CRM's status and "+
			"code), paged.",
			read, func(ctx context.Context, in jobsArgs) (any, error) {
				base := "/api/bots/" + url.PathEscape(in.BotID) + "/crm/connections/" + url.PathEscape(in.ConnectionID) + "/jobs"
				switch {
				case in.JobID == "":
					return mcptool.List(ctx, cursors, base, nil, in.Page, func(limit int, cursor string) ([]Job, string, error) {
						return svc.Jobs(ctx, in.BotID, in.ConnectionID, limit, cursor)
					})
				case in.Errors:
					return mcptool.List(ctx, cursors, base+"/"+url.PathEscape(in.JobID)+"/errors", nil, in.Page,
						func(limit int, cursor string) ([]JobError, string, error) {
							return svc.JobErrors(ctx, in.BotID, in.ConnectionID, in.JobID, limit, cursor)
						})
				}
				return svc.GetJob(ctx, in.BotID, in.ConnectionID, in.JobID)
			}).Mirroring("GET " + connectionsRoute + "/{connectionID}/jobs"),
		mcptool.New("list_crm_conflicts", "List the conflicts of a CRM connection, oldest first, or read one with "+
			"conflict_id: a field both the subscriber and the CRM record changed since their last sync. Each has the "+
			"subscriber, the record, the source and target, both values and the value they last agreed on, status (open, "+
			"resolved), the resolution and revision. status narrows the list (a page may then come back short, with a "+
			"cursor). Resolving is REST only (POST .../conflicts/{id}/resolve).",
			read, func(ctx context.Context, in conflictsArgs) (any, error) {
				if in.ConflictID != "" {
					return svc.Conflict(ctx, in.BotID, in.ConnectionID, in.ConflictID)
				}
				path := "/api/bots/" + url.PathEscape(in.BotID) + "/crm/connections/" + url.PathEscape(in.ConnectionID) + "/conflicts"
				var q url.Values
				if in.Status != "" {
					q = url.Values{"status": {in.Status}}
				}
				return mcptool.List(ctx, cursors, path, q, in.Page, func(limit int, cursor string) ([]Conflict, string, error) {
					return svc.Conflicts(ctx, in.BotID, in.ConnectionID, in.Status, limit, cursor)
				})
			}).Mirroring("GET " + connectionsRoute + "/{connectionID}/conflicts"),
	}
}

type jobsArgs struct {
	mcptool.Bot
	mcptool.Page
	ConnectionID string `json:"connection_id" jsonschema:"the connection's id (crm_...), as list_crm_connections returns it"`
	JobID        string `json:"job_id,omitempty" jsonschema:"one job (job_...) to read instead of the list"`
	Errors       bool   `json:"errors,omitempty" jsonschema:"with job_id: list the job's per-record errors instead of the job"`
}

// Validate requires the connection, and a job for its errors.
func (a *jobsArgs) Validate() error {
	var p httpapi.Problems
	requireConnection(&p, a.ConnectionID)
	if a.Errors && a.JobID == "" {
		p.Add("errors", "needs job_id: the job whose errors to list")
	}
	return p.Err()
}

type conflictsArgs struct {
	mcptool.Bot
	mcptool.Page
	ConnectionID string `json:"connection_id" jsonschema:"the connection's id (crm_...), as list_crm_connections returns it"`
	ConflictID   string `json:"conflict_id,omitempty" jsonschema:"one conflict (cfl_...) to read instead of the list"`
	Status       string `json:"status,omitempty" jsonschema:"open or resolved; absent: both"`
}

// Validate requires the connection and a known status.
func (a *conflictsArgs) Validate() error {
	var p httpapi.Problems
	requireConnection(&p, a.ConnectionID)
	if a.Status != "" && a.Status != ConflictOpen && a.Status != ConflictResolved {
		p.Add("status", "must be open or resolved")
	}
	return p.Err()
}

// withRetryAfter gives a problem that knows how long the CRM asked to wait the wait as
// retry_after_seconds: a tool's answer has no Retry-After header, which the route sets.
func withRetryAfter(err error) error {
	var d *delayed
	if !errors.As(err, &d) || d.after <= 0 {
		return err
	}
	return d.problem.With("retry_after_seconds", int64(math.Ceil(d.after.Seconds())))
}

type listConnectionsArgs struct {
	mcptool.Bot
	mcptool.Page
}

// requireConnection adds the problem of a missing connection_id.
func requireConnection(p *httpapi.Problems, id string) {
	p.Require("connection_id", id)
}

// refresh is an optional refresh argument's value: absent asks nothing afresh, as the
// routes without ?refresh.
func refresh(b *bool) bool { return b != nil && *b }

type fieldsArgs struct {
	mcptool.Bot
	ConnectionID string `json:"connection_id" jsonschema:"the connection's id (crm_...), as list_crm_connections returns it"`
	Object       string `json:"object" jsonschema:"the CRM object's API name (contacts, Contact, persons, a Dataverse entity set...), as the CRM names it"`
	Refresh      *bool  `json:"refresh,omitempty" jsonschema:"ask the CRM now instead of answering from the 10-minute cache (default false); each refresh is a call against the customer's CRM quota"`
}

// Validate requires the connection and the object.
func (a *fieldsArgs) Validate() error {
	var p httpapi.Problems
	requireConnection(&p, a.ConnectionID)
	p.Require("object", a.Object)
	return p.Err()
}

type pipelinesArgs struct {
	mcptool.Bot
	ConnectionID string `json:"connection_id" jsonschema:"the connection's id (crm_...), as list_crm_connections returns it"`
	Refresh      *bool  `json:"refresh,omitempty" jsonschema:"ask the CRM now instead of answering from the 10-minute cache (default false); each refresh is a call against the customer's CRM quota"`
}

// Validate requires the connection.
func (a *pipelinesArgs) Validate() error {
	var p httpapi.Problems
	requireConnection(&p, a.ConnectionID)
	return p.Err()
}

type mappingArgs struct {
	mcptool.Bot
	ConnectionID string `json:"connection_id" jsonschema:"the connection's id (crm_...), as list_crm_connections returns it"`
	Revision     *int64 `json:"revision,omitempty" jsonschema:"a saved revision of the mapping (1 and up); absent: the current mapping"`
}

// Validate requires the connection, and a revision of 1 or more when one is given.
func (a *mappingArgs) Validate() error {
	var p httpapi.Problems
	requireConnection(&p, a.ConnectionID)
	if a.Revision != nil && *a.Revision < 1 {
		p.Add("revision", "must be 1 or more")
	}
	return p.Err()
}
