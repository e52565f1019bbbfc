package vk

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/botplatform/api/shared/channel"
)

// VK API error codes the adapter tells apart
// (https://dev.vk.com/en/reference/errors).
const (
	codeUnknown        = 1   // unknown error occurred
	codeAuth           = 5   // user authorization failed: the key is invalid or revoked
	codeTooMany        = 6   // too many requests per second
	codePermission     = 7   // permission to perform this action is denied
	codeFlood          = 9   // flood control: too many same actions
	codeInternal       = 10  // internal server error
	codeRuntime        = 13  // runtime error
	codeAccessDenied   = 15  // access denied (the key lacks the right)
	codeUserGone       = 18  // the user's page was deleted or banned
	codeGroupAuth      = 27  // group authorization failed
	codeAppAuth        = 28  // application authorization failed
	codeRateLimit      = 29  // the method's daily rate limit is reached
	codeParam          = 100 // a parameter is missing or invalid
	codeBlacklisted    = 900 // the user blacklisted the community
	codeCantSend       = 901 // the user has not allowed messages from the community
	codePrivacy        = 902 // the user's privacy settings forbid it
	codeNoChatAccess   = 917 // the community has no access to the conversation
	codeTooLongMessage = 914 // message is too long
)

// How long to wait after a rate-limit error: VK sends no Retry-After with its API errors.
var rateLimitWait = map[int]time.Duration{
	codeTooMany:   time.Second, // the limit is per second
	codeFlood:     time.Minute, // VK does not say how long; a minute avoids re-flooding
	codeRateLimit: time.Hour,   // a daily limit of the method
}

// mapError turns a failure of call or do into a *channel.Error of the right kind; nil stays nil.
func mapError(err error) error {
	if err == nil {
		return nil
	}
	var ce *channel.Error
	if errors.As(err, &ce) {
		return ce
	}
	var he *httpError
	if errors.As(err, &he) {
		e := &channel.Error{Kind: channel.ErrRejected, Provider: channel.VK, Code: "HTTP " + strconv.Itoa(he.Status),
			Message: http.StatusText(he.Status), RetryAfter: he.RetryAfter}
		switch {
		case he.Status == http.StatusTooManyRequests:
			e.Kind = channel.ErrRateLimited
			if e.RetryAfter == 0 {
				e.RetryAfter = time.Second
			}
		case he.Status >= 500:
			e.Kind = channel.ErrUnavailable
		}
		return e
	}
	var ve *apiError
	if !errors.As(err, &ve) {
		return &channel.Error{Kind: channel.ErrUnavailable, Provider: channel.VK, Message: err.Error()}
	}
	e := &channel.Error{Kind: channel.ErrRejected, Provider: channel.VK, Code: strconv.Itoa(ve.Code), Message: ve.Msg}
	switch ve.Code {
	case codeTooMany, codeFlood, codeRateLimit:
		e.Kind, e.RetryAfter = channel.ErrRateLimited, rateLimitWait[ve.Code]
	case codeCantSend, codePrivacy, codeBlacklisted, codeUserGone, codeNoChatAccess:
		e.Kind = channel.ErrBlocked
	case codeAuth, codeGroupAuth, codeAppAuth, codeAccessDenied, codePermission:
		e.Kind = channel.ErrInvalidCredentials
	case codeUnknown, codeInternal, codeRuntime:
		e.Kind = channel.ErrUnavailable
	}
	return e
}

// connectError maps a failure while connecting: a refusal of the key (or, for
// groups.getById, of a user's key: error 100) is ErrInvalidCredentials with a message that
// says what to fix.
func connectError(err error, invalid string) error {
	var ve *apiError
	if errors.As(err, &ve) && ve.Code == codeParam && invalid == notCommunityKey {
		return &channel.Error{Kind: channel.ErrInvalidCredentials, Provider: channel.VK, Code: strconv.Itoa(ve.Code), Message: invalid}
	}
	e := mapError(err).(*channel.Error)
	if errors.Is(e, channel.ErrInvalidCredentials) {
		e.Message = invalid + " (" + e.Message + ")"
	}
	return e
}
