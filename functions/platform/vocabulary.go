package platform

import (
	"context"
	"errors"
	"fmt"

	"github.com/botplatform/api/functions/reactions"
	"github.com/botplatform/api/functions/subscribers"
)

// reactionVocabulary gives the reactions family the bot's labels and custom fields, which
// the subscribers family owns. Families never import each other; this adapter is the one
// place they meet.
func reactionVocabulary(env *Env) reactions.Vocabulary {
	return subscriberVocabulary{svc: subscribers.NewService(env.Store, env.Now, env.Jobs)}
}

// subscriberVocabulary adapts *subscribers.Service to reactions.Vocabulary.
type subscriberVocabulary struct {
	svc *subscribers.Service
}

// Labels returns every label of the bot.
func (v subscriberVocabulary) Labels(ctx context.Context, bot string) ([]reactions.Label, error) {
	labels, err := v.svc.Labels(ctx, bot)
	if err != nil {
		return nil, err
	}
	out := make([]reactions.Label, len(labels))
	for i, l := range labels {
		out[i] = reactions.Label{ID: l.ID, Name: l.Name}
	}
	return out, nil
}

// Fields returns every custom field of the bot.
func (v subscriberVocabulary) Fields(ctx context.Context, bot string) ([]reactions.Field, error) {
	fields, err := v.svc.Fields(ctx, bot)
	if err != nil {
		return nil, err
	}
	out := make([]reactions.Field, len(fields))
	for i, f := range fields {
		out[i] = reactions.Field{ID: f.ID, Name: f.Name, Type: reactions.FieldType(f.Type)}
	}
	return out, nil
}

// EnsureLabels returns the ids of the named labels, creating missing ones.
func (v subscriberVocabulary) EnsureLabels(ctx context.Context, bot string, names []string) (map[string]string, error) {
	return v.svc.EnsureLabels(ctx, bot, names)
}

// EnsureFields returns the ids of the named fields, creating missing ones; a name of another
// type is reactions.ErrFieldTypeConflict (and still the subscribers family's 409).
func (v subscriberVocabulary) EnsureFields(ctx context.Context, bot string, fields []reactions.Field) (map[string]string, error) {
	specs := make([]subscribers.FieldSpec, len(fields))
	for i, f := range fields {
		specs[i] = subscribers.FieldSpec{Name: f.Name, Type: subscribers.FieldType(f.Type)}
	}
	ids, err := v.svc.EnsureFields(ctx, bot, specs)
	if errors.Is(err, subscribers.ErrFieldTypeConflict) {
		return nil, fmt.Errorf("%w: %w", reactions.ErrFieldTypeConflict, err)
	}
	return ids, err
}
