package catalog

import "encoding/json"

// everyChannel is the channel kinds every catalog flow is written for: they use text,
// buttons and labels only, which Telegram, WhatsApp and VK all carry.
var everyChannel = []string{"telegram", "whatsapp", "vk"}

// Entries returns every version of every playbook of the platform's catalog. A version is
// never changed once published: a change is a new version, which installs upgrade to.
func Entries() []Playbook {
	return []Playbook{abandonedCart(1), abandonedCart(2), abandonedCart(3), appointmentBooking(),
		leadQualification(1), leadQualification(2), supportTriage()}
}

func body(s string) json.RawMessage { return json.RawMessage(s) }

// websiteQuestion is the question of playbooks that install popups: the website they run on
// (their allowed origin, and the base of their URL rules).
var websiteQuestion = Question{ID: "website", Prompt: "Your website, where the popup runs (https://shop.example)",
	Type: TypeWebsite, Required: true}

// abandonedCart is the e-commerce abandoned-cart playbook. Version 2 changes the checkout
// and reminder texts, asks one more (optional) question and adds a help reaction and a KPI.
// Version 3 adds a reminder message to broadcast to the Cart abandoned label (a content
// document) and an exit-intent popup with the discount code on the cart page, which needs
// the store's website and the popups plan feature.
func abandonedCart(version int) Playbook {
	p := Playbook{
		ID: "abandoned_cart", Version: version, Name: "Abandoned cart recovery", Vertical: VerticalEcommerce,
		Outcomes: []string{OutcomeRecoverCarts},
		Summary: "Reminds shoppers who left a cart (tag them with the Cart abandoned label from your store's " +
			"integration) and hands out a discount code when they come back with a keyword.",
		Channels: everyChannel,
		Questions: []Question{
			{ID: "store_name", Prompt: "What is your store called?", Type: TypeText, Required: true},
			{ID: "cart_keyword", Prompt: "Which word should a shopper send to get their code?", Type: TypeText, Default: "cart"},
			{ID: "discount_code", Prompt: "Which discount code should returning shoppers get?", Type: TypeText, Default: "COMEBACK10"},
			{ID: "offer_discount", Prompt: "Record on the subscriber that a code was sent?", Type: TypeBool, Default: true},
		},
		Installs: Installs{
			Labels: []Label{{Key: "cart_abandoned", Name: "Cart abandoned"}, {Key: "cart_recovered", Name: "Cart recovered"}},
			Fields: []Field{{Key: "cart_code_sent", Name: "cart_code_sent", Type: "boolean"}},
			Collections: []Collection{{Key: "abandoned_carts", Name: "abandoned_carts", Fields: []CollectionField{
				{Name: "cart_id", Type: "string", Required: true, Indexed: true},
				{Name: "total", Type: "number"},
				{Name: "items", Type: "string_list"},
			}}},
			Reactions: []Reaction{
				{Key: "cart_checkout", Body: body(`{"name": "Abandoned cart: checkout",
					"trigger": {"type": "keyword", "keywords": ["{{answer.cart_keyword}}"]},
					"steps": [
						{"id": "code", "type": "send_text", "text": "Welcome back to {{answer.store_name}}! Use the code {{answer.discount_code}} at checkout."},
						{"id": "tag", "type": "add_label", "label_id": "{{label.cart_recovered}}"},
						{"id": "mark", "type": "set_field", "field_id": "{{field.cart_code_sent}}", "value": "{{answer.offer_discount}}"}]}`)},
				{Key: "cart_reminder", Body: body(`{"name": "Abandoned cart: reminder",
					"trigger": {"type": "label_added", "label_id": "{{label.cart_abandoned}}"},
					"steps": [
						{"id": "nudge", "type": "send_text", "text": "You left something in your cart at {{answer.store_name}}."},
						{"id": "ask", "type": "buttons", "text": "Ready to check out?", "buttons": [
							{"title": "Check out", "step_id": "go"}, {"title": "Not now", "step_id": "bye"}]},
						{"id": "go", "type": "goto", "reaction_id": "{{reaction.cart_checkout}}"},
						{"id": "bye", "type": "send_text", "text": "No problem, your cart is saved."}]}`)},
			},
		},
		KPIs: []KPI{
			{ID: "checkouts", Name: "Codes handed out", Description: "Runs of the checkout reaction (a shopper sent the keyword or pressed Check out).",
				Event: "reaction_started", Reaction: "cart_checkout"},
			{ID: "reminders", Name: "Reminders sent", Description: "Runs of the reminder reaction (the Cart abandoned label was added).",
				Event: "reaction_started", Reaction: "cart_reminder"},
			{ID: "recovered", Name: "Carts recovered", Description: "Subscribers given the Cart recovered label.",
				Event: "label_added", Label: "cart_recovered"},
		},
	}
	if version == 1 {
		return p
	}
	p.Questions = append(p.Questions, Question{ID: "shipping_note", Prompt: "A sentence about shipping to add to the code message",
		Type: TypeText, Default: "Shipping is free today."})
	p.Installs.Reactions = []Reaction{
		{Key: "cart_checkout", Body: body(`{"name": "Abandoned cart: checkout",
			"trigger": {"type": "keyword", "keywords": ["{{answer.cart_keyword}}"]},
			"steps": [
				{"id": "code", "type": "send_text", "text": "Welcome back to {{answer.store_name}}! Use the code {{answer.discount_code}} at checkout. {{answer.shipping_note}}"},
				{"id": "tag", "type": "add_label", "label_id": "{{label.cart_recovered}}"},
				{"id": "mark", "type": "set_field", "field_id": "{{field.cart_code_sent}}", "value": "{{answer.offer_discount}}"}]}`)},
		{Key: "cart_reminder", Body: body(`{"name": "Abandoned cart: reminder",
			"trigger": {"type": "label_added", "label_id": "{{label.cart_abandoned}}"},
			"steps": [
				{"id": "nudge", "type": "send_text", "text": "You left something in your cart at {{answer.store_name}}. It is still waiting for you."},
				{"id": "ask", "type": "buttons", "text": "Ready to check out?", "buttons": [
					{"title": "Check out", "step_id": "go"}, {"title": "Not now", "step_id": "bye"}]},
				{"id": "go", "type": "goto", "reaction_id": "{{reaction.cart_checkout}}"},
				{"id": "bye", "type": "send_text", "text": "No problem, your cart is saved."}]}`)},
		{Key: "cart_help", Body: body(`{"name": "Abandoned cart: help",
			"trigger": {"type": "keyword", "keywords": ["{{answer.cart_keyword}} help"]},
			"steps": [
				{"id": "explain", "type": "send_text", "text": "Send {{answer.cart_keyword}} to get your discount code for {{answer.store_name}}."}]}`)},
	}
	p.KPIs = append(p.KPIs, KPI{ID: "help_requests", Name: "Help requests", Description: "Runs of the help reaction.",
		Event: "reaction_started", Reaction: "cart_help"})
	if version == 2 {
		return p
	}
	p.Questions = append(p.Questions, websiteQuestion)
	p.Installs.Content = []Content{{Key: "cart_reminder_message", Body: body(`{"type": "message", "name": "Abandoned cart: reminder message",
		"draft": {
			"text": "Hi {{ subscriber.first_name | default: \"there\" }}, your cart at {{answer.store_name}} is still waiting. Send {{answer.cart_keyword}} or use the code {{answer.discount_code}} at checkout.",
			"buttons": [{"title": "Back to my cart", "url": "{{answer.website}}"}]}}`)}}
	p.Installs.Popups = []Popup{{Key: "exit_offer", Body: body(`{"name": "Abandoned cart: exit offer", "status": "paused",
		"content": {"title": "Before you go", "body": "Complete your order at {{answer.store_name}} with the code {{answer.discount_code}}.",
			"button_text": "Back to checkout", "close_text": "No, thanks"},
		"targeting": {"url_rules": [{"match": "prefix", "value": "{{answer.website}}/cart"}], "exit_intent": true},
		"allowed_origins": ["{{answer.website}}"]}`)}}
	p.KPIs = append(p.KPIs, KPI{ID: "exit_offers_taken", Name: "Exit offers taken",
		Description: "Conversions of the exit-intent popup (a visitor pressed its button).", Event: "popup_submitted", Popup: "exit_offer"})
	return p
}

func appointmentBooking() Playbook {
	return Playbook{
		ID: "appointment_booking", Version: 1, Name: "Appointment booking", Vertical: VerticalServices,
		Outcomes: []string{OutcomeBookAppointment},
		Summary:  "Lets a customer ask for an appointment in the chat: the preferred part of the day is saved and the request tagged for your team.",
		Channels: everyChannel,
		Questions: []Question{
			{ID: "business_name", Prompt: "What is your business called?", Type: TypeText, Required: true},
			{ID: "book_keyword", Prompt: "Which word starts a booking?", Type: TypeText, Default: "book"},
		},
		Installs: Installs{
			Labels: []Label{{Key: "appointment_requested", Name: "Appointment requested"}},
			Fields: []Field{{Key: "preferred_time", Name: "preferred_time", Type: "string"}},
			Collections: []Collection{{Key: "appointments", Name: "appointments", Fields: []CollectionField{
				{Name: "customer", Type: "string", Required: true, Indexed: true},
				{Name: "day", Type: "string"},
				{Name: "slot", Type: "string"},
			}}},
			Reactions: []Reaction{{Key: "booking", Body: body(`{"name": "Appointment: booking",
				"trigger": {"type": "keyword", "keywords": ["{{answer.book_keyword}}"]},
				"steps": [
					{"id": "ask", "type": "buttons", "text": "When suits you best at {{answer.business_name}}?", "buttons": [
						{"title": "Morning", "step_id": "am"}, {"title": "Afternoon", "step_id": "pm"}]},
					{"id": "am", "type": "set_field", "field_id": "{{field.preferred_time}}", "value": "morning"},
					{"id": "am_next", "type": "goto", "step_id": "confirm"},
					{"id": "pm", "type": "set_field", "field_id": "{{field.preferred_time}}", "value": "afternoon"},
					{"id": "confirm", "type": "send_text", "text": "Thanks! {{answer.business_name}} will confirm your appointment shortly."},
					{"id": "tag", "type": "add_label", "label_id": "{{label.appointment_requested}}"}]}`)}},
		},
		KPIs: []KPI{
			{ID: "bookings_started", Name: "Bookings started", Description: "Runs of the booking reaction.", Event: "reaction_started", Reaction: "booking"},
			{ID: "bookings_requested", Name: "Appointments requested", Description: "Subscribers given the Appointment requested label.",
				Event: "label_added", Label: "appointment_requested"},
		},
	}
}

// leadQualification is the B2B lead qualification playbook. Version 2 adds a lead capture
// form on the customer's website (a popup writing the visitor's work email and team size to
// custom fields), which needs the website and the popups plan feature.
func leadQualification(version int) Playbook {
	p := Playbook{
		ID: "lead_qualification", Version: version, Name: "Lead qualification", Vertical: VerticalB2B,
		Outcomes: []string{OutcomeQualifyLeads},
		Summary:  "Asks a prospect the size of their team and routes them: large teams are tagged for sales, small ones get the self-serve path.",
		Channels: everyChannel,
		Questions: []Question{
			{ID: "sales_contact", Prompt: "Who reaches out to qualified leads (a name or a team)?", Type: TypeText, Required: true},
			{ID: "lead_keyword", Prompt: "Which word starts the qualification?", Type: TypeText, Default: "demo"},
			{ID: "team_threshold", Prompt: "From how many people is a team a sales lead?", Type: TypeChoice, Default: "10",
				Choices: []string{"10", "50", "200"}},
		},
		Installs: Installs{
			Labels: []Label{{Key: "qualified", Name: "Qualified lead"}, {Key: "self_serve", Name: "Self-serve lead"}},
			Fields: []Field{{Key: "team_size", Name: "team_size", Type: "string"}},
			Reactions: []Reaction{{Key: "qualify", Body: body(`{"name": "Lead: qualification",
				"trigger": {"type": "keyword", "keywords": ["{{answer.lead_keyword}}"]},
				"steps": [
					{"id": "ask", "type": "buttons", "text": "How many people are on your team?", "buttons": [
						{"title": "Up to {{answer.team_threshold}}", "step_id": "small"}, {"title": "More than {{answer.team_threshold}}", "step_id": "large"}]},
					{"id": "small", "type": "set_field", "field_id": "{{field.team_size}}", "value": "small"},
					{"id": "small_tag", "type": "add_label", "label_id": "{{label.self_serve}}"},
					{"id": "small_msg", "type": "send_text", "text": "Thanks! You can start right away with our self-serve plan."},
					{"id": "small_end", "type": "end"},
					{"id": "large", "type": "set_field", "field_id": "{{field.team_size}}", "value": "large"},
					{"id": "large_tag", "type": "add_label", "label_id": "{{label.qualified}}"},
					{"id": "large_msg", "type": "send_text", "text": "Great, {{answer.sales_contact}} will reach out within one business day."}]}`)}},
		},
		KPIs: []KPI{
			{ID: "conversations", Name: "Qualifications started", Description: "Runs of the qualification reaction.", Event: "reaction_started", Reaction: "qualify"},
			{ID: "qualified", Name: "Qualified leads", Description: "Subscribers given the Qualified lead label.", Event: "label_added", Label: "qualified"},
		},
	}
	if version == 1 {
		return p
	}
	p.Questions = append(p.Questions, websiteQuestion)
	p.Installs.Fields = append(p.Installs.Fields, Field{Key: "work_email", Name: "work_email", Type: "string"})
	p.Installs.Popups = []Popup{{Key: "lead_form", Body: body(`{"name": "Lead: demo request form", "status": "paused",
		"content": {"title": "See it with your team", "body": "Leave your work email and {{answer.sales_contact}} will reach out within one business day.",
			"button_text": "Request a demo",
			"fields": [
				{"name": "work_email", "label": "Work email", "type": "email", "required": true},
				{"name": "team_size", "label": "Team size", "type": "text", "required": false}]},
		"targeting": {"delay_seconds": 20},
		"allowed_origins": ["{{answer.website}}"]}`)}}
	p.KPIs = append(p.KPIs, KPI{ID: "form_leads", Name: "Demo requests from the website",
		Description: "Conversions of the lead capture form (a visitor sent their work email).", Event: "popup_submitted", Popup: "lead_form"})
	return p
}

func supportTriage() Playbook {
	return Playbook{
		ID: "support_triage", Version: 1, Name: "Support triage", Vertical: VerticalSaaSSupport,
		Outcomes: []string{OutcomeDeflectSupport},
		Summary:  "Sorts support requests by topic, answers the common ones with links and tags the rest for a person.",
		Channels: everyChannel,
		Questions: []Question{
			{ID: "docs_url", Prompt: "Where are your help articles (a URL)?", Type: TypeText, Required: true},
			{ID: "help_keyword", Prompt: "Which word opens support?", Type: TypeText, Default: "help"},
			{ID: "support_hours", Prompt: "When does a person answer?", Type: TypeText, Default: "business hours"},
		},
		Installs: Installs{
			Labels: []Label{{Key: "needs_human", Name: "Needs a human"}},
			Fields: []Field{{Key: "support_topic", Name: "support_topic", Type: "string"}},
			Collections: []Collection{{Key: "tickets", Name: "support_tickets", Fields: []CollectionField{
				{Name: "topic", Type: "string", Required: true, Indexed: true},
				{Name: "status", Type: "string"},
			}}},
			Reactions: []Reaction{{Key: "triage", Body: body(`{"name": "Support: triage",
				"trigger": {"type": "keyword", "keywords": ["{{answer.help_keyword}}"]},
				"steps": [
					{"id": "ask", "type": "buttons", "text": "What do you need help with?", "buttons": [
						{"title": "Billing", "step_id": "billing"}, {"title": "Technical", "step_id": "tech"}, {"title": "Talk to a person", "step_id": "human"}]},
					{"id": "billing", "type": "set_field", "field_id": "{{field.support_topic}}", "value": "billing"},
					{"id": "billing_msg", "type": "send_text", "text": "Invoices and plans are explained at {{answer.docs_url}}."},
					{"id": "billing_end", "type": "end"},
					{"id": "tech", "type": "set_field", "field_id": "{{field.support_topic}}", "value": "technical"},
					{"id": "tech_msg", "type": "send_text", "text": "Most technical questions are answered at {{answer.docs_url}}."},
					{"id": "tech_end", "type": "end"},
					{"id": "human", "type": "add_label", "label_id": "{{label.needs_human}}"},
					{"id": "human_msg", "type": "send_text", "text": "A teammate will answer during {{answer.support_hours}}."}]}`)}},
		},
		KPIs: []KPI{
			{ID: "requests", Name: "Support requests", Description: "Runs of the triage reaction.", Event: "reaction_started", Reaction: "triage"},
			{ID: "handoffs", Name: "Handed to a person", Description: "Subscribers given the Needs a human label.", Event: "label_added", Label: "needs_human"},
		},
	}
}
