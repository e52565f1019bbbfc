package crm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/botplatform/api/shared/auth"
	crmapi "github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/text"
)

// Mapping limits.
const (
	// MaxMappingFields bounds a mapping's fields: a record write carries them all, and a
	// revision stays a small item.
	MaxMappingFields = 200
	// MaxMappingValues bounds one field's value translations.
	MaxMappingValues = 50
	// maxNameLen bounds a source's name, a target, a key and a translated value.
	maxNameLen = 255
)

// The directions a mapped field syncs in.
const (
	DirectionPush = "push" // subscriber -> CRM
	DirectionPull = "pull" // CRM -> subscriber
	DirectionBoth = "both"
)

// DefaultKeySource is what a mapping matches CRM records by unless it says otherwise: the
// subscriber's email (the custom field named email, as email campaigns read it).
const DefaultKeySource = "subscriber:email"

// MappingField maps one subscriber value to one CRM field.
type MappingField struct {
	// Source is "field:<custom field name>", "label:<label name>" or
	// "subscriber:<attribute>" (id, channel, external_id, first_name, last_name, name,
	// locale, timezone, email, created_at, updated_at, last_seen_at).
	Source string `json:"source"`
	// Target is the CRM field's API name, as field discovery lists it.
	Target    string `json:"target"`
	Direction string `json:"direction"`
	// Values translate the source's value (a string; "true" and "false" for booleans and
	// labels) into the CRM's, for enum and string targets: an enum target's values must be
	// among its options.
	Values map[string]string `json:"values,omitempty"`
}

// Deal is the deal a sync opens for each subscriber it links to a record that has no open
// deal in the pipeline: its pipeline and first stage, and the subscriber custom field that
// follows the deal's stage.
type Deal struct {
	Pipeline string `json:"pipeline"`
	Stage    string `json:"stage"`
	// StageField is a text custom field of the bot's that receives the label of the deal's
	// stage when the deal is opened and whenever a reconcile reads that the CRM moved it
	// ("" for none): what flows, segments and broadcasts act on.
	StageField string `json:"stage_field,omitempty"`
}

// MappingSpec is what a mapping says: which CRM object subscribers become, the field that
// matches a subscriber to a record, the mapped fields and the deals of new records.
type MappingSpec struct {
	Object string `json:"object"`
	// Key is the CRM field a record is matched by (email, say); KeySource the subscriber
	// value it is matched with (DefaultKeySource unless given).
	Key       string         `json:"key"`
	KeySource string         `json:"key_source"`
	Fields    []MappingField `json:"fields"`
	Deal      *Deal          `json:"deal,omitempty"`
}

// Mapping is one revision of a connection's mapping.
type Mapping struct {
	ConnectionID string `json:"connection_id"`
	MappingSpec
	Revision int64 `json:"revision"`
	// SavedAt is when this revision was saved, SavedBy by whom (the user id; "" for a bot
	// API token).
	SavedAt time.Time `json:"saved_at"`
	SavedBy string    `json:"saved_by,omitempty"`
}

// MappingRequest is the body of PUT .../mapping. ExpectedRevision is the revision the
// change is based on; left out, the mapping must not exist yet (the PUT creates it).
type MappingRequest struct {
	ExpectedRevision *int64         `json:"expected_revision"`
	Object           string         `json:"object"`
	Key              string         `json:"key"`
	KeySource        string         `json:"key_source"`
	Fields           []MappingField `json:"fields"`
	Deal             *Deal          `json:"deal"`
}

// Spec returns what the request maps, normalized.
func (r *MappingRequest) Spec() MappingSpec {
	sp := MappingSpec{Object: strings.TrimSpace(r.Object), Key: strings.TrimSpace(r.Key), KeySource: strings.TrimSpace(r.KeySource),
		Fields: slices.Clone(r.Fields)}
	if r.Deal != nil {
		sp.Deal = &Deal{Pipeline: strings.TrimSpace(r.Deal.Pipeline), Stage: strings.TrimSpace(r.Deal.Stage),
			StageField: strings.TrimSpace(r.Deal.StageField)}
	}
	if sp.KeySource == "" {
		sp.KeySource = DefaultKeySource
	}
	if sp.Fields == nil {
		sp.Fields = []MappingField{}
	}
	for i := range sp.Fields {
		f := &sp.Fields[i]
		f.Source, f.Target, f.Direction = strings.TrimSpace(f.Source), strings.TrimSpace(f.Target), strings.TrimSpace(f.Direction)
		if len(f.Values) == 0 {
			f.Values = nil
		}
	}
	return sp
}

// Validate checks the request's form (400 validation_failed); what it names is checked
// against the CRM and the bot when it is saved (422 invalid_mapping).
func (r *MappingRequest) Validate() error {
	sp := r.Spec()
	return sp.check().Err()
}

// check returns the problems of the spec's form.
func (sp MappingSpec) check() httpapi.Problems {
	var p httpapi.Problems
	switch {
	case sp.Object == "":
		p.Add("object", "is required: the CRM object subscribers are written to (contacts, persons, Contact...)")
	case !objectName.MatchString(sp.Object):
		p.Add("object", "must be an object name as field discovery lists it")
	}
	checkName(&p, "key", sp.Key)
	if _, ok := parseSource(sp.KeySource); !ok {
		p.Add("key_source", "must be field:<name>, label:<name> or subscriber:<attribute>")
	}
	if len(sp.Fields) > MaxMappingFields {
		p.Add("fields", "has %d fields; a mapping has at most %d", len(sp.Fields), MaxMappingFields)
		return p
	}
	for i, f := range sp.Fields {
		at := fmt.Sprintf("fields[%d].", i)
		if src, ok := parseSource(f.Source); !ok {
			p.Add(at+"source", "must be field:<name>, label:<name> or subscriber:<attribute>")
		} else if src.kind == "subscriber" {
			if _, ok := builtins[src.name]; !ok {
				p.Add(at+"source", "subscriber:%s is not a subscriber attribute (%s)", src.name, strings.Join(builtinNames(), ", "))
			}
		}
		checkName(&p, at+"target", f.Target)
		if !slices.Contains([]string{DirectionPush, DirectionPull, DirectionBoth}, f.Direction) {
			p.Add(at+"direction", "must be push, pull or both")
		}
		if len(f.Values) > MaxMappingValues {
			p.Add(at+"values", "has %d values; at most %d", len(f.Values), MaxMappingValues)
		}
		for _, k := range sortedKeys(f.Values) {
			checkName(&p, at+"values."+k, k)
			checkName(&p, at+"values."+k, f.Values[k])
		}
	}
	if sp.Deal != nil {
		checkName(&p, "deal.pipeline", sp.Deal.Pipeline)
		checkName(&p, "deal.stage", sp.Deal.Stage)
		if sp.Deal.StageField != "" {
			checkName(&p, "deal.stage_field", sp.Deal.StageField)
		}
	}
	return p
}

func checkName(p *httpapi.Problems, field, v string) {
	switch {
	case v == "":
		p.Add(field, "is required")
	case utf8.RuneCountInString(v) > maxNameLen:
		p.Add(field, "must be at most %d characters", maxNameLen)
	default:
		p.Text(field, v, text.Line)
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// source is a parsed MappingField.Source.
type source struct{ kind, name string }

func parseSource(s string) (source, bool) {
	kind, name, ok := strings.Cut(s, ":")
	if !ok || name == "" || utf8.RuneCountInString(name) > maxNameLen || strings.TrimSpace(name) != name {
		return source{}, false
	}
	switch kind {
	case "field", "label", "subscriber":
		return source{kind, name}, true
	}
	return source{}, false
}

// builtin is a subscriber attribute a mapping may read: its type, and whether a pull may
// write it.
type builtin struct {
	typ      string
	writable bool
}

// The source types beyond the custom fields': a label is present or not.
const sourceLabel = "label"

var builtins = map[string]builtin{
	"id": {SubscriberString, false}, "channel": {SubscriberString, false}, "external_id": {SubscriberString, false},
	"first_name": {SubscriberString, true}, "last_name": {SubscriberString, true}, "name": {SubscriberString, false},
	"locale": {SubscriberString, true}, "timezone": {SubscriberString, true}, "email": {SubscriberString, true},
	"created_at": {SubscriberDatetime, false}, "updated_at": {SubscriberDatetime, false}, "last_seen_at": {SubscriberDatetime, false},
}

func builtinNames() []string {
	names := make([]string, 0, len(builtins))
	for n := range builtins {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// compatible lists the CRM field types each source type maps to, pushed or both ways (a
// pulled value that does not convert is the sync's per-record error).
var compatible = map[string][]crmapi.FieldType{
	SubscriberString:   {crmapi.TypeString, crmapi.TypeEmail, crmapi.TypePhone, crmapi.TypeEnum},
	SubscriberNumber:   {crmapi.TypeNumber, crmapi.TypeString},
	SubscriberBoolean:  {crmapi.TypeBool, crmapi.TypeString, crmapi.TypeEnum},
	SubscriberDatetime: {crmapi.TypeDate, crmapi.TypeDateTime, crmapi.TypeString},
	sourceLabel:        {crmapi.TypeBool, crmapi.TypeEnum, crmapi.TypeString},
}

// mapsTo reports whether a source of type typ maps to a CRM field of type target in
// direction: a pushed value must convert to the CRM's type, and a pulled one back; any CRM
// value converts to the text of a string source.
func mapsTo(typ string, target crmapi.FieldType, direction string) bool {
	if direction == DirectionPull && typ == SubscriberString {
		return true
	}
	return slices.Contains(compatible[typ], target)
}

// keyTypes are the CRM field types a record can be matched by.
var keyTypes = []crmapi.FieldType{crmapi.TypeString, crmapi.TypeEmail, crmapi.TypePhone, crmapi.TypeNumber}

// resolved is what a mapping is checked against: the CRM's objects, the object's fields
// and the pipelines (when it has a deal), and the bot's custom fields and labels.
type resolved struct {
	objects   []crmapi.Object
	fields    map[string]crmapi.Field
	pipelines []crmapi.Pipeline
	catalog   Catalog
	cached    bool // something came from the discovery cache
}

// resolve reads what sp is checked against.
func (s *Service) resolve(ctx context.Context, bot string, c Connection, sp MappingSpec, refresh bool) (resolved, error) {
	if s.subscribers == nil {
		return resolved{}, errNoSubscribers()
	}
	var r resolved
	objs, err := discover(ctx, s, bot, c, objectsKey(bot, c.ID), refresh, func(ctx context.Context, cl crmapi.Client) ([]crmapi.Object, error) {
		return cl.Objects(ctx)
	})
	if err != nil {
		return resolved{}, err
	}
	r.objects, r.cached = objs.Data, objs.cached
	if slices.ContainsFunc(r.objects, func(o crmapi.Object) bool { return o.Name == sp.Object }) {
		fs, err := s.fields(ctx, bot, c, sp.Object, refresh)
		if err != nil {
			return resolved{}, err
		}
		r.fields = make(map[string]crmapi.Field, len(fs.Data))
		for _, f := range fs.Data {
			r.fields[f.Name] = f
		}
		r.cached = r.cached || fs.cached
	}
	if sp.Deal != nil {
		ps, err := s.pipelines(ctx, bot, c, refresh)
		if err != nil {
			return resolved{}, err
		}
		r.pipelines, r.cached = ps.Data, r.cached || ps.cached
	}
	if r.catalog, err = s.subscribers.Catalog(ctx, bot); err != nil {
		return resolved{}, err
	}
	return r, nil
}

func errNoSubscribers() error {
	return httpapi.E(httpapi.KindUnavailable, "subscribers_unavailable",
		"this deployment's CRM service cannot read the bot's subscribers, which mappings and previews need")
}

// sourceType returns the type of src for the bot ("" when the bot has no such field or
// label) and whether a pull may write it.
func (r resolved) sourceType(src source) (typ string, writable bool) {
	switch src.kind {
	case "field":
		return r.catalog.Fields[src.name], true
	case "label":
		if slices.ContainsFunc(r.catalog.Labels, func(l string) bool { return strings.EqualFold(l, src.name) }) {
			return sourceLabel, true
		}
		return "", false
	}
	b := builtins[src.name]
	return b.typ, b.writable
}

// problems checks sp against r: every problem with its path, for a 422 invalid_mapping.
func (r resolved) problems(sp MappingSpec) httpapi.Problems {
	var p httpapi.Problems
	if !slices.ContainsFunc(r.objects, func(o crmapi.Object) bool { return o.Name == sp.Object }) {
		names := make([]string, len(r.objects))
		for i, o := range r.objects {
			names[i] = o.Name
		}
		p.Add("object", "the CRM has no object %q (it has %s)", sp.Object, strings.Join(names, ", "))
		return p
	}
	key, ok := r.fields[sp.Key]
	switch {
	case !ok:
		p.Add("key", "%s has no field %q", sp.Object, sp.Key)
	case !slices.Contains(keyTypes, key.Type):
		p.Add("key", "%s is of type %s; records are matched by a string, email, phone or number field", sp.Key, key.Type)
	case key.ReadOnly:
		p.Add("key", "%s is read-only: a sync could not create records with it", sp.Key)
	}
	ks, _ := parseSource(sp.KeySource)
	switch typ, _ := r.sourceType(ks); {
	case typ == "":
		p.Add("key_source", "the bot has no %s %q", ks.kind, ks.name)
	case typ != SubscriberString && typ != SubscriberNumber:
		p.Add("key_source", "is of type %s; a record is matched by a string or number", typ)
	}
	targets, pulled := map[string]int{}, map[string]int{}
	for i, f := range sp.Fields {
		at := fmt.Sprintf("fields[%d].", i)
		src, _ := parseSource(f.Source)
		typ, writable := r.sourceType(src)
		if typ == "" {
			p.Add(at+"source", "the bot has no %s %q", src.kind, src.name)
		}
		if f.Direction != DirectionPush {
			switch {
			case typ != "" && !writable:
				p.Add(at+"direction", "%s is read-only on a subscriber: it can only be pushed", f.Source)
			case pulled[strings.ToLower(f.Source)] > 0:
				p.Add(at+"source", "is pulled by fields[%d] already: a value comes from one CRM field", pulled[strings.ToLower(f.Source)]-1)
			}
			pulled[strings.ToLower(f.Source)] = i + 1
		}
		tf, ok := r.fields[f.Target]
		if !ok {
			p.Add(at+"target", "%s has no field %q", sp.Object, f.Target)
			continue
		}
		if j, dup := targets[f.Target]; dup {
			p.Add(at+"target", "is mapped by fields[%d] already", j)
		}
		targets[f.Target] = i
		if tf.ReadOnly && f.Direction != DirectionPull {
			p.Add(at+"target", "%s is read-only in the CRM: it can only be pulled", f.Target)
		}
		if typ == "" {
			continue
		}
		if !mapsTo(typ, tf.Type, f.Direction) {
			p.Add(at+"target", "a %s source does not map to %s, a %s field (it maps to %s)", typ, f.Target, tf.Type, typeList(compatible[typ]))
			continue
		}
		r.checkValues(&p, at, typ, tf, f.Values)
	}
	if sp.Deal != nil {
		i := slices.IndexFunc(r.pipelines, func(pl crmapi.Pipeline) bool { return pl.ID == sp.Deal.Pipeline })
		switch {
		case i < 0:
			p.Add("deal.pipeline", "the CRM has no deal pipeline %q", sp.Deal.Pipeline)
		case !slices.ContainsFunc(r.pipelines[i].Stages, func(st crmapi.Stage) bool { return st.ID == sp.Deal.Stage }):
			p.Add("deal.stage", "pipeline %q has no stage %q", sp.Deal.Pipeline, sp.Deal.Stage)
		}
		if f := sp.Deal.StageField; f != "" {
			typ, ok := r.catalog.Fields[f]
			switch {
			case !ok:
				p.Add("deal.stage_field", "the bot has no custom field %q", f)
			case typ != SubscriberString:
				p.Add("deal.stage_field", "%s is a %s field; the stage's label needs a %s field", f, typ, SubscriberString)
			case slices.ContainsFunc(sp.Fields, func(mf MappingField) bool { return mf.Source == "field:"+f && mf.Direction != DirectionPush }):
				p.Add("deal.stage_field", "field:%s is pulled from the CRM by the mapping's fields too", f)
			}
		}
	}
	return p
}

func typeList(ts []crmapi.FieldType) string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = string(t)
	}
	return strings.Join(out, ", ")
}

// boolish reports whether a source type has the values true and false.
func boolish(typ string) bool { return typ == SubscriberBoolean || typ == sourceLabel }

// checkValues checks a field's value translations against its source and target.
func (r resolved) checkValues(p *httpapi.Problems, at, typ string, tf crmapi.Field, values map[string]string) {
	if len(values) > 0 && tf.Type != crmapi.TypeEnum && tf.Type != crmapi.TypeString {
		p.Add(at+"values", "translate values for enum and string targets only; %s is a %s field", tf.Name, tf.Type)
		return
	}
	if len(values) > 0 && !boolish(typ) && typ != SubscriberString {
		p.Add(at+"values", "translate string, boolean and label values only; the source is a %s", typ)
		return
	}
	for _, k := range sortedKeys(values) {
		if boolish(typ) && k != "true" && k != "false" {
			p.Add(at+"values."+k, "a %s source has the values true and false only", typ)
		}
		if tf.Type == crmapi.TypeEnum && !slices.Contains(tf.Options, values[k]) {
			p.Add(at+"values."+k, "%q is not an option of %s (%s)", values[k], tf.Name, strings.Join(tf.Options, ", "))
		}
	}
	if tf.Type == crmapi.TypeEnum && boolish(typ) && len(values) == 0 &&
		!(slices.Contains(tf.Options, "true") && slices.Contains(tf.Options, "false")) {
		p.Add(at+"values", "%s's options are not true and false: say which option each of true and false is", tf.Name)
	}
}

// validate checks sp against the CRM and the bot; a problem is checked again against a
// fresh discovery when the cached one was used (a field added in the CRM a minute ago).
func (s *Service) validate(ctx context.Context, bot string, c Connection, sp MappingSpec) error {
	r, err := s.resolve(ctx, bot, c, sp, false)
	if err != nil {
		return err
	}
	p := r.problems(sp)
	if len(p) > 0 && r.cached {
		if r, err = s.resolve(ctx, bot, c, sp, true); err != nil {
			return err
		}
		p = r.problems(sp)
	}
	return p.Unprocessable("invalid_mapping")
}

// currentMapping reads a connection's mapping; found is false when it has none.
func (s *Service) currentMapping(ctx context.Context, bot, id string) (m Mapping, found bool, err error) {
	it, err := s.store.Get(ctx, mappingKey(bot, id))
	if errors.Is(err, store.ErrNotFound) {
		return Mapping{}, false, nil
	}
	if err != nil {
		return Mapping{}, false, err
	}
	m, err = store.Decode[Mapping](it)
	m.Revision = it.Revision
	return m, err == nil, err
}

// Mapping returns the connection's current mapping; 404 when it has none.
func (s *Service) Mapping(ctx context.Context, bot, id string) (Mapping, error) {
	if _, err := s.load(ctx, bot, id); err != nil {
		return Mapping{}, err
	}
	m, found, err := s.currentMapping(ctx, bot, id)
	if err == nil && !found {
		err = httpapi.NotFound("CRM mapping")
	}
	return m, err
}

// PutMapping saves a new revision of the connection's mapping, checked against the CRM's
// fields and the bot's; created is true for the first. A request equal to the current
// mapping saves nothing and returns it.
func (s *Service) PutMapping(ctx context.Context, caller *auth.Principal, bot, id string, req MappingRequest) (m Mapping, created bool, err error) {
	c, err := s.load(ctx, bot, id)
	if err != nil {
		return Mapping{}, false, err
	}
	sp := req.Spec()
	if err := sp.check().Err(); err != nil {
		return Mapping{}, false, err
	}
	cur, found, err := s.currentMapping(ctx, bot, id)
	if err != nil {
		return Mapping{}, false, err
	}
	switch {
	case req.ExpectedRevision == nil && found:
		return Mapping{}, false, httpapi.StaleRevision(cur.Revision) // a PUT without it creates
	case req.ExpectedRevision != nil && !found:
		return Mapping{}, false, httpapi.StaleRevision(0)
	case req.ExpectedRevision != nil && *req.ExpectedRevision != cur.Revision:
		return Mapping{}, false, httpapi.StaleRevision(cur.Revision)
	}
	if err := s.validate(ctx, bot, c, sp); err != nil {
		return Mapping{}, false, err
	}
	if found && reflect.DeepEqual(cur.MappingSpec, sp) {
		return cur, false, nil
	}
	m = Mapping{ConnectionID: id, MappingSpec: sp, Revision: cur.Revision + 1, SavedAt: stamp(s.now())}
	if caller != nil {
		m.SavedBy = caller.UserID
	}
	cond := store.MustNotExist
	if found {
		cond = store.RevisionIs(cur.Revision)
	}
	mi, err := item(mappingKey(bot, id), m.Revision, m)
	if err != nil {
		return Mapping{}, false, err
	}
	ri, err := item(revisionKey(bot, id, m.Revision), m.Revision, m)
	if err != nil {
		return Mapping{}, false, err
	}
	err = s.store.Transact(ctx, []store.Write{store.CheckOp(connKey(bot, id), store.MustExist),
		store.PutOp(mi, cond), store.PutOp(ri, store.MustNotExist)})
	var ce *store.ConditionError
	switch {
	case errors.As(err, &ce) && ce.Index == 0:
		return Mapping{}, false, httpapi.NotFound("CRM connection") // disconnected meanwhile
	case errors.Is(err, store.ErrConditionFailed):
		now, _, gerr := s.currentMapping(ctx, bot, id)
		if gerr != nil {
			return Mapping{}, false, gerr
		}
		return Mapping{}, false, httpapi.StaleRevision(now.Revision)
	case err != nil:
		return Mapping{}, false, fmt.Errorf("crm: save mapping: %w", err)
	}
	return m, !found, nil
}

// Revisions lists the connection's saved mapping revisions, newest first.
func (s *Service) Revisions(ctx context.Context, bot, id string, limit int, cursor string) ([]Mapping, string, error) {
	if _, err := s.load(ctx, bot, id); err != nil {
		return nil, "", err
	}
	page, err := s.store.Query(ctx, store.Query{PK: crmPK(bot), Prefix: revisionPrefix(id), Reverse: true, Limit: limit, Cursor: cursor})
	if err != nil {
		return nil, "", err
	}
	out := make([]Mapping, 0, len(page.Items))
	for _, it := range page.Items {
		m, err := store.Decode[Mapping](it)
		if err != nil {
			return nil, "", err
		}
		m.Revision = it.Revision
		out = append(out, m)
	}
	return out, page.Next, nil
}

// Revision returns one saved revision; 404 for one that was never saved.
func (s *Service) Revision(ctx context.Context, bot, id, revision string) (Mapping, error) {
	if _, err := s.load(ctx, bot, id); err != nil {
		return Mapping{}, err
	}
	rev, err := strconv.ParseInt(revision, 10, 64)
	if err != nil || rev < 1 || strconv.FormatInt(rev, 10) != revision {
		return Mapping{}, httpapi.NotFound("mapping revision")
	}
	it, err := s.store.Get(ctx, revisionKey(bot, id, rev))
	if errors.Is(err, store.ErrNotFound) {
		return Mapping{}, httpapi.NotFound("mapping revision")
	}
	if err != nil {
		return Mapping{}, err
	}
	m, err := store.Decode[Mapping](it)
	m.Revision = it.Revision
	return m, err
}

// eraseMapping removes a disconnected connection's mapping, its revisions and its
// discovery cache (best effort: what is left is erased with the bot's purge, and nothing
// reads it once the connection is gone).
func (s *Service) eraseMapping(ctx context.Context, bot, id string) {
	ctx = context.WithoutCancel(ctx)
	for _, prefix := range []string{"MAP#" + id, revisionPrefix(id), discPrefix(id)} {
		for {
			done, err := s.erase(ctx, crmPK(bot), prefix)
			if err != nil {
				s.log.WarnContext(ctx, "crm: erase mapping", "connection", id, "error", err)
				return
			}
			if done {
				break
			}
		}
	}
}

// eraseDiscovery removes a connection's discovery cache (best effort: it expires anyway).
func (s *Service) eraseDiscovery(ctx context.Context, bot, id string) {
	ctx = context.WithoutCancel(ctx)
	for {
		done, err := s.erase(ctx, crmPK(bot), discPrefix(id))
		if err != nil {
			s.log.WarnContext(ctx, "crm: erase discovery cache", "connection", id, "error", err)
			return
		}
		if done {
			return
		}
	}
}

// erase deletes a page of the items of partition pk under prefix; done when none was left.
func (s *Service) erase(ctx context.Context, pk, prefix string) (bool, error) {
	page, err := s.store.Query(ctx, store.Query{PK: pk, Prefix: prefix, Limit: store.MaxTransactWrites})
	if err != nil || len(page.Items) == 0 {
		return err == nil, err
	}
	writes := make([]store.Write, len(page.Items))
	for i, it := range page.Items {
		writes[i] = store.DeleteOp(it.Key, store.Always)
	}
	if err := s.store.Transact(ctx, writes); err != nil {
		return false, err
	}
	return page.Next == "", nil
}

func (h *Handlers) getMapping(w http.ResponseWriter, r *http.Request) error {
	m, err := h.svc.Mapping(r.Context(), r.PathValue("botID"), r.PathValue("connectionID"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, m)
}

func (h *Handlers) putMapping(w http.ResponseWriter, r *http.Request) error {
	var req MappingRequest
	if err := httpapi.Decode(w, r, &req); err != nil {
		return err
	}
	m, created, err := h.svc.PutMapping(r.Context(), httpapi.Caller(r), r.PathValue("botID"), r.PathValue("connectionID"), req)
	if err != nil {
		return retryAfter(w, err)
	}
	if created {
		return httpapi.WriteJSON(w, http.StatusCreated, m)
	}
	return httpapi.WriteJSON(w, http.StatusOK, m)
}

func (h *Handlers) revisions(w http.ResponseWriter, r *http.Request) error {
	return httpapi.ServeList(w, r, h.cursors, func(limit int, cursor string) ([]Mapping, string, error) {
		return h.svc.Revisions(r.Context(), r.PathValue("botID"), r.PathValue("connectionID"), limit, cursor)
	})
}

func (h *Handlers) revision(w http.ResponseWriter, r *http.Request) error {
	m, err := h.svc.Revision(r.Context(), r.PathValue("botID"), r.PathValue("connectionID"), r.PathValue("revision"))
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, m)
}
