package subscribers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/text"
)

// Label tags subscribers ("vip", "Asked for a refund"). Subscribers carry label ids; the
// name is the bot's to rename.
type Label struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Revision  int64     `json:"revision"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Label limits.
const (
	MaxLabelNameLen = 50
	MaxLabelsPerBot = 1000
)

const labelsCounter = "LABELS"

func labelNotFound() error { return httpapi.NotFound("label") }

// fold is the form in which two label names are "the same name": Unicode case folding
// ("VIP", "vip", "Vip"; "STRASSE", "straße") over the composed form, so that an accent typed
// as one code point or as two is one name.
func fold(s string) string { return cases.Fold().String(norm.NFC.String(s)) }

// checkLabelName trims name and adds its problems under field.
func checkLabelName(p *httpapi.Problems, field, name string) string {
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		p.Add(field, "is required")
	case len([]rune(name)) > MaxLabelNameLen:
		p.Add(field, "must be at most %d characters", MaxLabelNameLen)
	default:
		p.Text(field, name, text.Name)
	}
	return name
}

func labelTaken(id string) error {
	return httpapi.E(httpapi.KindConflict, "name_taken", "another label of this bot has this name (names are compared case-insensitively)").
		With("conflicting_id", id).Wrap(ErrNameTaken)
}

// CreateLabel adds a label to the bot. A name another label has (in any letter case) is 409
// name_taken with the other label's id; the bot's 1001st label is 409 limit_reached.
func (s *Service) CreateLabel(ctx context.Context, bot, name string) (Label, error) {
	var p httpapi.Problems
	name = checkLabelName(&p, "name", name)
	if err := p.Err(); err != nil {
		return Label{}, err
	}
	now := s.now()
	l := Label{ID: ids.At("lbl", now), Name: name, Revision: 1, CreatedAt: stamp(now), UpdatedAt: stamp(now)}
	data, err := store.Encode(l)
	if err != nil {
		return Label{}, err
	}
	ref, err := nameItem(labelNameKey(bot, fold(name)), l.ID)
	if err != nil {
		return Label{}, err
	}
	err = store.Counted(ctx, s.store, countKey(bot, labelsCounter), +1, func(c store.Counter) error {
		if c.Count >= MaxLabelsPerBot {
			return limitReached("a bot may have at most %d labels; delete one first", MaxLabelsPerBot)
		}
		err := s.store.Transact(ctx, []store.Write{
			c.Write,
			store.PutOp(store.Item{Key: labelKey(bot, l.ID), Data: data, Revision: 1}, store.MustNotExist),
			store.PutOp(ref, store.MustNotExist),
		})
		if failedAt(err) == 2 {
			holder, herr := s.nameHolder(ctx, ref.Key)
			if herr != nil && !errors.Is(herr, store.ErrNotFound) {
				return herr
			}
			return labelTaken(holder)
		}
		return err
	})
	if err != nil {
		return Label{}, fmt.Errorf("create label: %w", err)
	}
	return l, nil
}

// GetLabel returns one label of the bot. A malformed id is not found without a lookup.
func (s *Service) GetLabel(ctx context.Context, bot, id string) (Label, error) {
	if !ids.Valid("lbl", id) {
		return Label{}, labelNotFound()
	}
	it, err := s.store.Get(ctx, labelKey(bot, id))
	if errors.Is(err, store.ErrNotFound) {
		return Label{}, labelNotFound()
	}
	if err != nil {
		return Label{}, err
	}
	l, err := store.Decode[Label](it)
	l.Revision = it.Revision
	return l, err
}

// ListLabels returns one page of the bot's labels, oldest first.
func (s *Service) ListLabels(ctx context.Context, bot string, limit int, cursor string) ([]Label, string, error) {
	page, err := s.store.Query(ctx, store.Query{PK: labelsPartition(bot), Limit: limit, Cursor: cursor})
	if err != nil {
		return nil, "", err
	}
	out, err := decodeLabels(page.Items)
	return out, page.Next, err
}

// Labels returns every label of the bot, oldest first (at most MaxLabelsPerBot).
func (s *Service) Labels(ctx context.Context, bot string) ([]Label, error) {
	items, err := s.queryAll(ctx, store.Query{PK: labelsPartition(bot)})
	if err != nil {
		return nil, err
	}
	return decodeLabels(items)
}

func decodeLabels(items []store.Item) ([]Label, error) {
	out := make([]Label, 0, len(items))
	for _, it := range items {
		l, err := store.Decode[Label](it)
		if err != nil {
			return nil, err
		}
		l.Revision = it.Revision
		out = append(out, l)
	}
	return out, nil
}

// RenameLabel gives a label a new name if its revision is still expected. Subscribers keep
// the label: they hold its id.
func (s *Service) RenameLabel(ctx context.Context, bot, id string, expected int64, name string) (Label, error) {
	l, err := s.GetLabel(ctx, bot, id)
	if err != nil {
		return Label{}, err
	}
	var p httpapi.Problems
	name = checkLabelName(&p, "name", name)
	if err := p.Err(); err != nil {
		return Label{}, err
	}
	if l.Revision != expected {
		return Label{}, httpapi.StaleRevision(l.Revision)
	}
	if name == l.Name {
		return l, nil // nothing changes, so no new revision
	}
	oldFold, newFold := fold(l.Name), fold(name)
	l.Name = name
	l.Revision++
	l.UpdatedAt = stamp(s.now())
	data, err := store.Encode(l)
	if err != nil {
		return Label{}, err
	}
	// The revision condition, not the read above, is what enforces expected_revision.
	writes := []store.Write{store.PutOp(store.Item{Key: labelKey(bot, id), Data: data, Revision: l.Revision}, store.RevisionIs(expected))}
	if newFold != oldFold {
		ref, err := nameItem(labelNameKey(bot, newFold), id)
		if err != nil {
			return Label{}, err
		}
		writes = append(writes, store.PutOp(ref, store.MustNotExist), store.DeleteOp(labelNameKey(bot, oldFold), store.Always))
	}
	err = s.store.Transact(ctx, writes)
	switch failedAt(err) {
	case -1:
	case 0:
		cur, gerr := s.GetLabel(ctx, bot, id)
		if gerr != nil {
			return Label{}, gerr
		}
		return Label{}, httpapi.StaleRevision(cur.Revision)
	case 1:
		holder, herr := s.nameHolder(ctx, labelNameKey(bot, newFold))
		if herr != nil && !errors.Is(herr, store.ErrNotFound) {
			return Label{}, herr
		}
		return Label{}, labelTaken(holder)
	}
	if err != nil {
		return Label{}, fmt.Errorf("rename label: %w", err)
	}
	return l, nil
}

// DeleteLabel deletes a label (at revision expected, when given) and starts its removal from
// every subscriber that has it. The label disappears from every response at once; the
// stored memberships are removed in the background (docs/subscribers.md). Deleting a label
// whose removal is still under way succeeds again and makes sure the removal runs.
func (s *Service) DeleteLabel(ctx context.Context, bot, id string, expected *int64) error {
	if !ids.Valid("lbl", id) {
		return labelNotFound()
	}
	for try := range attempts {
		if err := pause(ctx, try); err != nil {
			return err
		}
		l, err := s.GetLabel(ctx, bot, id)
		if isNotFound(err) {
			if m, gerr := s.goneMarker(ctx, bot, id); gerr == nil && !m.Done {
				return s.startPurge(ctx, jobPurgeLabel, bot, id)
			}
			return err
		}
		if err != nil {
			return err
		}
		if expected != nil && l.Revision != *expected {
			return httpapi.StaleRevision(l.Revision)
		}
		marker := store.Item{Key: labelGoneKey(bot, id), Revision: 1}
		err = store.Counted(ctx, s.store, countKey(bot, labelsCounter), -1, func(c store.Counter) error {
			return s.store.Transact(ctx, []store.Write{
				c.Write,
				store.DeleteOp(labelKey(bot, id), store.RevisionIs(l.Revision)),
				store.DeleteOp(labelNameKey(bot, fold(l.Name)), store.Always),
				store.PutOp(marker, store.Always),
			})
		})
		if failedAt(err) == 1 {
			continue // renamed or deleted meanwhile: read it again
		}
		if err != nil {
			return fmt.Errorf("delete label: %w", err)
		}
		return s.startPurge(ctx, jobPurgeLabel, bot, id)
	}
	return busy("label " + id)
}

// isNotFound reports a 404 from this package.
func isNotFound(err error) bool {
	var he *httpapi.Error
	return errors.As(err, &he) && he.Kind == httpapi.KindNotFound
}

// EnsureLabels returns the id of the label of each name (matched case-insensitively),
// creating the labels that do not exist yet. The map's keys are the names as given.
func (s *Service) EnsureLabels(ctx context.Context, bot string, names []string) (map[string]string, error) {
	var p httpapi.Problems
	trimmed := make([]string, len(names))
	for i, n := range names {
		trimmed[i] = checkLabelName(&p, fmt.Sprintf("names[%d]", i), n)
	}
	if err := p.Err(); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(names))
	byFold := map[string]string{}
	for i, name := range trimmed {
		f := fold(name)
		if id, ok := byFold[f]; ok {
			out[names[i]] = id
			continue
		}
		id, err := s.ensureLabel(ctx, bot, name)
		if err != nil {
			return nil, err
		}
		byFold[f] = id
		out[names[i]] = id
	}
	return out, nil
}

func (s *Service) ensureLabel(ctx context.Context, bot, name string) (string, error) {
	for try := range attempts {
		if err := pause(ctx, try); err != nil {
			return "", err
		}
		id, err := s.nameHolder(ctx, labelNameKey(bot, fold(name)))
		if err == nil {
			return id, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return "", err
		}
		l, err := s.CreateLabel(ctx, bot, name)
		if errors.Is(err, ErrNameTaken) {
			continue // created meanwhile by someone else: read its id
		}
		return l.ID, err
	}
	return "", busy("label name " + name)
}

// LabelNamed returns the id of the bot's label named name, compared without regard to case
// (the tester label of test sends, looked up by its documented name), or "" when it has none.
func (s *Service) LabelNamed(ctx context.Context, bot, name string) (string, error) {
	labels, err := s.Labels(ctx, bot)
	if err != nil {
		return "", err
	}
	for _, l := range labels {
		if strings.EqualFold(l.Name, name) {
			return l.ID, nil
		}
	}
	return "", nil
}
