package reactions

import (
	"context"
	"fmt"

	"github.com/botplatform/api/shared/httpapi"
)

// Templates is the bot's message template catalog, which send_template steps are checked
// against when a reaction is published. The channels family owns it (of the channel types,
// only WhatsApp has templates); functions/platform adapts that family to it, and this
// package never imports it.
type Templates interface {
	// Catalog returns the stored catalog of the bot's channel with templates; ok is false
	// when the bot has no such channel.
	Catalog(ctx context.Context, bot string) (c Catalog, ok bool, err error)
}

// Catalog is the stored template catalog of one channel: a copy of the provider's, as
// current as the channel's last sync or status webhook.
type Catalog struct {
	ChannelID string
	Templates []CatalogTemplate
}

// CatalogTemplate is one template of a catalog, as much of it as publishing checks.
type CatalogTemplate struct {
	// Name and Language identify the template as WhatsApp does.
	Name, Language string
	// Status is the provider's review status in lower case (approved, pending, rejected, ...).
	Status string
	// BodyParams is how many body parameters a message of the template takes; -1 when the
	// stored components do not tell.
	BodyParams int
	// Unsupported names a part of the template that needs a parameter send_template steps do
	// not give (a media header, a header variable, a URL button's variable), "" when none.
	Unsupported string
}

// TemplateApproved is the status of a template the provider sends.
const TemplateApproved = "approved"

// WithTemplates makes publishing check send_template steps against the bot's template
// catalog, and returns s.
func (s *Service) WithTemplates(t Templates) *Service {
	s.templates = t
	return s
}

// checkTemplates checks the templates of send_template steps against the bot's catalog, when
// the bot has a channel with templates (without one every send_template step sends its
// fallback text or is skipped, so there is nothing to check). A template the catalog lacks,
// whose body takes another number of parameters than the step gives, or that needs
// parameters no step gives, cannot be sent: that is a flaw in r when blocking (a publish) and
// a warning otherwise (an import, a publish that publishes nothing new). A template that is
// not approved is a warning either way: its review may still approve it, and the run that
// sends it before then fails (rejected).
func (s *Service) checkTemplates(ctx context.Context, bot string, list []templateUse, r *report, blocking bool) ([]httpapi.FieldError, error) {
	if s.templates == nil || len(list) == 0 {
		return nil, nil
	}
	cat, ok, err := s.templates.Catalog(ctx, bot)
	if err != nil {
		return nil, fmt.Errorf("reactions: read the template catalog: %w", err)
	}
	if !ok {
		return nil, nil
	}
	byKey := make(map[[2]string]CatalogTemplate, len(cat.Templates))
	for _, t := range cat.Templates {
		byKey[[2]string{t.Name, t.Language}] = t
	}
	var warnings httpapi.Problems
	flaw := func(path, format string, args ...any) {
		if blocking {
			r.flaws.Add(path, format, args...)
		} else {
			warnings.Add(path, format, args...)
		}
	}
	for _, u := range list {
		t, found := byKey[[2]string{u.name, u.language}]
		switch {
		case !found:
			flaw(u.path+".template_name", "no template %q in language %s in the catalog of the bot's WhatsApp channel %s: "+
				"create it, or sync the catalog (POST .../channels/%s/templates/sync) if it was made in WhatsApp Manager",
				u.name, u.language, cat.ChannelID, cat.ChannelID)
			continue
		case t.Unsupported != "":
			flaw(u.path+".template_name", "the template needs a parameter for %s, which send_template steps do not give: "+
				"use a template whose variables are all in its body", t.Unsupported)
		case t.BodyParams >= 0 && t.BodyParams != u.params:
			flaw(u.path+".params", "the template's body takes %d parameter(s); the step gives %d", t.BodyParams, u.params)
		}
		if t.Status != TemplateApproved {
			warnings.Add(u.path+".template_name", "the template's status is %s: WhatsApp sends only approved templates, "+
				"so until it is approved this step fails its run (rejected)", t.Status)
		}
	}
	return warnings, nil
}
