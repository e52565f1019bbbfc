package crm

import (
	"context"
	"errors"
	"strings"

	crmapi "github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/store"
)

// needsDeal reports whether the subscriber's record still needs the mapping's deal: it is
// linked and has no deal in the mapping's pipeline. A deal opened once stays the
// subscriber's, won, lost or deleted at the CRM: a sync never opens a second one in the
// same pipeline.
func (y *syncer) needsDeal(l link) bool {
	return y.m.Deal != nil && l.RecordID != "" && (l.Deal == nil || l.Deal.Pipeline != y.m.Deal.Pipeline)
}

// openDeal opens (or finds open) the deal of the subscriber's linked record and keeps it in
// the link; outcome is what the record's write was. The stage field is written before the
// link, so that a failure in between is repeated whole: the repeat finds the deal the first
// call opened (OpenDeal reads the contact's associations) and writes the field again.
func (y *syncer) openDeal(ctx context.Context, person Person, key string, l link, outcome string) pushResult {
	in := crmapi.DealInput{Pipeline: y.m.Deal.Pipeline, Stage: y.m.Deal.Stage, Name: dealName(person, key)}
	var (
		d       crmapi.Deal
		created bool
	)
	err := retryCall(ctx, func() error {
		var err error
		d, created, err = y.cl.OpenDeal(ctx, y.m.Object, l.RecordID, in)
		return err
	})
	if err != nil {
		if fatal(err) {
			return pushResult{fatal: err}
		}
		re := recordError(err)
		re.Code, re.Message = "crm_deal_rejected", "the record is written but the CRM refused its deal: "+re.Message
		l.Error = re
		if err := y.saveLink(ctx, person.ID, l); err != nil && !errors.Is(err, store.ErrConditionFailed) {
			return pushResult{fatal: err}
		}
		return pushResult{Outcome: OutcomeFailed, RecordID: l.RecordID, Error: re}
	}
	if err := y.writeStage(ctx, person.ID, nil, d); err != nil {
		return pushResult{fatal: err}
	}
	ref, err := item(dealKey(y.bot, y.c.ID, d.ID), 1, recordRef{SubscriberID: person.ID})
	if err != nil {
		return pushResult{fatal: err}
	}
	l.Deal, l.Error = &d, nil
	if err := y.saveLink(ctx, person.ID, l, store.PutOp(ref, store.Always)); err != nil && !errors.Is(err, store.ErrConditionFailed) {
		return pushResult{fatal: err}
	}
	if created {
		outcome = OutcomeWritten
	}
	return pushResult{Outcome: outcome, RecordID: l.RecordID, DealID: d.ID, DealOpened: created}
}

// maxDealName bounds a deal's title (Salesforce's Opportunity.Name holds 120 characters).
const maxDealName = 120

// dealName is the title of a subscriber's deal: their name, or the value they are matched by.
func dealName(p Person, key string) string {
	name := strings.TrimSpace(p.Name)
	if name == "" {
		name = strings.TrimSpace(p.FirstName + " " + p.LastName)
	}
	if name == "" {
		name = key
	}
	if r := []rune(name); len(r) > maxDealName {
		name = string(r[:maxDealName])
	}
	return name
}

// stageText is what the mapping's stage field holds for d: its stage's label while it is
// open (the id when the pipeline no longer lists the stage), won or lost once closed.
func (y *syncer) stageText(d crmapi.Deal) string {
	if d.Status == crmapi.DealWon || d.Status == crmapi.DealLost {
		return d.Status
	}
	if label, ok := y.stages[d.Stage]; ok && d.Pipeline == y.m.Deal.Pipeline {
		return label
	}
	return d.Stage
}

// writeStage writes d's stage to the mapping's stage field, when it has one and the text
// differs from what old's was (nil: never written).
func (y *syncer) writeStage(ctx context.Context, sub string, old *crmapi.Deal, d crmapi.Deal) error {
	if y.m.Deal.StageField == "" {
		return nil
	}
	text := y.stageText(d)
	if old != nil && y.stageText(*old) == text {
		return nil
	}
	return y.s.subscribers.Write(ctx, y.bot, sub, Write{Fields: map[string]any{y.m.Deal.StageField: text}})
}

// pullDeal takes a changed deal into the link of the subscriber the sync opened it for (a
// deal the platform did not open is nobody's): the link's copy, and the stage field when
// the stage's text changed. It reports whether anything changed.
func (y *syncer) pullDeal(ctx context.Context, d crmapi.Deal) (bool, error) {
	ref, err := y.s.store.Get(ctx, dealKey(y.bot, y.c.ID, d.ID))
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	r, err := store.Decode[recordRef](ref)
	if err != nil {
		return false, err
	}
	l, err := y.loadLink(ctx, r.SubscriberID)
	if err != nil || l.Deal == nil || l.Deal.ID != d.ID {
		return false, err
	}
	if sameDeal(*l.Deal, d) {
		return false, nil
	}
	if err := y.writeStage(ctx, r.SubscriberID, l.Deal, d); err != nil {
		if isNotFound(err) {
			return false, nil // the subscriber is gone
		}
		return false, err
	}
	l.Deal = &d
	if err := y.saveLink(ctx, r.SubscriberID, l); err != nil {
		if errors.Is(err, store.ErrConditionFailed) {
			return false, nil // a sync of the subscriber came first: the next reconcile reads the deal again
		}
		return false, err
	}
	return true, nil
}

// sameDeal reports whether a and b hold the same values (the time of change aside).
func sameDeal(a, b crmapi.Deal) bool {
	sameAmount := (a.Amount == nil) == (b.Amount == nil) && (a.Amount == nil || *a.Amount == *b.Amount)
	return a.Name == b.Name && a.Pipeline == b.Pipeline && a.Stage == b.Stage && a.Status == b.Status &&
		sameAmount && a.Currency == b.Currency
}
