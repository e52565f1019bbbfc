package flowintel

import (
	"context"
	"errors"
	"time"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
)

// The sampling settings.
const (
	SamplingEnabled  = "enabled"
	SamplingDisabled = "disabled"
)

// Bounds of the policy's retention: traces live 30 days (runtime.Retention), so a sample can
// be no older.
const (
	MinRetentionDays     = 1
	MaxRetentionDays     = 30
	DefaultRetentionDays = 30
)

// Policy is the account's flow intelligence policy: whether example runs may be shown
// (samples), whether samples show what triggered the run beyond its type, and how old a
// run may be to be shown. It is the account's, so every bot of the account has the same.
type Policy struct {
	Sampling             string `json:"sampling"`
	SampleTriggerDetails bool   `json:"sample_trigger_details"`
	RetentionDays        int    `json:"retention_days"`
	// Revision is 0 for the default policy of an account that never saved one.
	Revision  int64      `json:"revision"`
	UpdatedAt *time.Time `json:"updated_at"`
}

// DefaultPolicy is the policy of an account that never saved one.
func DefaultPolicy() Policy {
	return Policy{Sampling: SamplingEnabled, RetentionDays: DefaultRetentionDays}
}

// PolicyRequest is the body of PUT .../flow-intelligence/policy: the whole policy.
type PolicyRequest struct {
	Sampling             *string `json:"sampling"`
	SampleTriggerDetails *bool   `json:"sample_trigger_details"`
	RetentionDays        *int    `json:"retention_days"`
	// ExpectedRevision is the revision read; leave it out only to save an account's first
	// policy (then a stored one is 409 stale_revision).
	ExpectedRevision *int64 `json:"expected_revision"`
}

// Validate checks every member.
func (r *PolicyRequest) Validate() error {
	var p httpapi.Problems
	switch {
	case r.Sampling == nil:
		p.Add("sampling", "is required: enabled or disabled")
	case *r.Sampling != SamplingEnabled && *r.Sampling != SamplingDisabled:
		p.Add("sampling", "must be enabled or disabled")
	}
	if r.SampleTriggerDetails == nil {
		p.Add("sample_trigger_details", "is required: true or false")
	}
	switch {
	case r.RetentionDays == nil:
		p.Add("retention_days", "is required: %d to %d", MinRetentionDays, MaxRetentionDays)
	case *r.RetentionDays < MinRetentionDays || *r.RetentionDays > MaxRetentionDays:
		p.Add("retention_days", "must be %d to %d (traces are kept %d days)", MinRetentionDays, MaxRetentionDays, MaxRetentionDays)
	}
	return p.Err()
}

// Policy returns the account's policy (the default until one is saved).
func (s *Service) Policy(ctx context.Context, acct string) (Policy, error) {
	it, err := s.store.Get(ctx, policyKey(acct))
	if errors.Is(err, store.ErrNotFound) {
		return DefaultPolicy(), nil
	}
	if err != nil {
		return Policy{}, err
	}
	p, err := store.Decode[Policy](it)
	p.Revision = it.Revision
	return p, err
}

// SetPolicy replaces the account's policy: 409 stale_revision when expected_revision is not
// the stored one (or is left out while one is stored).
func (s *Service) SetPolicy(ctx context.Context, acct string, req PolicyRequest) (Policy, error) {
	now := s.now().UTC().Truncate(time.Second)
	p := Policy{Sampling: *req.Sampling, SampleTriggerDetails: *req.SampleTriggerDetails, RetentionDays: *req.RetentionDays, UpdatedAt: &now}
	cond, rev := store.MustNotExist, int64(1)
	if req.ExpectedRevision != nil {
		cond, rev = store.RevisionIs(*req.ExpectedRevision), *req.ExpectedRevision+1
	}
	p.Revision = rev
	data, err := store.Encode(p)
	if err != nil {
		return Policy{}, err
	}
	err = s.store.Put(ctx, store.Item{Key: policyKey(acct), Revision: rev, Data: data}, cond)
	if errors.Is(err, store.ErrConditionFailed) {
		cur, gerr := s.Policy(ctx, acct)
		if gerr != nil {
			return Policy{}, gerr
		}
		return Policy{}, httpapi.StaleRevision(cur.Revision)
	}
	if err != nil {
		return Policy{}, err
	}
	return p, nil
}
