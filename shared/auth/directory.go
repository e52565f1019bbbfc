package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

// Account is a customer: the tenant boundary no token can cross.
type Account struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	OwnerUserID string    `json:"owner_user_id"`
	CreatedAt   time.Time `json:"created_at"`
	// Entitlements are the account's plan, rollout and paid-broadcast bots.
	Entitlements Entitlements `json:"entitlements"`
}

// User is a member of an account.
type User struct {
	ID        string `json:"id"`
	AccountID string `json:"account_id"`
	Name      string `json:"name"`
	Role      Role   `json:"role"`
	// Rights hold on every bot of the account, present and future.
	Rights RightSet `json:"rights"`
	// BotRights add rights on individual bots.
	BotRights map[string]RightSet `json:"bot_rights,omitempty"`
	CreatedAt time.Time           `json:"created_at"`
}

// CreateAccount creates an account and its owner user in one transaction.
func (s *Service) CreateAccount(ctx context.Context, name string) (Account, User, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return Account{}, User{}, fmt.Errorf("%w: account name is required", ErrInvalidRequest)
	}
	now := s.clock()
	acct := Account{ID: ids.At("acct", now), Name: name, CreatedAt: stamp(now)}
	owner := User{ID: ids.At("usr", now), Name: "Owner", Role: RoleOwner, Rights: AllRightsSet, CreatedAt: stamp(now)}
	acct.OwnerUserID, owner.AccountID = owner.ID, acct.ID
	ab, err := store.Encode(acct)
	if err != nil {
		return Account{}, User{}, err
	}
	ub, err := store.Encode(owner)
	if err != nil {
		return Account{}, User{}, err
	}
	err = s.store.Transact(ctx, []store.Write{
		store.PutOp(store.Item{Key: accountKey(acct.ID), Data: ab, Revision: 1}, store.MustNotExist),
		store.PutOp(store.Item{Key: userKey(acct.ID, owner.ID), Data: ub, Revision: 1}, store.MustNotExist),
	})
	if err != nil {
		return Account{}, User{}, fmt.Errorf("create account: %w", err)
	}
	return acct, owner, nil
}

// Account returns an account or ErrNotFound.
func (s *Service) Account(ctx context.Context, id string) (Account, error) {
	it, err := s.store.Get(ctx, accountKey(id))
	if err != nil {
		return Account{}, notFound(err)
	}
	return store.Decode[Account](it)
}

// CreateUser adds a member with the given rights on every bot of the account.
func (s *Service) CreateUser(ctx context.Context, account, name string, rights RightSet) (User, error) {
	now := s.clock()
	u := User{ID: ids.At("usr", now), AccountID: account, Name: strings.TrimSpace(name), Role: RoleMember, Rights: rights, CreatedAt: stamp(now)}
	if u.Name == "" {
		u.Name = "Member"
	}
	b, err := store.Encode(u)
	if err != nil {
		return User{}, err
	}
	err = s.store.Transact(ctx, []store.Write{
		store.CheckOp(accountKey(account), store.MustExist),
		store.PutOp(store.Item{Key: userKey(account, u.ID), Data: b, Revision: 1}, store.MustNotExist),
	})
	if err != nil {
		return User{}, fmt.Errorf("create user: %w", mapCond(err))
	}
	return u, nil
}

// User returns a user of the account or ErrNotFound.
func (s *Service) User(ctx context.Context, account, id string) (User, error) {
	it, err := s.store.Get(ctx, userKey(account, id))
	if err != nil {
		return User{}, notFound(err)
	}
	return store.Decode[User](it)
}

// SetBotRights replaces the rights the user holds on one bot, beyond the account-wide ones
// (an empty set removes the grant). Who may call it is the caller's concern: the admin CLI.
// Authenticated principals see the change within CacheTTL.
func (s *Service) SetBotRights(ctx context.Context, account, user, bot string, rights RightSet) (User, error) {
	for attempt := 0; attempt < 5; attempt++ {
		it, err := s.store.Get(ctx, userKey(account, user))
		if err != nil {
			return User{}, notFound(err)
		}
		u, err := store.Decode[User](it)
		if err != nil {
			return User{}, err
		}
		if u.BotRights == nil {
			u.BotRights = map[string]RightSet{}
		}
		if rights == 0 {
			delete(u.BotRights, bot)
		} else {
			u.BotRights[bot] = rights
		}
		b, err := store.Encode(u)
		if err != nil {
			return User{}, err
		}
		err = s.store.Put(ctx, store.Item{Key: it.Key, Data: b, Revision: it.Revision + 1}, store.RevisionIs(it.Revision))
		if errors.Is(err, store.ErrConditionFailed) {
			continue // changed meanwhile: read again
		}
		if err != nil {
			return User{}, fmt.Errorf("set bot rights: %w", err)
		}
		return u, nil
	}
	return User{}, fmt.Errorf("set bot rights: %w", store.ErrUnavailable)
}
