// Package wiring composes the experiments family with the families it reads and writes
// through: reactions, content and popups (whether a variant's subject exists), subscribers
// (who may be assigned) and segments (a cohort saved as a segment).
package wiring

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/botplatform/api/functions/content"
	"github.com/botplatform/api/functions/experiments"
	"github.com/botplatform/api/functions/popups"
	"github.com/botplatform/api/functions/reactions"
	"github.com/botplatform/api/functions/segments"
	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
)

// Family is the experiments family.
func Family() family.Family {
	return family.Family{Name: "experiments", Build: func(env *family.Env) family.Parts {
		svc := New(env)
		return family.Parts{
			Routes: func(mux *httpapi.Mux) { experiments.Routes(mux, svc, env.Cursors) },
			Purge:  experiments.PurgeStep(env.Store),
		}
	}}
}

// New builds the experiments service on env. The other families' services are built for
// their reads only (and the segments family's save): none of them sends, publishes or
// starts jobs from here.
func New(env *family.Env) *experiments.Service {
	return experiments.NewService(experiments.Deps{
		Store:  env.Store,
		Events: env.Events,
		Subjects: Subjects{
			Reactions: reactions.NewService(env.Store, nil, env.Now, env.Log),
			Content:   content.NewService(env.Store, nil, nil, env.Now),
			Popups:    popups.NewService(env.Store, nil, nil, nil, env.Now, env.Log),
		},
		Subscribers: Subscribers{Subs: subscribers.NewService(env.Store, env.Now, nil)},
		Segments:    Segments{Svc: segments.NewService(segments.Config{Store: env.Store, Now: env.Now})},
		Now:         env.Now,
	})
}

// Subjects looks a variant's subject up in the family that owns it.
type Subjects struct {
	Reactions *reactions.Service
	Content   *content.Service
	Popups    *popups.Service
}

// notFound reports whether err is another family's 404.
func notFound(err error) bool { return httpapi.KindOf(err) == httpapi.KindNotFound }

// Check implements experiments.Subjects.
func (s Subjects) Check(ctx context.Context, bot string, sub experiments.Subject) (string, error) {
	switch sub.Type {
	case experiments.SubjectReactionVersion:
		id, n := *sub.ReactionID, *sub.Version
		if _, err := s.Reactions.Get(ctx, bot, id); notFound(err) {
			return fmt.Sprintf("no reaction %s in this bot", id), nil
		} else if err != nil {
			return "", err
		}
		if _, err := s.Reactions.Version(ctx, bot, id, n); notFound(err) {
			return fmt.Sprintf("reaction %s has no published version %d", id, n), nil
		} else if err != nil {
			return "", err
		}
	case experiments.SubjectContent:
		id := *sub.DocumentID
		d, err := s.Content.Get(ctx, bot, id)
		switch {
		case notFound(err):
			return fmt.Sprintf("no content document %s in this bot", id), nil
		case err != nil:
			return "", err
		case d.Archived:
			return fmt.Sprintf("content document %s is archived", id), nil
		case sub.Version == nil && d.Published == nil:
			return fmt.Sprintf("content document %s has no published version; publish it first", id), nil
		case sub.Version != nil && (d.Published == nil || *sub.Version > int64(d.Published.Number)):
			return fmt.Sprintf("content document %s has no published version %d", id, *sub.Version), nil
		}
	case experiments.SubjectPopup:
		id := *sub.PopupID
		if _, err := s.Popups.Get(ctx, bot, id); notFound(err) {
			return fmt.Sprintf("no popup %s in this bot", id), nil
		} else if err != nil {
			return "", err
		}
	default:
		return fmt.Sprintf("unknown subject type %q", sub.Type), nil
	}
	return "", nil
}

// Subscribers tells the experiments family which subscribers a bot has.
type Subscribers struct{ Subs *subscribers.Service }

// Channel implements experiments.Subscribers.
func (s Subscribers) Channel(ctx context.Context, bot, id string) (string, error) {
	sub, err := s.Subs.Get(ctx, bot, id)
	if err != nil {
		return "", err
	}
	return sub.Channel, nil
}

// Segments saves experiment cohorts as segments.
type Segments struct{ Svc *segments.Service }

// SaveCohort implements experiments.Segments.
func (s Segments) SaveCohort(ctx context.Context, bot string, c experiments.Cohort) (experiments.SavedSegment, error) {
	seg, err := s.Svc.Save(ctx, bot, segments.New{
		Name:    c.Name,
		Source:  segments.Source{Kind: segments.KindExperimentCohort, ID: c.ExperimentID, Revision: c.Version, Definition: c.Definition},
		Members: c.Members,
	})
	if err != nil {
		return experiments.SavedSegment{}, err
	}
	b, err := json.Marshal(seg)
	if err != nil {
		return experiments.SavedSegment{}, err
	}
	return experiments.SavedSegment{ID: seg.ID, JSON: b}, nil
}
