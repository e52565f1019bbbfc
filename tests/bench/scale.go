package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite"
	fake "github.com/botplatform/api/tests/fakes/telegram"
)

// scaleBench grows one bot's subscribers through sizes (ascending) in one store and, at each
// size, measures what a user of the API pays for the size: a page of 50 of the unfiltered
// list and of a label's list, read at random cursors spread over the whole data through
// subscribers.Service.List (the handler's work without HTTP), and a conversation: one
// inbound Telegram /start of an existing subscriber processed end to end by the real local
// process (webhook, queue, runtime, send_text to the fake Bot API), one at a time. Each is
// reported with its ratio to the first size: flat is about 1.
//
// The local process and this bench share the store file (SQLite in WAL mode takes writers
// from several processes): the process serves the conversations with its own settings
// (--durability); the bench seeds the subscribers and reads the pages through its own
// sqlite.Store opened with Normal durability (a commit is not synced; reads do not care).
//
// Seeding writes each subscriber's items (record, identity, search entries, label
// membership) straight through store.Transact, as many subscribers as fit in a transaction's
// store.MaxTransactWrites, so that a million take a few minutes rather than the 13 that one
// Service.Upsert (one transaction) per subscriber measured.
// The items are not built here: ten template subscribers are created through
// Service.Upsert, every item that names one is read back (sqlite.Store.Mentioning), and
// each seeded subscriber is a copy of a template's items with its own id and external id.
// The layout is therefore the subscribers package's own, whatever it becomes. Activity
// counters (stats) are not copied, as in functions/subscribers/bench_test.go.
func scaleBench(sizes []int, samples, convs int, durability, out string) error {
	if len(sizes) == 0 || !slices.IsSorted(sizes) || sizes[0] < 2*scaleTemplates {
		return fmt.Errorf("scale: sizes must ascend from at least %d: %v", 2*scaleTemplates, sizes)
	}
	if samples < 1 || convs < 1 {
		return errors.New("scale: -scale-pages and -scale-conversations must be positive")
	}
	d, err := sqlite.ParseDurability(durability)
	if err != nil {
		return err
	}
	load0 := load1to15()
	dir, err := os.MkdirTemp("", "botapi-scale-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	env, err := startConversations(dir, d)
	if err != nil {
		return err
	}
	defer env.close()

	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(env.data, "store.db"), sqlite.WithDurability(sqlite.Normal))
	if err != nil {
		return err
	}
	defer st.Close()
	svc := subscribers.NewService(st, time.Now, nil)
	label, err := svc.CreateLabel(ctx, env.botID, "Tenth")
	if err != nil {
		return err
	}
	sd, err := newSeeder(ctx, st, svc, env.botID, label.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "scale: a subscriber is %d items (%d with the label), copied from %d templates made by Service.Upsert\n",
		len(sd.templates[1].items), len(sd.templates[0].items), scaleTemplates)

	all := &walker{svc: svc, bot: env.botID, cursors: []string{""}}
	labelled := &walker{svc: svc, bot: env.botID, filter: subscribers.Filter{Label: label.ID}, cursors: []string{""}}
	rng := rand.New(rand.NewPCG(1, 2))
	used := map[int]bool{}
	var rows []scaleRow
	for _, n := range sizes {
		t0 := time.Now()
		if err := sd.grow(ctx, n); err != nil {
			return err
		}
		seedTime := time.Since(t0)
		fmt.Fprintf(os.Stderr, "scale: %d subscribers seeded in %s\n", n, seedTime.Round(time.Millisecond))
		row := scaleRow{size: n, seed: seedTime}
		for _, w := range []*walker{all, labelled} {
			if err := w.extend(ctx); err != nil {
				return err
			}
		}
		if got, want := all.count, n; got != want {
			return fmt.Errorf("scale: the list walks %d subscribers, %d seeded", got, want)
		}
		if got, want := labelled.count, (n+scaleTemplates-1)/scaleTemplates; got != want {
			return fmt.Errorf("scale: the label lists %d subscribers, %d seeded with it", got, want)
		}
		if row.page, err = all.sample(ctx, rng, samples); err != nil {
			return err
		}
		if row.label, err = labelled.sample(ctx, rng, samples); err != nil {
			return err
		}
		if row.conv, err = env.converse(ctx, svc, sd, rng, used, n, convs); err != nil {
			return err
		}
		row.dbBytes = fileSize(filepath.Join(env.data, "store.db")) + fileSize(filepath.Join(env.data, "store.db-wal"))
		rows = append(rows, row)
		fmt.Fprintf(os.Stderr, "scale: %d: page %s, label page %s, conversation %s\n", n, row.page.p50, row.label.p50, row.conv.p50)
	}

	fmt.Printf("\n%d cores (GOMAXPROCS %d), %s, load average %s before and %s after; %d pages of 50 at random cursors and %d conversations (one at a time, process --durability %s) per size\n\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), load0, load1to15(), samples, convs, d)
	first := formatCount(float64(sizes[0]))
	fmt.Printf("| subscribers | store | seeded in | page p50 | page p95 | page vs %s | label page p50 | label page p95 | label page vs %s | conversation p50 | conversation p95 | conversation vs %s |\n", first, first, first)
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	base := rows[0]
	for _, r := range rows {
		fmt.Printf("| %s | %.0f MB | %s | %s | %s | %.2f | %s | %s | %.2f | %s | %s | %.2f |\n",
			formatCount(float64(r.size)), float64(r.dbBytes)/(1<<20), r.seed.Round(100*time.Millisecond),
			ms(r.page.p50), ms(r.page.p95), ratio(r.page.p50, base.page.p50),
			ms(r.label.p50), ms(r.label.p95), ratio(r.label.p50, base.label.p50),
			ms(r.conv.p50), ms(r.conv.p95), ratio(r.conv.p50, base.conv.p50))
	}
	if out == "" {
		return nil
	}
	c := scaleChart(rows)
	if err := writePNG(out, c.draw()); err != nil {
		return err
	}
	fmt.Printf("\nwrote %s\n", out)
	return nil
}

type scaleRow struct {
	size              int
	seed              time.Duration
	page, label, conv percentiles
	dbBytes           int64
}

type percentiles struct{ p50, p95 time.Duration }

func percentilesOf(ds []time.Duration) percentiles {
	slices.Sort(ds)
	at := func(p float64) time.Duration { return ds[min(len(ds)-1, int(float64(len(ds))*p))] }
	return percentiles{p50: at(0.50), p95: at(0.95)}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

func ratio(d, base time.Duration) float64 { return float64(d) / float64(base) }

// scaleChart is the figure of docs/scale.png: each median as a ratio to the first size's.
func scaleChart(rows []scaleRow) chart {
	c := chart{
		title:  "Cost per operation as subscribers grow (median, ratio to the smallest size)",
		xLabel: "subscribers of the bot (log scale)",
		yLabel: "ratio",
		width:  900, height: 520,
	}
	page := series{name: "list page of 50", color: palette[0]}
	label := series{name: "label page of 50", color: palette[1]}
	conv := series{name: "conversation (inbound message end to end)", color: palette[2]}
	for _, r := range rows {
		c.x = append(c.x, float64(r.size))
		page.y = append(page.y, ratio(r.page.p50, rows[0].page.p50))
		label.y = append(label.y, ratio(r.label.p50, rows[0].label.p50))
		conv.y = append(conv.y, ratio(r.conv.p50, rows[0].conv.p50))
	}
	c.series = []series{page, label, conv}
	return c
}

// scaleTemplates is how many template subscribers the seed copies: subscriber i is a copy
// of template i % scaleTemplates, and template 0 (so one subscriber in ten) has the label.
const scaleTemplates = 10

var scaleFirstNames = [scaleTemplates]string{"Anna", "Boris", "Chen", "Dana", "Emil", "Fatima", "Georg", "Hana", "Ivan", "Julia"}

// scaleUser is the Telegram user id of subscriber i: its external id and its private chat.
func scaleUser(i int) int64 { return 7_000_000_000 + int64(i) }

// A template is one subscriber's items with its id and external id replaced by markers.
type template struct{ items []store.Item }

const (
	idMarker  = "{{subscriber}}"
	extMarker = "{{external}}"
)

type seeder struct {
	st        *sqlite.Store
	bot       string
	templates [scaleTemplates]template
	ids       []string // the id of subscriber i
	base      time.Time
}

// newSeeder creates the template subscribers 0..scaleTemplates-1 through Service.Upsert
// with the profile a Telegram /start from scaleUser(i) carries, and reads their items back.
func newSeeder(ctx context.Context, st *sqlite.Store, svc *subscribers.Service, bot, label string) (*seeder, error) {
	sd := &seeder{st: st, bot: bot}
	en := "en"
	for k := range scaleTemplates {
		first := scaleFirstNames[k]
		c := subscribers.Changes{FirstName: &first, Locale: &en}
		if k == 0 {
			c.AddLabels = []string{label}
		}
		ext := strconv.FormatInt(scaleUser(k), 10)
		sub, _, err := svc.Upsert(ctx, bot, subscribers.ChannelTelegram, ext, c)
		if err != nil {
			return nil, fmt.Errorf("scale: template %d: %w", k, err)
		}
		items, err := st.Mentioning(ctx, sub.ID)
		if err != nil {
			return nil, err
		}
		var named bool
		for _, it := range items {
			for _, s := range []*string{&it.PK, &it.SK, &it.GSI1.PK, &it.GSI1.SK, &it.GSI2.PK, &it.GSI2.SK} {
				named = named || strings.Contains(*s, ext)
				*s = strings.ReplaceAll(strings.ReplaceAll(*s, sub.ID, idMarker), ext, extMarker)
			}
			it.Data = bytes.ReplaceAll(bytes.ReplaceAll(it.Data, []byte(sub.ID), []byte(idMarker)), []byte(ext), []byte(extMarker))
			sd.templates[k].items = append(sd.templates[k].items, it)
		}
		if !named || len(items) > store.MaxTransactWrites {
			return nil, fmt.Errorf("scale: template %d: %d items, none keyed by the identity", k, len(items))
		}
		sd.ids = append(sd.ids, sub.ID)
	}
	// Seeded ids sort after the templates' and in seeding order, a microsecond apart.
	sd.base = time.Now()
	return sd, nil
}

// grow seeds subscribers len(sd.ids)..n-1. A producer builds the transactions while the
// caller's goroutine commits them.
func (sd *seeder) grow(ctx context.Context, n int) error {
	from := len(sd.ids)
	if n <= from {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan []store.Write, 8)
	newIDs := make([]string, n-from)
	go func() {
		defer close(batches)
		var writes []store.Write
		for i := from; i < n; i++ {
			id := ids.At("sub", sd.base.Add(time.Duration(i)*time.Microsecond))
			newIDs[i-from] = id
			ext := strconv.FormatInt(scaleUser(i), 10)
			tpl := sd.templates[i%scaleTemplates].items
			if len(writes)+len(tpl) > store.MaxTransactWrites {
				select {
				case batches <- writes:
				case <-ctx.Done():
					return
				}
				writes = nil
			}
			for _, it := range tpl {
				for _, s := range []*string{&it.PK, &it.SK, &it.GSI1.PK, &it.GSI1.SK, &it.GSI2.PK, &it.GSI2.SK} {
					if strings.Contains(*s, "{{") {
						*s = strings.ReplaceAll(strings.ReplaceAll(*s, idMarker, id), extMarker, ext)
					}
				}
				it.Data = bytes.ReplaceAll(bytes.ReplaceAll(it.Data, []byte(idMarker), []byte(id)), []byte(extMarker), []byte(ext))
				writes = append(writes, store.PutOp(it, store.MustNotExist))
			}
		}
		if len(writes) > 0 {
			select {
			case batches <- writes:
			case <-ctx.Done():
			}
		}
	}()
	for w := range batches {
		if err := sd.st.Transact(ctx, w); err != nil {
			return fmt.Errorf("scale: seed: %w", err)
		}
	}
	sd.ids = append(sd.ids, newIDs...)
	return nil
}

// A walker knows a cursor for every page of one list (cursors[0] is the first page's, ""),
// learnt by walking it; extend walks on from the last known page as the list grows (the
// seed appends: its ids sort last).
type walker struct {
	svc     *subscribers.Service
	bot     string
	filter  subscribers.Filter
	cursors []string
	last    int // subscribers on the last known page
	count   int // subscribers in the list
}

func (w *walker) extend(ctx context.Context) error {
	w.count -= w.last
	for {
		page, next, err := w.svc.List(ctx, w.bot, w.filter, scalePage, w.cursors[len(w.cursors)-1])
		if err != nil {
			return err
		}
		w.count += len(page)
		if next == "" {
			w.last = len(page)
			return nil
		}
		w.cursors = append(w.cursors, next)
	}
}

const scalePage = 50

// sample times n pages read at cursors drawn at random from every full page's.
func (w *walker) sample(ctx context.Context, rng *rand.Rand, n int) (percentiles, error) {
	full := len(w.cursors)
	if w.last < scalePage && full > 1 {
		full-- // the last page is short: leave it out
	}
	took := make([]time.Duration, n)
	for i := range took {
		c := w.cursors[rng.IntN(full)]
		t0 := time.Now()
		page, _, err := w.svc.List(ctx, w.bot, w.filter, scalePage, c)
		took[i] = time.Since(t0)
		if err != nil {
			return percentiles{}, err
		}
		if len(page) != scalePage && full > 1 {
			return percentiles{}, fmt.Errorf("scale: a page of %d", len(page))
		}
		if w.filter.Label != "" && !slices.Contains(page[0].Labels, w.filter.Label) {
			return percentiles{}, errors.New("scale: the label page lists a subscriber without the label")
		}
	}
	return percentilesOf(took), nil
}

// conversationEnv is the local process, its Telegram channel (to the fake Bot API) and its
// published start reaction.
type conversationEnv struct {
	data, botID string
	tg          *fake.Server
	hook        fake.Webhook
	client      *http.Client
	tb          *benchTB
	api         *exec.Cmd
}

// startConversations starts the local process as conversation.go's endToEnd does.
func startConversations(dir string, d sqlite.Durability) (*conversationEnv, error) {
	bin, err := buildLocal(dir)
	if err != nil {
		return nil, err
	}
	env := &conversationEnv{data: filepath.Join(dir, "data"), tb: &benchTB{},
		client: &http.Client{Timeout: 30 * time.Second}}
	env.tg = fake.New(env.tb)
	bot := env.tg.AddBot("scale_bot")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	api, apiURL, err := startProc(exec.Command(bin, "serve", "--addr", "127.0.0.1:"+port, "--data", env.data, "--durability", d.String(),
		"--public-url", "http://127.0.0.1:"+port, "--telegram-base-url", env.tg.URL), `API listening on (http://\S+)`)
	if err != nil {
		env.tb.cleanup()
		return nil, err
	}
	env.api = api
	var demo struct {
		Token string `json:"token"`
		BotID string `json:"bot_id"`
	}
	b, err := os.ReadFile(filepath.Join(env.data, "bootstrap.json"))
	if err == nil {
		err = json.Unmarshal(b, &demo)
	}
	if err != nil {
		env.close()
		return nil, err
	}
	env.botID = demo.BotID
	connect := exec.Command(bin, "admin", "channel", "connect", "--bot", demo.BotID, "--type", "telegram",
		"--token", "-", "--base-url", env.tg.URL, "--data", env.data)
	connect.Stdin = bytes.NewReader([]byte(bot.Token + "\n"))
	if out, err := connect.CombinedOutput(); err != nil {
		env.close()
		return nil, fmt.Errorf("connect the channel: %v: %s", err, out)
	}
	hook, ok := env.tg.Webhook(bot)
	if !ok {
		env.close()
		return nil, errors.New("the channel registered no webhook")
	}
	env.hook = hook
	if err := publishReaction(env.client, apiURL, demo.Token, demo.BotID); err != nil {
		env.close()
		return nil, err
	}
	return env, nil
}

func (e *conversationEnv) close() {
	stopProc(e.api)
	e.tb.cleanup()
}

// converse times n conversations of existing subscribers drawn at random among the first
// size (the templates aside), each once in the whole run, after a few unmeasured ones: from
// the webhook POST of a /start to the fake Bot API's receipt of the reply. It checks that
// each went to the seeded subscriber rather than creating one.
func (e *conversationEnv) converse(ctx context.Context, svc *subscribers.Service, sd *seeder, rng *rand.Rand, used map[int]bool, size, n int) (percentiles, error) {
	const warmup = 5
	var took []time.Duration
	for j := range warmup + n {
		i := scaleTemplates + rng.IntN(size-scaleTemplates)
		for used[i] {
			i = scaleTemplates + rng.IntN(size-scaleTemplates)
		}
		used[i] = true
		update := e.tg.TextUpdate(fake.User{ID: scaleUser(i), FirstName: scaleFirstNames[i%scaleTemplates], LanguageCode: "en"}, "/start")
		before := len(e.tg.AllSent())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.hook.URL, bytes.NewReader(update))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", e.hook.SecretToken)
		t0 := time.Now()
		res, err := e.client.Do(req)
		if err != nil {
			return percentiles{}, err
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return percentiles{}, fmt.Errorf("scale: webhook: status %d", res.StatusCode)
		}
		deadline := t0.Add(30 * time.Second)
		for len(e.tg.AllSent()) == before {
			if time.Now().After(deadline) {
				return percentiles{}, fmt.Errorf("scale: no reply to subscriber %d within 30 s", i)
			}
			time.Sleep(100 * time.Microsecond)
		}
		if j >= warmup {
			took = append(took, time.Since(t0))
		}
		sub, err := svc.GetByIdentity(ctx, e.botID, subscribers.ChannelTelegram, strconv.FormatInt(scaleUser(i), 10))
		if err != nil {
			return percentiles{}, err
		}
		if sub.ID != sd.ids[i] {
			return percentiles{}, fmt.Errorf("scale: the conversation of subscriber %d went to %s, not the seeded %s", i, sub.ID, sd.ids[i])
		}
	}
	return percentilesOf(took), nil
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// load1to15 is the 1, 5 and 15 minute load averages (funnel.go's loadAverage, first three fields).
func load1to15() string {
	if f := strings.Fields(loadAverage()); len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// parseSizes reads -scale-sizes: "1000,10000" or "1k,10k,100k,1M".
func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		mult := 1
		switch {
		case strings.HasSuffix(f, "k"):
			mult, f = 1000, strings.TrimSuffix(f, "k")
		case strings.HasSuffix(f, "M"):
			mult, f = 1_000_000, strings.TrimSuffix(f, "M")
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-scale-sizes: %q is not a positive count", f)
		}
		out = append(out, n*mult)
	}
	return out, nil
}
