// Package wiring composes the broadcasts family with the families it reads and sends
// through: content (the published messages), subscribers (the audience), segments and
// experiments (saved audiences), channels (the adapters and the bots' connections).
package wiring

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/botplatform/api/functions/broadcasts"
	"github.com/botplatform/api/functions/channels"
	"github.com/botplatform/api/functions/content"
	"github.com/botplatform/api/functions/experiments"
	"github.com/botplatform/api/functions/reactions"
	"github.com/botplatform/api/functions/runtime"
	"github.com/botplatform/api/functions/segments"
	segmentswiring "github.com/botplatform/api/functions/segments/wiring"
	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/mcptool"
	"github.com/botplatform/api/shared/merge"
	"github.com/botplatform/api/shared/outbox"
	"github.com/botplatform/api/shared/ratelimit"
	"github.com/botplatform/api/shared/store"
)

// Family is the broadcasts family: its routes, its send job and its MCP tools.
func Family() family.Family {
	return family.Family{Name: "broadcasts", Build: func(env *family.Env) family.Parts {
		cfg := ConfigFromEnv(os.Getenv)
		svc, err := New(env, cfg)
		if err != nil {
			env.Log.Warn("broadcasts unavailable", "error", err)
			return family.Parts{
				Routes: func(mux *httpapi.Mux) { broadcasts.Unavailable(mux, err.Error()) },
				Purge:  broadcasts.PurgeStep(env.Store),
				Tools:  toolsWithoutChannels(env, cfg, err),
			}
		}
		return family.Parts{
			Routes: func(mux *httpapi.Mux) { broadcasts.Routes(mux, svc, env.Cursors) },
			Jobs:   svc.Jobs(),
			Purge:  broadcasts.PurgeStep(env.Store),
			Tools:  broadcasts.Tools(svc, env.Cursors),
		}
	}}
}

// ConfigFromEnv reads the sending rates and the claim grace from the environment:
// BROADCAST_RATE_TELEGRAM, BROADCAST_RATE_WHATSAPP, BROADCAST_RATE_VK (messages a second),
// BROADCAST_CLAIM_GRACE and BROADCAST_STEP (Go durations). Unset means the default; a bad
// value is reported by New (through Validate) as a negative rate.
func ConfigFromEnv(getenv func(string) string) broadcasts.Config {
	cfg := broadcasts.Config{Rates: map[channel.Kind]float64{}}
	for _, k := range channel.Kinds() {
		if v := getenv("BROADCAST_RATE_" + strings.ToUpper(string(k))); v != "" {
			r, err := strconv.ParseFloat(v, 64)
			if err != nil {
				r = -1
			}
			cfg.Rates[k] = r
		}
	}
	if v := getenv("BROADCAST_CLAIM_GRACE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			d = -1
		}
		cfg.ClaimGrace = d
	}
	if v := getenv("BROADCAST_STEP"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			d = -1
		}
		cfg.StepDuration = d
	}
	return cfg
}

// New builds the broadcasts service on env.
func New(env *family.Env, cfg broadcasts.Config) (*broadcasts.Service, error) {
	chans := channels.FromEnv(env)
	if chans == nil {
		return nil, fmt.Errorf("no channels service in this process (no credentials key)")
	}
	return build(env, cfg, &contentAdapter{svc: content.NewService(env.Store, nil, nil, env.Now), chans: chans}, openers{chans})
}

// toolsWithoutChannels are the MCP tools of a process that holds no key to open channel
// credentials, as the MCP Lambda holds none (its grant on the credentials key, for the CRM
// read tools, is only under the CRM encryption context: family.Env.CRMSecrets): what they
// do (start a legacy broadcast, whose runs the runtime sends; pause, resume, cancel; reads)
// opens no channel and renders no content, so they run on a service whose channels and
// content fail closed (503) instead of the MCP Lambda being granted the key. why is why the
// service with channels was not built.
func toolsWithoutChannels(env *family.Env, cfg broadcasts.Config, why error) []mcptool.Tool {
	down := httpapi.Errorf(httpapi.KindUnavailable, "broadcasts_unavailable", "this process cannot open channels: %s", why)
	svc, err := build(env, cfg, noChannels{down}, noChannels{down})
	if err != nil {
		return broadcasts.UnavailableTools(err.Error())
	}
	return broadcasts.Tools(svc, env.Cursors)
}

// noChannels is the content and the channels of a process that cannot open channels: each
// use answers err.
type noChannels struct{ err error }

func (n noChannels) Open(context.Context, string, channel.Kind) (channel.Adapter, channel.Connection, error) {
	return nil, channel.Connection{}, n.err
}

func (n noChannels) Check(context.Context, string, string, channel.Kind) (int, error) {
	return 0, n.err
}

func (n noChannels) Render(context.Context, string, string, int, broadcasts.Person) (channel.Message, error) {
	return channel.Message{}, n.err
}

// build is the service on env with the content and channels given.
func build(env *family.Env, cfg broadcasts.Config, cont broadcasts.Content, chans broadcasts.Channels) (*broadcasts.Service, error) {
	cfg.PublicURL = env.PublicURL
	subs := subscribers.NewService(env.Store, env.Now, nil)
	return broadcasts.New(broadcasts.Deps{
		Store:     env.Store,
		Content:   cont,
		Audience:  audience{subs: subs, segs: segmentswiring.Service(env), exps: experiments.NewService(experiments.Deps{Store: env.Store, Now: env.Now})},
		Channels:  chans,
		Templates: templates{channels.NewCatalog(env.Store)},
		Outbox:    env.Outbox,
		Reactions: legacyRuns{rx: reactions.NewService(env.Store, nil, env.Now, env.Log), outbox: env.Outbox},
		Limiter:   ratelimit.New(env.Store, env.Now),
		Now:       env.Now,
		Log:       env.Log,
		Events:    env.Events,
		Links:     env.Links,
	}, cfg)
}

// openers opens a bot's channel of a type.
type openers struct{ svc *channels.Service }

func (o openers) Open(ctx context.Context, bot string, k channel.Kind) (channel.Adapter, channel.Connection, error) {
	r, err := o.svc.ResolveBot(ctx, bot, k)
	if httpapi.KindOf(err) == httpapi.KindNotFound {
		return nil, channel.Connection{}, broadcasts.ErrNoChannel
	}
	if err != nil {
		return nil, channel.Connection{}, err
	}
	a, ok := o.svc.Adapter(k)
	if !ok {
		return nil, channel.Connection{}, fmt.Errorf("broadcasts wiring: no %s adapter in this process", k)
	}
	return a, r.Conn, nil
}

// templates tells approved WhatsApp templates from the bot's template catalog.
type templates struct{ cat *channels.Catalog }

func (t templates) Approved(ctx context.Context, bot, name, language string) (bool, error) {
	_, list, ok, err := t.cat.BotTemplates(ctx, bot)
	if err != nil || !ok {
		return false, err
	}
	return slices.ContainsFunc(list, func(tp channels.Template) bool {
		return tp.Name == name && tp.Language == language && tp.Status == "approved"
	}), nil
}

// contentAdapter checks and renders published message documents, each version parsed once.
type contentAdapter struct {
	svc   *content.Service
	chans *channels.Service
	mu    sync.Mutex
	cache map[string]*content.MessageBody
}

const maxCached = 64

func (c *contentAdapter) body(ctx context.Context, bot, doc string, version int) (*content.MessageBody, int, error) {
	key := bot + "/" + doc + "/" + strconv.Itoa(version)
	c.mu.Lock()
	b := c.cache[key]
	c.mu.Unlock()
	if b != nil {
		return b, version, nil
	}
	t, v, err := c.svc.Published(ctx, bot, doc)
	if err != nil {
		return nil, 0, err
	}
	if t != content.TypeMessage {
		return nil, 0, httpapi.Errorf(httpapi.KindUnprocessable, "content_invalid", "content document %s is a %s document, not a message", doc, t)
	}
	if version != 0 && v.Number != version {
		// A newer version was published since the broadcast was scheduled: the frozen one
		// is read by its number.
		return nil, 0, httpapi.Errorf(httpapi.KindUnprocessable, "content_invalid", "version %d of content document %s is no longer the published one", version, doc)
	}
	var mb content.MessageBody
	if err := json.Unmarshal(v.Body, &mb); err != nil {
		return nil, 0, fmt.Errorf("broadcasts wiring: message body of %s: %w", doc, err)
	}
	c.mu.Lock()
	if c.cache == nil || len(c.cache) >= maxCached {
		c.cache = map[string]*content.MessageBody{}
	}
	c.cache[bot+"/"+doc+"/"+strconv.Itoa(v.Number)] = &mb
	c.mu.Unlock()
	return &mb, v.Number, nil
}

// forChannel is the message with channel type k's overrides.
func forChannel(b *content.MessageBody, k channel.Kind) content.MessageBody {
	out := content.MessageBody{Text: b.Text, Media: b.Media, Buttons: b.Buttons}
	if o, ok := b.Channels[string(k)]; ok {
		if o.Text != nil {
			out.Text = *o.Text
		}
		if o.Media != nil {
			out.Media = o.Media
		}
		if o.Buttons != nil {
			out.Buttons = *o.Buttons
		}
	}
	return out
}

func (c *contentAdapter) Check(ctx context.Context, bot, doc string, k channel.Kind) (int, error) {
	b, v, err := c.body(ctx, bot, doc, 0)
	if err != nil {
		return 0, err
	}
	a, ok := c.chans.Adapter(k)
	if !ok {
		return v, nil
	}
	caps := a.Capabilities()
	m := forChannel(b, k)
	var problems []string
	if m.Text == "" && m.Media == nil {
		problems = append(problems, fmt.Sprintf("the message has no text and no media for %s", k))
	}
	if n := len([]rune(m.Text)); caps.MaxTextLength > 0 && m.Media == nil && n > caps.MaxTextLength {
		problems = append(problems, fmt.Sprintf("the text is %d characters; %s allows at most %d", n, k, caps.MaxTextLength))
	}
	if len(m.Buttons) > 0 && (!caps.Sends(channel.MessageKindButtons) || len(m.Buttons) > caps.Buttons.Max) {
		problems = append(problems, fmt.Sprintf("%d buttons; %s shows at most %d", len(m.Buttons), k, caps.Buttons.Max))
	}
	if m.Media != nil && !caps.Sends(channel.MessageKindMedia) {
		problems = append(problems, fmt.Sprintf("%s cannot send media", k))
	}
	if len(problems) > 0 {
		return 0, httpapi.E(httpapi.KindUnprocessable, "content_invalid", strings.Join(problems, "; "))
	}
	return v, nil
}

func fill(s string, d merge.Data) string {
	if !strings.Contains(s, "{{") {
		return s
	}
	t, errs := merge.Parse(s)
	if len(errs) > 0 {
		return s
	}
	return t.Render(d, nil)
}

func (c *contentAdapter) Render(ctx context.Context, bot, doc string, version int, p broadcasts.Person) (channel.Message, error) {
	b, _, err := c.body(ctx, bot, doc, version)
	if err != nil {
		return channel.Message{}, err
	}
	d := merge.Data{"subscriber.id": p.SubscriberID, "subscriber.first_name": p.FirstName, "subscriber.last_name": p.LastName,
		"subscriber.name": p.Name, "subscriber.locale": p.Locale, "subscriber.timezone": p.Timezone, "subscriber.channel": string(p.Channel)}
	for k, v := range p.Fields {
		if v != nil {
			d["subscriber.fields."+k] = fmt.Sprint(v)
		}
	}
	m := forChannel(b, p.Channel)
	out := channel.Message{Text: fill(m.Text, d)}
	if m.Media != nil {
		out.Media = &channel.Media{Type: channel.MediaType(m.Media.Type), URL: fill(m.Media.URL, d), Caption: fill(m.Media.Caption, d)}
		if out.Media.Caption == "" {
			out.Media.Caption, out.Text = out.Text, ""
		}
	}
	for _, btn := range m.Buttons {
		out.Buttons = append(out.Buttons, channel.Button{Title: fill(btn.Title, d), Payload: btn.Payload, URL: fill(btn.URL, d)})
	}
	return out, nil
}

// audience reads subscribers, segments and experiments.
type audience struct {
	subs *subscribers.Service
	segs *segments.Service
	exps *experiments.Service
}

// Page lists the subscribers that have any of the labels (every subscriber without labels),
// each once (subscribers.Service.Audience).
func (a audience) Page(ctx context.Context, bot string, labelIDs []string, limit int, cursor string) ([]broadcasts.Person, string, error) {
	list, next, err := a.subs.Audience(ctx, bot, labelIDs, limit, cursor)
	if err != nil {
		return nil, "", err
	}
	out := make([]broadcasts.Person, 0, len(list))
	for _, s := range list {
		out = append(out, person(s))
	}
	return out, next, nil
}

func (a audience) Person(ctx context.Context, bot, id string) (broadcasts.Person, error) {
	s, err := a.subs.Get(ctx, bot, id)
	if err != nil {
		return broadcasts.Person{}, err
	}
	return person(s), nil
}

func (a audience) Segment(ctx context.Context, bot, id string) (string, string, int64, error) {
	seg, err := a.segs.Resolve(ctx, bot, id)
	if err != nil {
		return "", "", 0, err
	}
	exp := ""
	if seg.Source.Kind == segments.KindExperimentCohort {
		exp = seg.Source.ID
	}
	return seg.Source.Kind, exp, seg.MemberCount, nil
}

func (a audience) Members(ctx context.Context, bot, id, cursor string, limit int) ([]string, string, error) {
	return a.segs.Members(ctx, bot, id, cursor, limit)
}

func (a audience) ExperimentRunning(ctx context.Context, bot, id string) (bool, error) {
	e, err := a.exps.Get(ctx, bot, id)
	if err != nil {
		return false, err
	}
	return e.Status == experiments.Running, nil
}

func (a audience) TesterLabel(ctx context.Context, bot string) (string, error) {
	return a.subs.LabelNamed(ctx, bot, broadcasts.TesterLabel)
}

func (a audience) MissingLabels(ctx context.Context, bot string, ids []string) ([]string, error) {
	var missing []string
	for _, id := range ids {
		_, err := a.subs.GetLabel(ctx, bot, id)
		if httpapi.KindOf(err) == httpapi.KindNotFound {
			missing = append(missing, id)
			continue
		}
		if err != nil {
			return nil, err
		}
	}
	return missing, nil
}

func person(s subscribers.Subscriber) broadcasts.Person {
	deref := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	return broadcasts.Person{SubscriberID: s.ID, Channel: channel.Kind(s.Channel), ExternalID: s.ExternalID,
		FirstName: deref(s.FirstName), LastName: deref(s.LastName), Name: deref(s.Name), Locale: deref(s.Locale),
		Timezone: deref(s.Timezone), Labels: s.Labels, Fields: s.Fields, LastSeenAt: s.LastSeenAt}
}

// legacyRuns starts a legacy reaction broadcast's runs: the runtime's direct run of the
// reaction's published version (trigger broadcast), staged in the outbox with the
// recipient's row, so a row committed once starts one run.
type legacyRuns struct {
	rx     *reactions.Service
	outbox *outbox.Outbox
}

// Published implements broadcasts.Reactions.
func (l legacyRuns) Published(ctx context.Context, bot, reactionID string) (bool, error) {
	r, err := l.rx.Get(ctx, bot, reactionID)
	if err != nil {
		return false, err
	}
	return r.PublishedVersion != nil, nil
}

// Start implements broadcasts.Reactions.
func (l legacyRuns) Start(bot string, p broadcasts.Person, reactionID, cause string) ([]store.Write, func(context.Context), error) {
	if l.outbox == nil {
		return nil, nil, fmt.Errorf("no outbox in this process: reaction runs cannot be queued")
	}
	m, err := runtime.RunReactionMessage(bot, p.SubscriberID, p.Channel, reactionID, runtime.TriggerBroadcast, cause)
	if err != nil {
		return nil, nil, err
	}
	return l.outbox.Stage(m)
}
