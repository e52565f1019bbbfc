package main

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	webpushgo "github.com/SherClockHolmes/webpush-go"

	"github.com/botplatform/api/functions/webpush"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/secrets/keyfile"
	"github.com/botplatform/api/shared/store/sqlite"
)

// webpushRuns is how often each side runs; the median is reported.
const webpushRuns = 5

// accepted is a push service that accepts every message without a network: the benchmark
// measures encryption and signing, not a push service.
type accepted struct{}

func (accepted) Do(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusCreated, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
}

// oneSubscription is the customer SDK's subscriptions, reduced to one browser's.
type oneSubscription struct{ target webpush.Target }

func (o oneSubscription) List(context.Context, string, int, string) ([]webpush.Subscription, string, error) {
	return nil, "", nil
}
func (o oneSubscription) Target(context.Context, string, string) (webpush.Target, error) {
	return o.target, nil
}
func (oneSubscription) Expire(context.Context, string, string, string) error { return nil }
func (oneSubscription) ExpireAll(context.Context, string) (int64, error)     { return 0, nil }
func (oneSubscription) Active(context.Context, string) (int64, error)        { return 1, nil }
func (oneSubscription) Counts(context.Context, string) (webpush.SubscriptionCounts, error) {
	return webpush.SubscriptionCounts{}, nil
}

// oneDocument is a published push document.
type oneDocument struct{ msg webpush.Message }

func (d oneDocument) Push(context.Context, string, string) (webpush.Message, error) {
	return d.msg, nil
}

// webpushBench measures, per message, what the platform does to send a browser push (the
// payload, the endpoint check, RFC 8291 encryption and the RFC 8292 signature through
// webpush.Pusher; and a whole test send through webpush.Service: the configuration read
// from SQLite, the private key opened, the counter written) against webpush-go alone
// encrypting and signing the same payload for the same subscription, in the same run.
func webpushBench(n int, durability sqlite.Durability) error {
	if n < 1 {
		return errors.New("-messages must be at least 1")
	}
	dir, err := os.MkdirTemp("", "botapi-webpush-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	auth := make([]byte, 16)
	_, _ = rand.Read(auth)
	target := webpush.Target{Endpoint: "https://fcm.googleapis.com/fcm/send/bench-subscription",
		P256dh: base64.RawURLEncoding.EncodeToString(k.PublicKey().Bytes()), Auth: base64.RawURLEncoding.EncodeToString(auth)}
	msg := webpush.Message{DocumentID: "doc_bench", Version: 1, Title: "Spring sale", Body: "Up to 50% off everything in the shop until Sunday",
		URL: "https://shop.example/sale", Actions: []webpush.Action{{Title: "Open", URL: "https://shop.example/sale"}}}
	priv, pub, err := webpushgo.GenerateVAPIDKeys()
	if err != nil {
		return err
	}
	vapid := webpush.VAPID{PublicKey: pub, PrivateKey: priv, Subject: "mailto:push@shop.example"}
	pusher := webpush.NewPusher(webpush.PushOptions{HTTPClient: accepted{}})

	st, err := sqlite.Open(filepath.Join(dir, "store.db"), sqlite.WithDurability(durability))
	if err != nil {
		return err
	}
	defer st.Close()
	sealer, err := keyfile.New(make([]byte, 32))
	if err != nil {
		return err
	}
	svc, err := webpush.New(webpush.Config{Store: st, Sealer: sealer, Subscriptions: oneSubscription{target}, Content: oneDocument{msg},
		Push: pusher, Log: slog.New(slog.DiscardHandler), Now: time.Now})
	if err != nil {
		return err
	}
	bot := ids.New("bot")
	if _, _, err := svc.Enable(ctx, bot, webpush.Enable{Subject: &vapid.Subject, NavigationOrigins: &[]string{"https://shop.example"}}); err != nil {
		return err
	}

	payload, err := msg.Build(ids.New("wpm"), "wps_bench")
	if err != nil {
		return err
	}
	sides := []struct {
		name string
		one  func() error
	}{
		{"webpush-go alone (encrypt + sign)", func() error {
			res, err := webpushgo.SendNotificationWithContext(ctx, payload, &webpushgo.Subscription{Endpoint: target.Endpoint,
				Keys: webpushgo.Keys{P256dh: target.P256dh, Auth: target.Auth}}, &webpushgo.Options{HTTPClient: accepted{},
				Subscriber: "push@shop.example", TTL: 86400, Urgency: webpushgo.UrgencyNormal, VAPIDPublicKey: pub, VAPIDPrivateKey: priv})
			if err == nil {
				res.Body.Close()
			}
			return err
		}},
		{"webpush.Pusher (payload, endpoint check, encrypt + sign)", func() error {
			p, err := msg.Build(ids.New("wpm"), "wps_bench")
			if err != nil {
				return err
			}
			_, err = pusher.Send(ctx, target, vapid, p)
			return err
		}},
		{"webpush.Service test send (+ SQLite read, key opened, counter)", func() error {
			_, err := svc.TestSend(ctx, bot, webpush.TestSendRequest{SubscriptionID: "wps_bench", DocumentID: "doc_bench", IgnoreQuietHours: true})
			if httpapi.KindOf(err) == httpapi.KindTooManyRequests {
				return nil // no limiter is configured; never happens
			}
			return err
		}},
	}
	// The sides take turns within each run, so that a slower moment of a shared machine
	// falls on all of them rather than on one.
	runs := make([][]time.Duration, len(sides))
	for range webpushRuns {
		for i, side := range sides {
			start := time.Now()
			for range n {
				if err := side.one(); err != nil {
					return fmt.Errorf("%s: %w", side.name, err)
				}
			}
			runs[i] = append(runs[i], time.Since(start))
		}
	}
	per := make([]time.Duration, len(sides))
	for i := range sides {
		slices.Sort(runs[i])
		per[i] = runs[i][len(runs[i])/2] / time.Duration(n)
	}
	fmt.Printf("\n%d cores (GOMAXPROCS %d), %s, %d messages a run, median of %d runs, one goroutine, a %d-byte payload padded to webpush-go's 4096-byte record, SQLite durability %s\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), n, webpushRuns, len(payload), durability)
	fmt.Printf("%-66s %12s %12s %8s\n", "side", "per message", "messages/s", "ratio")
	for i, side := range sides {
		fmt.Printf("%-66s %12s %12.0f %7.2fx\n", side.name, per[i].Round(time.Microsecond/10), float64(time.Second)/float64(per[i]),
			float64(per[i])/float64(per[0]))
	}
	return nil
}
