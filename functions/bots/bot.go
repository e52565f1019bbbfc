// Package bots serves the bot routes (create, read, update, delete a bot and its settings)
// and the bot's API tokens, and tells the kernel which bots belong to which account.
package bots

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	_ "time/tzdata" // Lambda's provided.al2023 image has no zoneinfo; IANA names must still resolve

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/text"
)

// Bot is a chatbot of an account.
type Bot struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Settings  Settings  `json:"settings"`
	Revision  int64     `json:"revision"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// TimeZone is the bot's IANA time zone, for families that read times in it (popup schedules)
// from the bot the kernel loaded for the request (httpapi.LoadedBot).
func (b Bot) TimeZone() string { return b.Settings.Timezone }

// Settings are a bot's behaviour settings; docs/bots.md explains each and its default.
type Settings struct {
	// Timezone is an IANA zone name; schedules and quiet hours are read in it.
	Timezone string `json:"timezone"`
	// DefaultLocale is the BCP 47 tag used when a subscriber's locale is unknown or unsupported.
	DefaultLocale string `json:"default_locale"`
	// SupportedLocales are the locales the bot's content is written in; always contains DefaultLocale.
	SupportedLocales []string `json:"supported_locales"`
	// SessionTimeoutMinutes is how long a conversation stays open without messages.
	SessionTimeoutMinutes int `json:"session_timeout_minutes"`
}

// SettingsPatch is the request form of settings: every field optional, given fields replace.
type SettingsPatch struct {
	Timezone              *string   `json:"timezone"`
	DefaultLocale         *string   `json:"default_locale"`
	SupportedLocales      *[]string `json:"supported_locales"`
	SessionTimeoutMinutes *int      `json:"session_timeout_minutes"`
}

// Limits of bot fields.
const (
	MaxNameLen          = 100
	MaxSupportedLocales = 20
	MinSessionTimeout   = 1
	MaxSessionTimeout   = 7 * 24 * 60
)

// DefaultSettings are a new bot's settings before its create request's are applied.
func DefaultSettings() Settings {
	return Settings{Timezone: "UTC", DefaultLocale: "en", SupportedLocales: []string{"en"}, SessionTimeoutMinutes: 30}
}

// apply returns s with the patch's fields replaced. When the default locale changes and the
// supported list is not given, the new default joins the list rather than failing.
func (p *SettingsPatch) apply(s Settings) Settings {
	if p == nil {
		return s
	}
	s.SupportedLocales = slices.Clone(s.SupportedLocales)
	if p.Timezone != nil {
		s.Timezone = *p.Timezone
	}
	if p.SupportedLocales != nil {
		s.SupportedLocales = slices.Clone(*p.SupportedLocales)
	}
	if p.DefaultLocale != nil {
		s.DefaultLocale = *p.DefaultLocale
		if p.SupportedLocales == nil && !slices.Contains(s.SupportedLocales, s.DefaultLocale) {
			s.SupportedLocales = append(s.SupportedLocales, s.DefaultLocale)
		}
	}
	if p.SessionTimeoutMinutes != nil {
		s.SessionTimeoutMinutes = *p.SessionTimeoutMinutes
	}
	return s
}

// localeRe accepts the BCP 47 tags bots use in practice: language, optional script,
// optional region ("en", "pt-BR", "zh-Hant-TW", "es-419").
var localeRe = regexp.MustCompile(`^[a-z]{2,3}(-[A-Z][a-z]{3})?(-([A-Z]{2}|[0-9]{3}))?$`)

// check adds every problem of the settings to p, under the field path prefix.
func (s Settings) check(p *httpapi.Problems, prefix string) {
	if s.Timezone == "" {
		p.Add(prefix+"timezone", "must be an IANA time zone name such as Europe/Berlin")
	} else if _, err := time.LoadLocation(s.Timezone); err != nil || s.Timezone == "Local" {
		p.Add(prefix+"timezone", "unknown time zone %q; use an IANA name such as Europe/Berlin", s.Timezone)
	}
	if !localeRe.MatchString(s.DefaultLocale) {
		p.Add(prefix+"default_locale", "must be a BCP 47 tag such as en or pt-BR")
	}
	switch {
	case len(s.SupportedLocales) == 0:
		p.Add(prefix+"supported_locales", "must list at least one locale")
	case len(s.SupportedLocales) > MaxSupportedLocales:
		p.Add(prefix+"supported_locales", "must list at most %d locales", MaxSupportedLocales)
	}
	seen := map[string]bool{}
	for i, l := range s.SupportedLocales {
		switch {
		case !localeRe.MatchString(l):
			p.Add(fmt.Sprintf("%ssupported_locales[%d]", prefix, i), "must be a BCP 47 tag such as en or pt-BR")
		case seen[l]:
			p.Add(fmt.Sprintf("%ssupported_locales[%d]", prefix, i), "%q is listed twice", l)
		}
		seen[l] = true
	}
	if localeRe.MatchString(s.DefaultLocale) && len(s.SupportedLocales) > 0 && !seen[s.DefaultLocale] {
		p.Add(prefix+"supported_locales", "must contain default_locale %q", s.DefaultLocale)
	}
	if s.SessionTimeoutMinutes < MinSessionTimeout || s.SessionTimeoutMinutes > MaxSessionTimeout {
		p.Add(prefix+"session_timeout_minutes", "must be from %d to %d", MinSessionTimeout, MaxSessionTimeout)
	}
}

func checkName(p *httpapi.Problems, name string) string {
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		p.Add("name", "is required")
	case len([]rune(name)) > MaxNameLen:
		p.Add("name", "must be at most %d characters", MaxNameLen)
	default:
		p.Text("name", name, text.Name)
	}
	return name
}
