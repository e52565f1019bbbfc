package reactions

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// memVocabulary is the subscribers family as reactions see it, in memory.
type memVocabulary struct {
	mu     sync.Mutex
	labels map[string][]Label
	fields map[string][]Field
	// calls counts Ensure calls, so tests can tell that a dry run creates nothing.
	ensures int
}

func newVocabulary() *memVocabulary {
	return &memVocabulary{labels: map[string][]Label{}, fields: map[string][]Field{}}
}

func (v *memVocabulary) Labels(_ context.Context, bot string) ([]Label, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]Label(nil), v.labels[bot]...), nil
}

func (v *memVocabulary) Fields(_ context.Context, bot string) ([]Field, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]Field(nil), v.fields[bot]...), nil
}

func (v *memVocabulary) EnsureLabels(_ context.Context, bot string, names []string) (map[string]string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.ensures++
	out := map[string]string{}
	for _, n := range names {
		found := ""
		for _, l := range v.labels[bot] {
			if strings.EqualFold(l.Name, n) {
				found = l.ID
			}
		}
		if found == "" {
			found = ids.New("lbl")
			v.labels[bot] = append(v.labels[bot], Label{ID: found, Name: n})
		}
		out[n] = found
	}
	return out, nil
}

func (v *memVocabulary) EnsureFields(_ context.Context, bot string, fields []Field) (map[string]string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.ensures++
	for _, f := range fields {
		for _, have := range v.fields[bot] {
			if have.Name == f.Name && have.Type != f.Type {
				return nil, fmt.Errorf("field %s: %w", f.Name, ErrFieldTypeConflict)
			}
		}
	}
	out := map[string]string{}
	for _, f := range fields {
		found := ""
		for _, have := range v.fields[bot] {
			if have.Name == f.Name {
				found = have.ID
			}
		}
		if found == "" {
			found = ids.New("fld")
			v.fields[bot] = append(v.fields[bot], Field{ID: found, Name: f.Name, Type: f.Type})
		}
		out[f.Name] = found
	}
	return out, nil
}

// label adds a label to the bot and returns its id.
func (v *memVocabulary) label(bot, name string) string {
	m, _ := v.EnsureLabels(context.Background(), bot, []string{name})
	return m[name]
}

// field adds a field to the bot and returns its id.
func (v *memVocabulary) field(bot, name string, t FieldType) string {
	m, err := v.EnsureFields(context.Background(), bot, []Field{{Name: name, Type: t}})
	if err != nil {
		panic(err)
	}
	return m[name]
}

func (v *memVocabulary) dropLabel(bot, id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var keep []Label
	for _, l := range v.labels[bot] {
		if l.ID != id {
			keep = append(keep, l)
		}
	}
	v.labels[bot] = keep
}

type fixture struct {
	svc   *Service
	store store.Store
	vocab *memVocabulary
	clock *httpapitest.Clock
	bot   string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	c := newClock()
	return newFixtureOn(t, sqlitetest.Open(t, sqlite.WithClock(c.Now)), c)
}

// newClock ticks a millisecond per reading: distinct, ordered ids.
func newClock() *httpapitest.Clock { return httpapitest.NewClock(t0, time.Millisecond) }

func newFixtureOn(t *testing.T, st store.Store, c *httpapitest.Clock) *fixture {
	t.Helper()
	v := newVocabulary()
	return &fixture{svc: NewService(st, v, c.Now, slog.New(slog.DiscardHandler)), store: st, vocab: v, clock: c, bot: ids.At("bot", t0)}
}

// content builds a Content from JSON, as a client would send it.
func content(t *testing.T, js string) Content {
	t.Helper()
	var c Content
	dec := json.NewDecoder(strings.NewReader(js))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&c), js)
	return c
}

func steps(t *testing.T, js string) []Step {
	t.Helper()
	var s []Step
	require.NoError(t, json.Unmarshal([]byte(js), &s), js)
	return s
}

func (f *fixture) create(t *testing.T, js string) Reaction {
	t.Helper()
	r, err := f.svc.Create(t.Context(), f.bot, content(t, js))
	require.NoError(t, err)
	return r
}

func ptr[T any](v T) *T { return &v }

// paths lists the field paths of a validation_failed or invalid_steps error with its code.
func paths(t *testing.T, err error) (string, []string) {
	t.Helper()
	he := httpapitest.AsError(t, err)
	var out []string
	if list, ok := he.Extensions["errors"].([]httpapi.FieldError); ok {
		for _, fe := range list {
			out = append(out, fe.Field)
		}
	}
	return he.Code, out
}
