// Package wiring composes the playbooks family with the families an install creates
// through, in process: the subscribers family's labels and fields, the content family's
// documents (created and published, as its wiring builds that service), the popups family's
// popups, the collections family's collections, the reactions family's reactions (created
// and published, as every process builds that service) and the channels family's connected
// channels (read from the store alone). Families never import each other; these adapters
// are where they meet.
package wiring

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/botplatform/api/functions/channels"
	"github.com/botplatform/api/functions/collections"
	"github.com/botplatform/api/functions/content"
	contentwiring "github.com/botplatform/api/functions/content/wiring"
	"github.com/botplatform/api/functions/playbooks"
	"github.com/botplatform/api/functions/playbooks/catalog"
	"github.com/botplatform/api/functions/popups"
	popupswiring "github.com/botplatform/api/functions/popups/wiring"
	"github.com/botplatform/api/functions/reactions"
	reactionswiring "github.com/botplatform/api/functions/reactions/wiring"
	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/store"
)

// Family is the playbooks family: the catalog, installs and their KPIs, the job that rolls
// back abandoned installs, and the MCP reads.
func Family() family.Family {
	return family.Family{Name: "playbooks", Build: func(env *family.Env) family.Parts {
		svc := Service(env, StuckAfterFromEnv(env, os.Getenv))
		return family.Parts{
			Routes: func(mux *httpapi.Mux) { playbooks.Routes(mux, svc, env.Cursors) },
			Jobs:   map[string]jobs.Step{playbooks.JobRecover: svc.RecoverStep},
			Purge:  playbooks.PurgeStep(env.Store),
			Tools:  playbooks.Tools(svc, env.Cursors),
		}
	}}
}

// EnvStuckAfter names the variable that sets playbooks.Config.StuckAfter (a Go duration,
// such as 90s): how long an installing install may be silent before it is rolled back.
const EnvStuckAfter = "PLAYBOOK_INSTALL_STUCK_AFTER"

// StuckAfterFromEnv reads EnvStuckAfter with getenv: 0 (the default) when unset, and when
// it is not a positive duration, which env's log reports.
func StuckAfterFromEnv(env *family.Env, getenv func(string) string) time.Duration {
	v := getenv(EnvStuckAfter)
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		env.Log.Warn("playbooks: "+EnvStuckAfter+" is not a positive duration; using the default", "value", v, "default", playbooks.DefaultStuckAfter)
		return 0
	}
	return d
}

// Service builds the playbooks service on env; stuckAfter is playbooks.Config.StuckAfter.
func Service(env *family.Env, stuckAfter time.Duration) *playbooks.Service {
	// Deleting a label, a field or a collection (a rollback) starts its family's purge job:
	// those kinds are registered in the processes that run jobs (the local process, the jobs
	// Lambda), not necessarily in this one, so they are sent unchecked (queueStarter).
	var starter jobs.Starter
	if env.Queue != nil {
		starter = queueStarter{env.Queue}
	}
	subs := subscribers.NewService(env.Store, env.Now, starter)
	return playbooks.New(playbooks.Config{
		Store:   env.Store,
		Catalog: catalog.Default(),
		Kinds: map[string]playbooks.Kind{
			catalog.KindLabel:   labels{subs},
			catalog.KindField:   fields{subs},
			catalog.KindContent: contentKind{contentwiring.New(env)},
			// Popups created here are never shown by this process: no limiter, no writer
			// (the popups family's public routes take the events).
			catalog.KindPopup:      popupKind{popups.NewService(env.Store, popupswiring.Fields{Subs: subs}, nil, nil, env.Now, env.Log)},
			catalog.KindCollection: collectionKind{collections.NewService(env.Store, starter, env.Now, env.Log)},
			catalog.KindReaction:   reactionKind{reactionswiring.Service(env)},
		},
		Channels:   botChannels{env.Store},
		Bots:       env.Tenancy,
		Events:     env.Events,
		Jobs:       starter,
		StuckAfter: stuckAfter,
		Now:        env.Now,
		Log:        env.Log,
	})
}

// queueStarter starts jobs by sending their first step to the queue, whichever process's
// registry knows the kind.
type queueStarter struct{ q queue.Sender }

func (s queueStarter) Start(ctx context.Context, kind string, payload any) error {
	return s.StartAfter(ctx, 0, kind, payload)
}

func (s queueStarter) StartAfter(ctx context.Context, delay time.Duration, kind string, payload any) error {
	m, err := jobs.StartMessage(min(max(delay, 0), queue.MaxScheduledDelay), kind, payload)
	if err != nil {
		return err
	}
	return s.q.Send(ctx, m)
}

func notFound(err error) bool { return httpapi.KindOf(err) == httpapi.KindNotFound }

func gone(err error) error {
	if notFound(err) {
		return playbooks.ErrGone
	}
	return err
}

// labels are the subscribers family's labels.
type labels struct{ svc *subscribers.Service }

func labelView(l subscribers.Label) playbooks.Existing {
	return playbooks.Existing{ID: l.ID, Name: l.Name, CreatedAt: l.CreatedAt, Fingerprint: playbooks.Fingerprint(map[string]any{"name": l.Name})}
}

func (k labels) List(ctx context.Context, bot string) ([]playbooks.Existing, error) {
	list, err := k.svc.Labels(ctx, bot)
	if err != nil {
		return nil, err
	}
	out := make([]playbooks.Existing, len(list))
	for i, l := range list {
		out[i] = labelView(l)
	}
	return out, nil
}

func (k labels) Get(ctx context.Context, bot, id string) (playbooks.Existing, error) {
	l, err := k.svc.GetLabel(ctx, bot, id)
	if err != nil {
		return playbooks.Existing{}, gone(err)
	}
	return labelView(l), nil
}

func (k labels) Create(ctx context.Context, bot string, spec json.RawMessage) (playbooks.Existing, error) {
	var body struct {
		Name string `json:"name"`
	}
	if err := httpapi.DecodeJSON(spec, &body, ""); err != nil {
		return playbooks.Existing{}, err
	}
	l, err := k.svc.CreateLabel(ctx, bot, body.Name)
	if err != nil {
		return playbooks.Existing{}, err
	}
	return labelView(l), nil
}

func (labels) Update(context.Context, string, string, json.RawMessage) (playbooks.Existing, error) {
	return playbooks.Existing{}, playbooks.ErrUnsupported
}

func (k labels) Delete(ctx context.Context, bot, id string) error {
	if err := k.svc.DeleteLabel(ctx, bot, id, nil); err != nil && !notFound(err) {
		return err
	}
	return nil
}

// fields are the subscribers family's custom fields.
type fields struct{ svc *subscribers.Service }

func fieldView(f subscribers.Field) playbooks.Existing {
	return playbooks.Existing{ID: f.ID, Name: f.Name, CreatedAt: f.CreatedAt,
		Fingerprint: playbooks.Fingerprint(map[string]any{"name": f.Name, "type": f.Type})}
}

func (k fields) List(ctx context.Context, bot string) ([]playbooks.Existing, error) {
	list, err := k.svc.Fields(ctx, bot)
	if err != nil {
		return nil, err
	}
	out := make([]playbooks.Existing, len(list))
	for i, f := range list {
		out[i] = fieldView(f)
	}
	return out, nil
}

func (k fields) Get(ctx context.Context, bot, id string) (playbooks.Existing, error) {
	f, err := k.svc.GetField(ctx, bot, id)
	if err != nil {
		return playbooks.Existing{}, gone(err)
	}
	return fieldView(f), nil
}

func (k fields) Create(ctx context.Context, bot string, spec json.RawMessage) (playbooks.Existing, error) {
	var body subscribers.FieldSpec
	if err := httpapi.DecodeJSON(spec, &body, ""); err != nil {
		return playbooks.Existing{}, err
	}
	f, err := k.svc.CreateField(ctx, bot, body)
	if err != nil {
		return playbooks.Existing{}, err
	}
	return fieldView(f), nil
}

func (fields) Update(context.Context, string, string, json.RawMessage) (playbooks.Existing, error) {
	return playbooks.Existing{}, playbooks.ErrUnsupported
}

func (k fields) Delete(ctx context.Context, bot, id string) error {
	if err := k.svc.DeleteField(ctx, bot, id); err != nil && !notFound(err) {
		return err
	}
	return nil
}

// collectionKind is the collections family's collections.
type collectionKind struct{ svc *collections.Service }

func collectionView(c collections.Collection) playbooks.Existing {
	return playbooks.Existing{ID: c.ID, Name: c.Name, CreatedAt: c.CreatedAt,
		Fingerprint: playbooks.Fingerprint(map[string]any{"name": c.Name, "fields": c.Fields})}
}

func (k collectionKind) List(ctx context.Context, bot string) ([]playbooks.Existing, error) {
	var out []playbooks.Existing
	for cursor := ""; ; {
		page, next, err := k.svc.ListCollections(ctx, bot, 200, cursor)
		if err != nil {
			return nil, err
		}
		for _, c := range page {
			out = append(out, collectionView(c))
		}
		if next == "" {
			return out, nil
		}
		cursor = next
	}
}

func (k collectionKind) Get(ctx context.Context, bot, id string) (playbooks.Existing, error) {
	c, err := k.svc.GetCollection(ctx, bot, id)
	if err != nil {
		return playbooks.Existing{}, gone(err)
	}
	return collectionView(c), nil
}

func (k collectionKind) Create(ctx context.Context, bot string, spec json.RawMessage) (playbooks.Existing, error) {
	var body struct {
		Name   string                   `json:"name"`
		Fields []collections.FieldInput `json:"fields"`
	}
	if err := httpapi.DecodeJSON(spec, &body, ""); err != nil {
		return playbooks.Existing{}, err
	}
	c, err := k.svc.CreateCollection(ctx, bot, body.Name, body.Fields)
	if err != nil {
		return playbooks.Existing{}, err
	}
	return collectionView(c), nil
}

func (collectionKind) Update(context.Context, string, string, json.RawMessage) (playbooks.Existing, error) {
	return playbooks.Existing{}, playbooks.ErrUnsupported
}

// Delete never forces: a collection that has records holds the customer's data, and a
// rollback only ever deletes one it has just made.
func (k collectionKind) Delete(ctx context.Context, bot, id string) error {
	if err := k.svc.DeleteCollection(ctx, bot, id, nil, false); err != nil && !notFound(err) {
		return err
	}
	return nil
}

// contentKind is the content family's documents: created and published, so that a broadcast
// can send one as soon as the playbook is installed. The family never deletes a document
// (sends refer to published versions), so a rollback archives it: out of the bot's
// documents, unsendable, and no longer a name conflict.
type contentKind struct{ svc *content.Service }

// contentView fingerprints what the customer edits: the name and the draft.
func contentView(d content.Document) playbooks.Existing {
	return playbooks.Existing{ID: d.ID, Name: d.Name, CreatedAt: d.CreatedAt,
		Fingerprint: playbooks.Fingerprint(map[string]any{"name": d.Name, "type": d.Type, "draft": d.Draft})}
}

func (k contentKind) List(ctx context.Context, bot string) ([]playbooks.Existing, error) {
	var out []playbooks.Existing
	for cursor := ""; ; {
		page, next, err := k.svc.List(ctx, bot, content.Filter{}, 200, cursor)
		if err != nil {
			return nil, err
		}
		for _, d := range page {
			out = append(out, playbooks.Existing{ID: d.ID, Name: d.Name, CreatedAt: d.CreatedAt})
		}
		if next == "" {
			return out, nil
		}
		cursor = next
	}
}

// Get takes an archived document for gone: archiving is how a customer removes one.
func (k contentKind) Get(ctx context.Context, bot, id string) (playbooks.Existing, error) {
	d, err := k.svc.Get(ctx, bot, id)
	if err != nil {
		return playbooks.Existing{}, gone(err)
	}
	if d.Archived {
		return playbooks.Existing{}, playbooks.ErrGone
	}
	return contentView(d), nil
}

func (k contentKind) Create(ctx context.Context, bot string, spec json.RawMessage) (playbooks.Existing, error) {
	var body content.NewDocument
	if err := httpapi.DecodeJSON(spec, &body, ""); err != nil {
		return playbooks.Existing{}, err
	}
	d, err := k.svc.Create(ctx, bot, body)
	if err != nil {
		return playbooks.Existing{}, err
	}
	pub, err := k.svc.Publish(ctx, bot, d.ID, d.Revision)
	if err != nil {
		// A document that does not publish is not what the playbook promised: it goes.
		if aerr := k.archive(context.WithoutCancel(ctx), bot, d.ID); aerr != nil {
			err = errors.Join(err, aerr)
		}
		return playbooks.Existing{}, err
	}
	return contentView(pub), nil
}

func (contentKind) Update(context.Context, string, string, json.RawMessage) (playbooks.Existing, error) {
	return playbooks.Existing{}, playbooks.ErrUnsupported
}

func (k contentKind) Delete(ctx context.Context, bot, id string) error {
	return k.archive(ctx, bot, id)
}

// archive archives the document at its current revision, reading it again when another
// change came first; a missing or archived document is done.
func (k contentKind) archive(ctx context.Context, bot, id string) error {
	const attempts = 4
	for range attempts {
		d, err := k.svc.Get(ctx, bot, id)
		if notFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if d.Archived {
			return nil
		}
		_, err = k.svc.Archive(ctx, bot, id, d.Revision)
		var he *httpapi.Error
		if errors.As(err, &he) && (he.Code == "stale_revision" || he.Code == "document_archived") {
			continue // changed or archived meanwhile: look again
		}
		return err
	}
	return fmt.Errorf("archive content document %s: it keeps changing: %w", id, store.ErrUnavailable)
}

// popupKind is the popups family's popups. The catalog's are created paused (their bodies
// say so): the customer switches a popup on once it suits their website.
type popupKind struct{ svc *popups.Service }

// popupView fingerprints the popup as the customer edits it, its status aside: switching
// the popup on or off is using it, not editing it.
func popupView(p popups.Popup) playbooks.Existing {
	return playbooks.Existing{ID: p.ID, Name: p.Name, CreatedAt: p.CreatedAt,
		Fingerprint: playbooks.Fingerprint(map[string]any{"name": p.Name, "content": p.Content, "targeting": p.Targeting,
			"frequency": p.Frequency, "schedule": p.Schedule, "experiment": p.Experiment, "allowed_origins": p.AllowedOrigins})}
}

func (k popupKind) List(ctx context.Context, bot string) ([]playbooks.Existing, error) {
	var out []playbooks.Existing
	for cursor := ""; ; {
		page, next, err := k.svc.List(ctx, bot, "", 200, cursor)
		if err != nil {
			return nil, err
		}
		for _, p := range page {
			out = append(out, playbooks.Existing{ID: p.ID, Name: p.Name, CreatedAt: p.CreatedAt})
		}
		if next == "" {
			return out, nil
		}
		cursor = next
	}
}

func (k popupKind) Get(ctx context.Context, bot, id string) (playbooks.Existing, error) {
	p, err := k.svc.Get(ctx, bot, id)
	if err != nil {
		return playbooks.Existing{}, gone(err)
	}
	return popupView(p), nil
}

func (k popupKind) Create(ctx context.Context, bot string, spec json.RawMessage) (playbooks.Existing, error) {
	var d popups.Definition
	if err := httpapi.DecodeJSON(spec, &d, ""); err != nil {
		return playbooks.Existing{}, err
	}
	p, err := k.svc.Create(ctx, bot, d)
	if err != nil {
		return playbooks.Existing{}, err
	}
	return popupView(p), nil
}

func (popupKind) Update(context.Context, string, string, json.RawMessage) (playbooks.Existing, error) {
	return playbooks.Existing{}, playbooks.ErrUnsupported
}

func (k popupKind) Delete(ctx context.Context, bot, id string) error {
	if err := k.svc.Delete(ctx, bot, id, nil); err != nil && !notFound(err) {
		return err
	}
	return nil
}

// reactionKind is the reactions family's reactions: created and published, so that the
// customer has a working bot once the install is done.
type reactionKind struct{ svc *reactions.Service }

func reactionView(r reactions.Reaction) playbooks.Existing {
	return playbooks.Existing{ID: r.ID, Name: r.Name, CreatedAt: r.CreatedAt, Fingerprint: playbooks.Fingerprint(r.Content)}
}

func (k reactionKind) List(ctx context.Context, bot string) ([]playbooks.Existing, error) {
	var out []playbooks.Existing
	for cursor := ""; ; {
		page, next, err := k.svc.List(ctx, bot, reactions.Filter{}, 200, cursor)
		if err != nil {
			return nil, err
		}
		for _, r := range page {
			out = append(out, playbooks.Existing{ID: r.ID, Name: r.Name, CreatedAt: r.CreatedAt})
		}
		if next == "" {
			return out, nil
		}
		cursor = next
	}
}

func (k reactionKind) Get(ctx context.Context, bot, id string) (playbooks.Existing, error) {
	r, err := k.svc.Get(ctx, bot, id)
	if err != nil {
		return playbooks.Existing{}, gone(err)
	}
	return reactionView(r), nil
}

func decodeContent(spec json.RawMessage) (reactions.Content, error) {
	var c reactions.Content
	err := httpapi.DecodeJSON(spec, &c, "")
	return c, err
}

func (k reactionKind) Create(ctx context.Context, bot string, spec json.RawMessage) (playbooks.Existing, error) {
	c, err := decodeContent(spec)
	if err != nil {
		return playbooks.Existing{}, err
	}
	r, err := k.svc.Create(ctx, bot, c)
	if err != nil {
		return playbooks.Existing{}, err
	}
	pub, err := k.svc.Publish(ctx, bot, r.ID, r.Revision)
	if err != nil {
		// A draft that does not publish is not what the playbook promised: it goes.
		if derr := k.svc.Delete(context.WithoutCancel(ctx), bot, r.ID, nil); derr != nil {
			err = errors.Join(err, derr)
		}
		return playbooks.Existing{}, err
	}
	return reactionView(pub), nil
}

func (k reactionKind) Update(ctx context.Context, bot, id string, spec json.RawMessage) (playbooks.Existing, error) {
	c, err := decodeContent(spec)
	if err != nil {
		return playbooks.Existing{}, err
	}
	cur, err := k.svc.Get(ctx, bot, id)
	if err != nil {
		return playbooks.Existing{}, err
	}
	r, err := k.svc.Update(ctx, bot, id, cur.Revision, reactions.Patch{Name: &c.Name, Trigger: &c.Trigger, Steps: &c.Steps})
	if err != nil {
		return playbooks.Existing{}, err
	}
	if r.HasUnpublishedChanges {
		if r, err = k.svc.Publish(ctx, bot, id, r.Revision); err != nil {
			return playbooks.Existing{}, err
		}
	}
	return reactionView(r), nil
}

func (k reactionKind) Delete(ctx context.Context, bot, id string) error {
	if err := k.svc.Delete(ctx, bot, id, nil); err != nil && !notFound(err) {
		return err
	}
	return nil
}

// botChannels reads the kinds of the bot's connected channels from the store alone.
type botChannels struct{ store store.Store }

func (b botChannels) Kinds(ctx context.Context, bot string) ([]string, error) {
	list, err := channels.BotChannels(ctx, b.store, bot)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(list))
	for i, c := range list {
		out[i] = string(c.Type)
	}
	return out, nil
}
