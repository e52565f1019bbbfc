package playbooks

import (
	"context"
	"errors"

	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

// InstallBot returns the bot of the account's install id, or a 404 error when the account
// has no such install. It reads the install's pointer only: other families (onboarding)
// use it to check an install id they are given, without the playbooks service.
func InstallBot(ctx context.Context, st store.Store, account, id string) (string, error) {
	if !ids.Valid(idPrefix, id) {
		return "", installNotFound()
	}
	it, err := st.Get(ctx, pointerKey(account, id))
	if errors.Is(err, store.ErrNotFound) {
		return "", installNotFound()
	}
	if err != nil {
		return "", err
	}
	ptr, err := store.Decode[pointer](it)
	if err != nil {
		return "", err
	}
	return ptr.BotID, nil
}
