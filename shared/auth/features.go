package auth

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/botplatform/api/shared/store"
)

// Feature is an account-level entitlement: a plan feature the account pays for, or a rollout
// feature switched on for the account while it is being introduced.
type Feature string

// Plan features. A route that needs one answers 402 feature_not_in_plan when the account's
// plan lacks it.
const (
	FeatureBroadcasts     Feature = "broadcasts"
	FeatureEmailCampaigns Feature = "email_campaigns"
	FeaturePopups         Feature = "popups"
	FeatureWebPush        Feature = "web_push"
	FeatureCustomerSDK    Feature = "customer_sdk"
	FeatureCRM            Feature = "crm"
	FeatureManagedAI      Feature = "managed_ai"
	FeatureAnalytics      Feature = "analytics"
)

// Rollout features. A route that needs one answers 403 feature_not_enabled unless the
// feature is enabled for the account: unassigned means off (fail closed).
const (
	RolloutCopilot          Feature = "copilot"
	RolloutFlowIntelligence Feature = "flow_intelligence"
	RolloutReplay           Feature = "replay"
	RolloutPlaybooks        Feature = "playbooks"
)

// PlanFeatures is the catalog of plan features, in a stable order. An account without an
// explicit plan has all of them (the standard plan); `admin account plan` narrows it.
var PlanFeatures = []Feature{FeatureAnalytics, FeatureBroadcasts, FeatureCRM, FeatureCustomerSDK,
	FeatureEmailCampaigns, FeatureManagedAI, FeaturePopups, FeatureWebPush}

// RolloutFeatures is the catalog of rollout features. None is on until enabled.
var RolloutFeatures = []Feature{RolloutCopilot, RolloutFlowIntelligence, RolloutPlaybooks, RolloutReplay}

// Entitlements are what an account may use beyond scopes and rights. They travel with the
// Principal, so a change reaches tokens in use within CacheTTL.
type Entitlements struct {
	// Plan lists the plan's features; nil means the standard plan (every plan feature).
	Plan []Feature `json:"plan,omitempty"`
	// Rollout lists the rollout features enabled for the account.
	Rollout []Feature `json:"rollout,omitempty"`
	// PaidBroadcastBots are the bots whose paid broadcasts are enabled.
	PaidBroadcastBots []string `json:"paid_broadcast_bots,omitempty"`
}

// InPlan reports whether the plan includes f.
func (e Entitlements) InPlan(f Feature) bool {
	if e.Plan == nil {
		return slices.Contains(PlanFeatures, f)
	}
	return slices.Contains(e.Plan, f)
}

// Enabled reports whether the rollout feature f is on.
func (e Entitlements) Enabled(f Feature) bool { return slices.Contains(e.Rollout, f) }

// PaidBroadcasts reports whether paid broadcasts are enabled for bot.
func (e Entitlements) PaidBroadcasts(bot string) bool {
	return slices.Contains(e.PaidBroadcastBots, bot)
}

// ParseFeatures parses a comma-separated list against a catalog ("" is the empty list).
// Unknown names are an error that lists the catalog; duplicates are dropped; the result is sorted.
func ParseFeatures(list string, catalog []Feature) ([]Feature, error) {
	out := []Feature{}
	for _, name := range strings.Split(list, ",") {
		f := Feature(strings.TrimSpace(name))
		if f == "" {
			continue
		}
		if !slices.Contains(catalog, f) {
			names := make([]string, len(catalog))
			for i, c := range catalog {
				names[i] = string(c)
			}
			return nil, fmt.Errorf("%w: unknown feature %q; known: %s", ErrInvalidRequest, f, strings.Join(names, ", "))
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out, nil
}

// SetPlan replaces the account's plan features.
func (s *Service) SetPlan(ctx context.Context, account string, features []Feature) (Account, error) {
	return s.updateAccount(ctx, account, func(a *Account) { a.Entitlements.Plan = slices.Clone(features) })
}

// SetRollout enables and disables rollout features of the account.
func (s *Service) SetRollout(ctx context.Context, account string, enable, disable []Feature) (Account, error) {
	return s.updateAccount(ctx, account, func(a *Account) {
		on := slices.DeleteFunc(slices.Clone(a.Entitlements.Rollout), func(f Feature) bool { return slices.Contains(disable, f) })
		for _, f := range enable {
			if !slices.Contains(on, f) {
				on = append(on, f)
			}
		}
		slices.Sort(on)
		a.Entitlements.Rollout = on
	})
}

// SetPaidBroadcasts enables or disables paid broadcasts for one bot of the account.
func (s *Service) SetPaidBroadcasts(ctx context.Context, account, bot string, enabled bool) (Account, error) {
	return s.updateAccount(ctx, account, func(a *Account) {
		bots := slices.DeleteFunc(slices.Clone(a.Entitlements.PaidBroadcastBots), func(b string) bool { return b == bot })
		if enabled {
			bots = append(bots, bot)
			slices.Sort(bots)
		}
		a.Entitlements.PaidBroadcastBots = bots
	})
}

// updateAccount applies change to the stored account under a revision condition, reading
// again when another writer got there first.
func (s *Service) updateAccount(ctx context.Context, account string, change func(*Account)) (Account, error) {
	for attempt := 0; attempt < 5; attempt++ {
		it, err := s.store.Get(ctx, accountKey(account))
		if err != nil {
			return Account{}, notFound(err)
		}
		a, err := store.Decode[Account](it)
		if err != nil {
			return Account{}, err
		}
		change(&a)
		b, err := store.Encode(a)
		if err != nil {
			return Account{}, err
		}
		err = s.store.Put(ctx, store.Item{Key: it.Key, Data: b, Revision: it.Revision + 1}, store.RevisionIs(it.Revision))
		if errors.Is(err, store.ErrConditionFailed) {
			continue
		}
		if err != nil {
			return Account{}, fmt.Errorf("update account: %w", err)
		}
		return a, nil
	}
	return Account{}, fmt.Errorf("update account: %w", store.ErrUnavailable)
}
