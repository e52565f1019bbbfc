// Command demo is `make demo`: the local API with Telegram, WhatsApp and VK played by the
// test fakes on this machine, so that a newcomer can write to the demo bot as a messenger
// user would and watch a reaction answer, without accounts at the providers and without a
// public tunnel (the fakes deliver their webhooks to 127.0.0.1).
//
// It starts the three fakes, then `local serve` pointed at them (its own data directory,
// .data-demo unless -data says otherwise), connects a channel of each type to the demo bot
// (Telegram with the admin CLI, WhatsApp and VK over the API), publishes a small reaction,
// and then reads lines from stdin: "hello", "whatsapp hello", "vk coffee" send that text as
// a user of that channel (Telegram unless named), and the bot's answers are printed as they
// arrive.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/botplatform/api/tests/apiclient"
	faketelegram "github.com/botplatform/api/tests/fakes/telegram"
	fakevk "github.com/botplatform/api/tests/fakes/vk"
	fakewhatsapp "github.com/botplatform/api/tests/fakes/whatsapp"
)

func main() {
	data := flag.String("data", ".data-demo", "data directory of the demo's API (separate from make run's)")
	addr := flag.String("addr", "127.0.0.1:8080", "address of the demo's API")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *data, *addr, os.Stdin, os.Stdout); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// demo is the running demo: the API, its demo bot and token, and the fakes.
type demo struct {
	api, token, bot string
	bin, data       string
	tg              *faketelegram.Server
	tgBot           faketelegram.Bot
	wa              *fakewhatsapp.Server
	vk              *fakevk.Server
	client          *http.Client
}

func run(ctx context.Context, data, addr string, in io.Reader, out io.Writer) error {
	tg, closeTG := faketelegram.Listen()
	defer closeTG()
	wa, closeWA := fakewhatsapp.Listen()
	defer closeWA()
	vk, closeVK := fakevk.Listen()
	defer closeVK()

	bin := filepath.Join(os.TempDir(), fmt.Sprintf("botplatform-demo-%d", os.Getpid()))
	defer os.Remove(bin)
	fmt.Fprintln(out, "Building the local API ...")
	if b, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./functions/local").CombinedOutput(); err != nil {
		return fmt.Errorf("build: %v\n%s", err, b)
	}
	if err := os.MkdirAll(data, 0o700); err != nil {
		return err
	}
	api := "http://" + addr
	serve := exec.CommandContext(ctx, bin, "serve", "--addr", addr, "--data", data, "--public-url", api,
		"--telegram-base-url", tg.URL, "--vk-base-url", vk.BaseURL(), "--whatsapp-base-url", wa.URL(), "--whatsapp-app-id", fakewhatsapp.AppID)
	serve.Env = append(os.Environ(), "WHATSAPP_APP_SECRET="+fakewhatsapp.AppSecret, "WHATSAPP_VERIFY_TOKEN=demo-verify-token")
	log, err := os.OpenFile(filepath.Join(data, "serve.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	serve.Stdout, serve.Stderr = log, log
	if err := serve.Start(); err != nil {
		return err
	}
	defer func() { _ = serve.Process.Signal(os.Interrupt); _ = serve.Wait() }()
	if err := waitFor(ctx, addr); err != nil {
		return fmt.Errorf("the API did not start (see %s): %w", filepath.Join(data, "serve.log"), err)
	}
	var boot struct {
		Token string `json:"token"`
		BotID string `json:"bot_id"`
	}
	b, err := os.ReadFile(filepath.Join(data, "bootstrap.json"))
	if err != nil {
		return fmt.Errorf("the demo token (delete %s to start over): %w", data, err)
	}
	if err := json.Unmarshal(b, &boot); err != nil {
		return err
	}
	d := &demo{api: api, token: boot.Token, bot: boot.BotID, bin: bin, data: data, tg: tg, wa: wa, vk: vk,
		client: &http.Client{Timeout: 10 * time.Second}}
	if err := d.connect(ctx); err != nil {
		return err
	}
	if err := d.publish(); err != nil {
		return err
	}
	fmt.Fprintf(out, `
The demo bot %[1]s answers on Telegram, WhatsApp and VK, played by fakes on this machine.
Write as a user: "hello", then "coffee" or "tea" (the answers the bot offers); prefix a
line with "whatsapp" or "vk" to write on that channel ("whatsapp hello"), else Telegram.
Its answers appear here. The API is at %[2]s; in another terminal:

  curl -H "Authorization: Bearer %[3]s" %[2]s/api/bots/%[1]s/subscribers
  curl -H "Authorization: Bearer %[3]s" %[2]s/api/bots/%[1]s/channels

(the subscriber's executions show each run's trace). Ctrl-D or Ctrl-C ends the demo; its data
stays in %[4]s.
`, d.bot, api, d.token, data)
	return d.chat(ctx, in, out)
}

// waitFor waits until the API at addr answers its health check.
func waitFor(ctx context.Context, addr string) error {
	// An HTTP answer, not an accepted connection: the process listens before it writes
	// bootstrap.json on a first start, and serves only after.
	c := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := c.Get("http://" + addr + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET /healthz: %s", res.Status)
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// connect attaches one channel of each type to the demo bot, unless it has one already.
func (d *demo) connect(ctx context.Context) error {
	var list struct {
		Data []struct {
			Type string `json:"type"`
		} `json:"data"`
	}
	if err := d.call("GET", "/api/bots/"+d.bot+"/channels", nil, &list); err != nil {
		return err
	}
	has := map[string]bool{}
	for _, c := range list.Data {
		has[c.Type] = true
	}
	// The fakes start empty each time: a channel kept from an earlier demo names a bot or
	// account they no longer know. Start over with a fresh data directory instead.
	if len(has) > 0 {
		return fmt.Errorf("the demo bot has channels of an earlier demo, which these fakes do not know: delete %s and run make demo again", d.data)
	}
	d.tgBot = d.tg.AddBot("demo_shop_bot")
	cmd := exec.CommandContext(ctx, d.bin, "admin", "channel", "connect", "--data", d.data, "--bot", d.bot,
		"--type", "telegram", "--token", d.tgBot.Token, "--base-url", d.tg.URL, "--public-url", d.api)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("connect telegram: %v: %s", err, b)
	}
	if err := d.call("POST", "/api/bots/"+d.bot+"/channels", map[string]any{"type": "whatsapp", "credentials": d.wa.Credentials()}, nil); err != nil {
		return fmt.Errorf("connect whatsapp: %w", err)
	}
	if err := d.call("POST", "/api/bots/"+d.bot+"/channels", map[string]any{"type": "vk",
		"credentials": map[string]any{"access_token": fakevk.Token, "group_id": fakevk.GroupID}}, nil); err != nil {
		return fmt.Errorf("connect vk: %w", err)
	}
	// VK sends a new callback server a confirmation event, which the API must answer.
	servers := d.vk.CallbackServers(fakevk.GroupID)
	if len(servers) == 0 {
		return errors.New("connect vk: no callback server was registered")
	}
	if _, err := d.vk.Confirm(fakevk.GroupID, servers[len(servers)-1].ID); err != nil {
		return fmt.Errorf("confirm vk: %w", err)
	}
	return nil
}

// publish creates and publishes the demo's reactions.
func (d *demo) publish() error {
	reactions := []map[string]any{
		{"name": "Hello", "trigger": map[string]any{"type": "keyword", "keywords": []any{"hello", "hi", "start", "/start"}},
			"steps": []any{
				map[string]any{"id": "hi", "type": "send_text", "text": "Hello! I am the demo bot of the local API."},
				map[string]any{"id": "menu", "type": "buttons", "text": "What would you like?", "style": "quick_replies",
					"buttons": []any{map[string]any{"title": "Coffee", "payload": "coffee"}, map[string]any{"title": "Tea", "payload": "tea"}}},
			}},
		{"name": "Coffee", "trigger": map[string]any{"type": "button", "payload": "coffee"},
			"steps": []any{map[string]any{"id": "c", "type": "send_text", "text": "One coffee coming."}}},
		{"name": "Tea", "trigger": map[string]any{"type": "button", "payload": "tea"},
			"steps": []any{map[string]any{"id": "t", "type": "send_text", "text": "Tea it is."}}},
		{"name": "Anything else", "trigger": map[string]any{"type": "keyword", "pattern": ".*"},
			"steps": []any{map[string]any{"id": "e", "type": "send_text", "text": "Write \"hello\" to start."}}},
	}
	for _, rx := range reactions {
		var created struct {
			ID string `json:"id"`
		}
		if err := d.call("POST", "/api/bots/"+d.bot+"/reactions", rx, &created); err != nil {
			return fmt.Errorf("create reaction %v: %w", rx["name"], err)
		}
		if err := d.call("POST", "/api/bots/"+d.bot+"/reactions/"+created.ID+"/publish", map[string]any{"expected_revision": 1}, nil); err != nil {
			return fmt.Errorf("publish reaction %v: %w", rx["name"], err)
		}
	}
	return nil
}

// call sends one API request and decodes its answer into out (when not nil).
func (d *demo) call(method, path string, body, out any) error {
	c := apiclient.Client{HTTP: d.client, Base: d.api, Token: d.token}
	return c.Call(method, path, body, out)
}

var line = regexp.MustCompile(`^(?:(telegram|whatsapp|vk)\s+)?(.+)$`)

// The demo's users, one per channel.
const (
	telegramUser = 424242
	whatsappUser = "4915100004242"
	vkUser       = 4242
)

// chat reads "channel text" lines and shows the bot's answers to each.
func (d *demo) chat(ctx context.Context, in io.Reader, out io.Writer) error {
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	vkID := int64(1)
	for {
		fmt.Fprint(out, "> ")
		var text string
		select {
		case <-ctx.Done():
			return ctx.Err()
		case l, ok := <-lines:
			if !ok {
				fmt.Fprintln(out)
				return nil
			}
			text = strings.TrimSpace(l)
		}
		m := line.FindStringSubmatch(text)
		if m == nil {
			continue
		}
		kind, said := m[1], m[2]
		if kind == "" {
			kind = "telegram"
		}
		before := d.answers(kind)
		var err error
		switch kind {
		case "telegram":
			_, err = d.tg.Deliver(d.tgBot, d.tg.TextUpdate(faketelegram.User{ID: telegramUser, FirstName: "Ann", LanguageCode: "en"}, said))
		case "whatsapp":
			body, _ := fakewhatsapp.TextMessage(fakewhatsapp.PhoneNumberID, whatsappUser, "Ann", said)
			_, err = d.wa.Deliver(d.api+"/webhooks/whatsapp", body)
		case "vk":
			vkID++
			_, err = d.vk.Deliver(fakevk.NewMessage(fakevk.GroupID, fakevk.InMessage{FromID: vkUser, ID: vkID, Text: said}))
		}
		if err != nil {
			fmt.Fprintf(out, "  (the %s fake could not deliver it: %v)\n", kind, err)
			continue
		}
		// The runtime answers asynchronously, off the queue: show what arrives.
		deadline := time.Now().Add(3 * time.Second)
		shown := len(before)
		for time.Now().Before(deadline) {
			now := d.answers(kind)
			for _, a := range now[shown:] {
				fmt.Fprintf(out, "  bot (%s): %s\n", kind, a)
			}
			shown = len(now)
			time.Sleep(100 * time.Millisecond)
		}
		if shown == len(before) {
			fmt.Fprintf(out, "  (no answer yet; see %s)\n", filepath.Join(d.data, "serve.log"))
		}
	}
}

// answers returns what the bot has sent the demo user of kind so far, as text.
func (d *demo) answers(kind string) []string {
	var out []string
	switch kind {
	case "telegram":
		for _, m := range d.tg.Sent(telegramUser) {
			out = append(out, withButtons(m.Text, func() []string {
				var t []string
				for _, row := range m.Buttons {
					for _, b := range row {
						t = append(t, b.Text)
					}
				}
				if m.Keyboard != nil {
					for _, row := range m.Keyboard.Buttons {
						t = append(t, row...)
					}
				}
				return t
			}()))
		}
	case "whatsapp":
		for _, m := range d.wa.Messages() {
			if m.To == whatsappUser {
				out = append(out, whatsappText(m.Body))
			}
		}
	case "vk":
		for _, m := range d.vk.Messages() {
			if m.PeerID == vkUser {
				out = append(out, m.Text)
			}
		}
	}
	return out
}

func withButtons(text string, buttons []string) string {
	if len(buttons) == 0 {
		return text
	}
	return text + "  [" + strings.Join(buttons, "] [") + "]"
}

// whatsappText is the text of a Cloud API message body (text or interactive).
func whatsappText(body json.RawMessage) string {
	var m struct {
		Text        *struct{ Body string } `json:"text"`
		Interactive *struct {
			Body   struct{ Text string } `json:"body"`
			Action struct {
				Buttons []struct {
					Reply struct{ Title string } `json:"reply"`
				} `json:"buttons"`
			} `json:"action"`
		} `json:"interactive"`
	}
	if json.Unmarshal(body, &m) != nil {
		return string(body)
	}
	switch {
	case m.Text != nil:
		return m.Text.Body
	case m.Interactive != nil:
		var titles []string
		for _, b := range m.Interactive.Action.Buttons {
			titles = append(titles, b.Reply.Title)
		}
		return withButtons(m.Interactive.Body.Text, titles)
	}
	return string(body)
}
