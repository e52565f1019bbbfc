package playbooks

import (
	"context"
	"errors"

	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

// InstallState returns the bot and status of the account's install id, or a 404 error when
// the account has no such install. Other families (onboarding, through its wiring) use it to
// check an install id they are given, without the playbooks service.
func InstallState(ctx context.Context, st store.Store, account, id string) (bot, status string, err error) {
	if !ids.Valid(idPrefix, id) {
		return "", "", installNotFound()
	}
	it, err := st.Get(ctx, pointerKey(account, id))
	if errors.Is(err, store.ErrNotFound) {
		return "", "", installNotFound()
	}
	if err != nil {
		return "", "", err
	}
	ptr, err := store.Decode[pointer](it)
	if err != nil {
		return "", "", err
	}
	it, err = st.Get(ctx, installKey(ptr.BotID, id))
	if errors.Is(err, store.ErrNotFound) {
		return "", "", installNotFound() // deleted since the pointer was read
	}
	if err != nil {
		return "", "", err
	}
	rec, err := store.Decode[record](it)
	if err != nil {
		return "", "", err
	}
	return ptr.BotID, rec.Status, nil
}
