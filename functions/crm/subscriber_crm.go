package crm

import (
	"context"
	"errors"
	"time"

	crmapi "github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
)

// Transcripts reads what a subscriber's conversations were, for a note on their CRM record
// (functions/runtime's traces, adapted by the wiring).
type Transcripts interface {
	// Transcript returns the subscriber's last runs (at most runs of them), oldest first,
	// as plain text, and how many runs it covers. What the subscriber sent is never stored
	// by the platform: it shows as its kind and length.
	Transcript(ctx context.Context, bot, sub string, runs int) (text string, covered int, err error)
}

// The states of a subscriber at a connection.
const (
	SubscriberSynced    = "synced"     // the record is linked and the last sync succeeded
	SubscriberFailed    = "failed"     // the last sync failed (Error says why)
	SubscriberNotSynced = "not_synced" // never synced with this connection
)

// SubscriberStatus is a subscriber's state at one CRM connection.
type SubscriberStatus struct {
	ConnectionID    string     `json:"connection_id"`
	Provider        string     `json:"provider"`
	Status          string     `json:"status"`
	Object          string     `json:"object,omitempty"`
	RecordID        string     `json:"record_id,omitempty"`
	MappingRevision int64      `json:"mapping_revision,omitempty"`
	SyncedAt        *time.Time `json:"synced_at,omitempty"`
	OpenConflicts   []string   `json:"open_conflicts"`
	// Deal is the deal the sync opened for the record, as of the last sync or reconcile
	// (GET .../crm/deals reads the record's deals from the CRM now).
	Deal  *crmapi.Deal `json:"deal,omitempty"`
	Error *RecordError `json:"error,omitempty"`
}

// maxConnectionsRead bounds the connections a subscriber's status reads (a bot connects a
// handful of CRM accounts).
const maxConnectionsRead = 100

// subscriber checks that sub is one of the bot's subscribers.
func (s *Service) subscriber(ctx context.Context, bot, sub string) (Person, error) {
	if s.subscribers == nil {
		return Person{}, errNoSubscribers()
	}
	if !ids.Valid("sub", sub) {
		return Person{}, httpapi.NotFound("subscriber")
	}
	return s.subscribers.Subscriber(ctx, bot, sub)
}

// SubscriberCRM returns the subscriber's state at each of the bot's CRM connections.
func (s *Service) SubscriberCRM(ctx context.Context, bot, sub string) ([]SubscriberStatus, error) {
	if _, err := s.subscriber(ctx, bot, sub); err != nil {
		return nil, err
	}
	conns, _, err := s.List(ctx, bot, maxConnectionsRead, "")
	if err != nil {
		return nil, err
	}
	out := make([]SubscriberStatus, 0, len(conns))
	for _, c := range conns {
		st := SubscriberStatus{ConnectionID: c.ID, Provider: c.Provider, Status: SubscriberNotSynced, OpenConflicts: []string{}}
		y := &syncer{s: s, bot: bot, c: c}
		l, err := y.loadLink(ctx, sub)
		if err != nil {
			return nil, err
		}
		if l.rev > 0 {
			st.Object, st.RecordID, st.MappingRevision, st.Deal, st.Error = l.Object, l.RecordID, l.MappingRevision, l.Deal, l.Error
			if !l.SyncedAt.IsZero() {
				at := l.SyncedAt
				st.SyncedAt = &at
			}
			if l.Conflicts != nil {
				st.OpenConflicts = l.Conflicts
			}
			switch {
			case l.Error != nil:
				st.Status = SubscriberFailed
			case l.RecordID != "":
				st.Status = SubscriberSynced
			}
		}
		out = append(out, st)
	}
	return out, nil
}

// SubscriberSyncRequest is the body of POST .../subscribers/{subscriberID}/crm/sync.
type SubscriberSyncRequest struct {
	// ConnectionID narrows the sync to one connection; "" syncs with every connection that
	// has a mapping.
	ConnectionID string `json:"connection_id"`
}

// SyncResult is what a manual sync did at one connection.
type SyncResult struct {
	ConnectionID string `json:"connection_id"`
	Outcome      string `json:"outcome"`
	RecordID     string `json:"record_id,omitempty"`
	// DealID is the record's deal, when the mapping has one; DealOpened is true when this
	// sync created it.
	DealID     string       `json:"deal_id,omitempty"`
	DealOpened bool         `json:"deal_opened,omitempty"`
	Error      *RecordError `json:"error,omitempty"`
}

// SyncSubscriber syncs one subscriber now, as a job would: with each connection that has a
// mapping (or the one named, which must have one).
func (s *Service) SyncSubscriber(ctx context.Context, bot, sub string, req SubscriberSyncRequest) ([]SyncResult, error) {
	person, err := s.subscriber(ctx, bot, sub)
	if err != nil {
		return nil, err
	}
	var conns []Connection
	if req.ConnectionID != "" {
		c, err := s.load(ctx, bot, req.ConnectionID)
		if err != nil {
			return nil, err
		}
		conns = []Connection{c}
	} else if conns, _, err = s.List(ctx, bot, maxConnectionsRead, ""); err != nil {
		return nil, err
	}
	out := []SyncResult{}
	for _, c := range conns {
		m, found, err := s.currentMapping(ctx, bot, c.ID)
		if err != nil {
			return nil, err
		}
		if !found {
			if req.ConnectionID != "" {
				return nil, httpapi.E(httpapi.KindUnprocessable, "mapping_required", "save the connection's mapping (PUT .../mapping) before syncing")
			}
			continue
		}
		y, err := s.newSyncer(ctx, bot, c, m)
		if err != nil {
			return nil, err
		}
		r := y.push(ctx, person)
		if r.fatal != nil {
			return nil, s.callProblem(ctx, bot, c.ID, r.fatal)
		}
		out = append(out, SyncResult{ConnectionID: c.ID, Outcome: r.Outcome, RecordID: r.RecordID, DealID: r.DealID,
			DealOpened: r.DealOpened, Error: r.Error})
	}
	return out, nil
}

// RecordDeals are the deals of a subscriber's record at one connection, as the CRM answers
// now.
type RecordDeals struct {
	ConnectionID string        `json:"connection_id"`
	Provider     string        `json:"provider"`
	Object       string        `json:"object"`
	RecordID     string        `json:"record_id"`
	Deals        []crmapi.Deal `json:"deals"`
}

// SubscriberDeals reads the deals of the subscriber's linked records from each CRM (or the
// connection named): every deal associated with the record, whoever opened it, most
// recently changed first. A connection the subscriber is not linked at is left out.
func (s *Service) SubscriberDeals(ctx context.Context, bot, sub, conn string) ([]RecordDeals, error) {
	if _, err := s.subscriber(ctx, bot, sub); err != nil {
		return nil, err
	}
	var conns []Connection
	if conn != "" {
		c, err := s.load(ctx, bot, conn)
		if err != nil {
			return nil, err
		}
		conns = []Connection{c}
	} else {
		var err error
		if conns, _, err = s.List(ctx, bot, maxConnectionsRead, ""); err != nil {
			return nil, err
		}
	}
	out := []RecordDeals{}
	for _, c := range conns {
		y := &syncer{s: s, bot: bot, c: c}
		l, err := y.loadLink(ctx, sub)
		if err != nil {
			return nil, err
		}
		if l.RecordID == "" {
			continue
		}
		cl, err := s.clientOf(ctx, bot, c)
		if err != nil {
			return nil, err
		}
		var deals []crmapi.Deal
		err = retryCall(ctx, func() error {
			var err error
			deals, err = cl.Deals(ctx, l.Object, l.RecordID)
			return err
		})
		if errors.Is(err, crmapi.ErrNotFound) {
			deals, err = nil, nil // the record is gone at the CRM: it has no deals
		}
		if err != nil {
			return nil, s.callProblem(ctx, bot, c.ID, err)
		}
		if deals == nil {
			deals = []crmapi.Deal{}
		}
		out = append(out, RecordDeals{ConnectionID: c.ID, Provider: c.Provider, Object: l.Object, RecordID: l.RecordID, Deals: deals})
	}
	return out, nil
}

// NoteRequest is the body of POST .../subscribers/{subscriberID}/crm/notes.
type NoteRequest struct {
	ConnectionID string `json:"connection_id"`
	// Runs is how many of the subscriber's last conversation runs the note covers (default
	// DefaultNoteRuns, at most MaxNoteRuns).
	Runs int `json:"runs"`
}

// Bounds of a conversation note.
const (
	DefaultNoteRuns = 10
	MaxNoteRuns     = 50
)

// Validate checks the request's form.
func (r *NoteRequest) Validate() error {
	var p httpapi.Problems
	if r.ConnectionID == "" {
		p.Add("connection_id", "is required: the connection whose record gets the note")
	}
	if r.Runs < 0 || r.Runs > MaxNoteRuns {
		p.Add("runs", "must be between 1 and %d", MaxNoteRuns)
	}
	return p.Err()
}

// Note is a conversation note added to a subscriber's CRM record.
type Note struct {
	ConnectionID string    `json:"connection_id"`
	Object       string    `json:"object"`
	RecordID     string    `json:"record_id"`
	Runs         int       `json:"runs"`
	Characters   int       `json:"characters"`
	CreatedAt    time.Time `json:"created_at"`
}

// ExportNote adds the subscriber's recent conversation, as a transcript, to their CRM
// record: the linked one, else the one their key value matches (the subscriber is synced
// first when the CRM has none).
func (s *Service) ExportNote(ctx context.Context, bot, sub string, req NoteRequest) (Note, error) {
	person, err := s.subscriber(ctx, bot, sub)
	if err != nil {
		return Note{}, err
	}
	c, err := s.load(ctx, bot, req.ConnectionID)
	if err != nil {
		return Note{}, err
	}
	if s.transcripts == nil {
		return Note{}, httpapi.E(httpapi.KindUnavailable, "transcripts_unavailable", "this deployment's CRM service cannot read conversations")
	}
	m, found, err := s.currentMapping(ctx, bot, c.ID)
	if err != nil {
		return Note{}, err
	}
	if !found {
		return Note{}, httpapi.E(httpapi.KindUnprocessable, "mapping_required", "save the connection's mapping (PUT .../mapping) first: it says which record is the subscriber's")
	}
	runs := req.Runs
	if runs == 0 {
		runs = DefaultNoteRuns
	}
	text, covered, err := s.transcripts.Transcript(ctx, bot, sub, runs)
	if err != nil {
		return Note{}, err
	}
	if covered == 0 {
		return Note{}, httpapi.E(httpapi.KindUnprocessable, "no_conversation", "the subscriber has no conversation to export yet")
	}
	y, err := s.newSyncer(ctx, bot, c, m)
	if err != nil {
		return Note{}, err
	}
	l, err := y.loadLink(ctx, sub)
	if err != nil {
		return Note{}, err
	}
	recordID := ""
	if l.RecordID != "" && l.Object == m.Object {
		recordID = l.RecordID
	} else {
		r := y.push(ctx, person)
		switch {
		case r.fatal != nil:
			return Note{}, s.callProblem(ctx, bot, c.ID, r.fatal)
		case r.Outcome == OutcomeSkipped:
			return Note{}, httpapi.E(httpapi.KindUnprocessable, "missing_key", "the subscriber has no value their CRM record is matched by")
		case r.Outcome == OutcomeFailed && r.RecordID == "": // a refused deal leaves the record written
			return Note{}, httpapi.E(httpapi.KindUnprocessable, "crm_request_rejected", r.Error.Message)
		}
		recordID = r.RecordID
	}
	err = retryCall(ctx, func() error { return y.cl.AddNote(ctx, m.Object, recordID, text) })
	if err != nil {
		return Note{}, s.callProblem(ctx, bot, c.ID, err)
	}
	return Note{ConnectionID: c.ID, Object: m.Object, RecordID: recordID, Runs: covered, Characters: len([]rune(text)),
		CreatedAt: stamp(s.now())}, nil
}
