package playbooks

import (
	"context"
	"net/url"

	"github.com/botplatform/api/functions/playbooks/catalog"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/mcptool"
)

// Tools are the playbooks family's MCP tools: the reads of the catalog, of installs and of
// an install's KPIs, each the MCP form of its route with the route's access and answer. An
// install names its bot only once loaded, so the tools take no bot_id (the kernel checks
// the scope and the rollout) and the service checks the rights on the install's bot, as the
// routes do. Installing, upgrading and answering are left to the REST routes.
func Tools(svc *Service, cursors *httpapi.Cursors) []mcptool.Tool {
	return []mcptool.Tool{
		mcptool.New("list_playbooks", "List the playbook catalog: vertical templates (abandoned cart, appointment "+
			"booking, lead qualification, support triage) at their newest version, each with its questions, what it "+
			"installs (labels, fields, collections, reactions) and its KPIs. Optionally of one vertical.",
			readAccess, func(_ context.Context, in catalogArgs) (any, error) {
				return httpapi.List[catalog.Playbook]{Data: svc.Catalog(in.Vertical)}, nil
			}).Mirroring("GET " + catalogPath),
		mcptool.New("get_playbook", "Get one playbook of the catalog by id, at its newest version or at version.",
			readAccess, func(_ context.Context, in playbookArgs) (any, error) {
				return svc.Playbook(in.PlaybookID, in.Version)
			}).Mirroring("GET " + playbookPath),
		mcptool.New("list_playbook_installs", "List playbook installs (pbi_...), oldest first: of one bot (bot_id), or "+
			"of every bot of the account. Each has its status (setup, installing, installed, failed), answers, questions, "+
			"the resources it created and the last error.",
			readAccess, func(ctx context.Context, in listArgs) (any, error) {
				q := url.Values{}
				if in.BotID != "" {
					q.Set("bot_id", in.BotID)
				}
				return mcptool.List(ctx, cursors, installsPath, q, in.Page, func(limit int, cursor string) ([]Install, string, error) {
					return svc.List(ctx, mcptool.Caller(ctx), in.BotID, limit, cursor)
				})
			}).Mirroring("GET " + installsPath),
		mcptool.New("get_playbook_install", "Get one playbook install (pbi_...) as list_playbook_installs shows it.",
			readAccess, func(ctx context.Context, in installArgs) (any, error) {
				return svc.Get(ctx, mcptool.Caller(ctx), in.InstallID)
			}).Mirroring("GET " + installPath),
		mcptool.New("get_playbook_kpis", "Read an installed playbook's KPIs over a range (from, to: RFC 3339 times or "+
			"dates; default the last 30 days, at most 366): each KPI's total and daily series, counted from the bot's "+
			"event log. Needs the Analytics right on the install's bot.",
			readAccess, func(ctx context.Context, in kpiArgs) (any, error) {
				from, to, err := ParseRange(svc.now(), in.From, in.To)
				if err != nil {
					return nil, err
				}
				return svc.KPIs(ctx, mcptool.Caller(ctx), in.InstallID, from, to)
			}).Mirroring("GET " + installPath + "/kpis"),
	}
}

type catalogArgs struct {
	Vertical string `json:"vertical,omitempty" jsonschema:"only playbooks of this vertical: ecommerce, services, b2b or support"`
}

type playbookArgs struct {
	PlaybookID string `json:"playbook_id" jsonschema:"the playbook's id (abandoned_cart, ...)"`
	Version    int    `json:"version,omitempty" jsonschema:"a catalog version (default the newest)"`
}

type listArgs struct {
	mcptool.Page
	BotID string `json:"bot_id,omitempty" jsonschema:"only the installs of this bot (bot_...)"`
}

type installArgs struct {
	InstallID string `json:"install_id" jsonschema:"the install's id (pbi_...)"`
}

type kpiArgs struct {
	InstallID string `json:"install_id" jsonschema:"the install's id (pbi_...)"`
	From      string `json:"from,omitempty" jsonschema:"start of the range: an RFC 3339 time or a date (default 30 days before to)"`
	To        string `json:"to,omitempty" jsonschema:"end of the range: an RFC 3339 time or a date, included (default now)"`
}
