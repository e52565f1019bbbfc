package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/botplatform/api/functions/emailcampaigns"
	"github.com/botplatform/api/functions/platform"
	"github.com/botplatform/api/shared/email"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/reqlog"
	"github.com/botplatform/api/shared/store/sqlite"
)

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "listen address")
	dataDir := fs.String("data", "./.data", "data directory (store, keys, bootstrap.json)")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	durability := fs.String("durability", "full", "what an acknowledged write survives: full (a power loss: the write-ahead log is synced at every commit) or normal (a crash of this process, not of the machine; faster, see docs/performance.md)")
	providers := platform.ProvidersFromEnv(os.Getenv)
	publicURL := fs.String("public-url", os.Getenv("PUBLIC_URL"), "public base URL providers deliver webhooks to, e.g. a tunnel's https URL (env PUBLIC_URL; default none: no webhook is registered)")
	fs.StringVar(&providers.TelegramBaseURL, "telegram-base-url", providers.TelegramBaseURL, "Telegram Bot API server (env TELEGRAM_BASE_URL; default https://api.telegram.org)")
	fs.StringVar(&providers.VKBaseURL, "vk-base-url", providers.VKBaseURL, "VK API endpoint (env VK_BASE_URL; default https://api.vk.com/method)")
	fs.StringVar(&providers.WhatsAppBaseURL, "whatsapp-base-url", providers.WhatsAppBaseURL, "WhatsApp Graph API root with its version (env WHATSAPP_BASE_URL; default https://graph.facebook.com/v21.0)")
	fs.StringVar(&providers.WhatsAppAppID, "whatsapp-app-id", providers.WhatsAppAppID, "the Meta app's id, for template header media uploads (env WHATSAPP_APP_ID). "+
		"The app secret and the webhook verify token are secrets: only from the environment (WHATSAPP_APP_SECRET, WHATSAPP_VERIFY_TOKEN)")
	smtpAddr := fs.String("smtp-addr", os.Getenv("SMTP_ADDR"), "send email through this SMTP relay, host:port (env SMTP_ADDR; default none: mail is written as .eml files under <data>/mail)")
	smtpUser := fs.String("smtp-user", os.Getenv("SMTP_USER"), "SMTP AUTH user (env SMTP_USER); the password only from the environment (SMTP_PASSWORD)")
	dnsServer := fs.String("dns-server", os.Getenv("DNS_SERVER"), "DNS server (host:port, UDP) sending-domain verification asks (env DNS_SERVER; default the system resolver)")
	emailRate := fs.Float64("email-rate", 100, "campaign sending rate, messages a second")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof reads it; for performance work, docs/performance.md)")
	sdkKey := fs.String("sdk-key", "derived", "the customer SDK's project-key secret: derived (from the data directory's master key) or off (as a deployment without it: enabling the SDK answers 503 sdk_not_configured)")
	smtpTLS := fs.String("smtp-tls", "starttls", "SMTP encryption: starttls (required), implicit-tls, or none (a relay on this machine only)")
	// Media the local process uploads (VK) may come from this machine or its network.
	providers.AllowPrivateMediaURLs = true
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0 // the usage went to stderr, as flag prints it; asking is not a mistake
		}
		return 2
	}
	cfg := appConfig{Providers: providers}
	var err error
	if cfg.Durability, err = sqlite.ParseDurability(*durability); err != nil {
		fmt.Fprintf(stderr, "--durability: %v\n", err)
		return 2
	}
	switch *sdkKey {
	case "derived":
	case "off":
		cfg.NoSDKKey = true
	default:
		fmt.Fprintln(stderr, "--sdk-key must be derived or off")
		return 2
	}
	if cfg.PublicURL, err = checkPublicURL(*publicURL); err != nil {
		fmt.Fprintf(stderr, "--public-url: %v\n", err)
		return 2
	}
	if *emailRate <= 0 || *emailRate > emailcampaigns.MaxRate {
		fmt.Fprintf(stderr, "--email-rate must be more than 0 and at most %d messages a second\n", emailcampaigns.MaxRate)
		return 2
	}
	cfg.Email = family.EmailSettings{Rate: *emailRate, DNSServer: *dnsServer, LinkBaseURL: cfg.PublicURL,
		InboundSecret: os.Getenv("INBOUND_SECRET"), MailgunSigningKey: os.Getenv(platform.EnvMailgunSigningKey)}
	if cfg.Email.LinkBaseURL == "" {
		cfg.Email.LinkBaseURL = "http://" + *addr
	}
	if *smtpAddr != "" {
		c := &email.SMTP{Addr: *smtpAddr, Username: *smtpUser, Password: os.Getenv("SMTP_PASSWORD")}
		switch *smtpTLS {
		case "starttls":
			c.TLS = email.StartTLS
		case "implicit-tls":
			c.TLS = email.ImplicitTLS
		case "none":
			c.TLS = email.NoTLS
		default:
			fmt.Fprintf(stderr, "--smtp-tls must be starttls, implicit-tls or none\n")
			return 2
		}
		if err := c.Validate(); err != nil {
			fmt.Fprintf(stderr, "--smtp-addr: %v\n", err)
			return 2
		}
		cfg.SMTP = c
	}
	if err := providers.Validate(); err != nil {
		fmt.Fprintf(stderr, "provider base URLs: %v\n", err)
		return 2
	}
	var handler slog.Handler
	switch *logFormat {
	case "text":
		handler = slog.NewTextHandler(stderr, nil)
	case "json":
		handler = slog.NewJSONHandler(stderr, nil)
	default:
		fmt.Fprintf(stderr, "--log-format must be text or json\n")
		return 2
	}
	log := slog.New(handler)
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(stderr, "--cpuprofile: %v\n", err)
			return 2
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	if err := realServe(ctx, *addr, *dataDir, cfg, log, stdout); err != nil {
		log.Error("serve failed", "error", err)
		return 1
	}
	return 0
}

func realServe(ctx context.Context, addr, dataDir string, cfg appConfig, log *slog.Logger, stdout io.Writer) error {
	a, err := openAppWith(dataDir, log, cfg)
	if err != nil {
		return err
	}
	defer a.Close()
	if err := a.recordServeSettings(ctx, cfg); err != nil {
		return err
	}
	// Request logs are written in batches off the request path (SQLite has one writer).
	requests := reqlog.NewBuffered(a.RequestLog, log, 100*time.Millisecond)
	defer requests.Close(context.WithoutCancel(ctx)) // flushes on every way out; once only
	a.Requests = requests
	mux, err := a.handler()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	base := "http://" + ln.Addr().String()
	if err := a.greet(ctx, base, stdout); err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	// The background loops: expired items, and the outbox's relay of what a request could
	// not send after its commit (or a previous run of the process staged and never sent).
	// They end before the store closes.
	background, stopBackground := context.WithCancel(ctx)
	var loops sync.WaitGroup
	loops.Go(func() { a.sweep(background) })
	loops.Go(func() { a.relay(background) })
	defer func() { stopBackground(); loops.Wait() }()
	stopJobs, err := a.runJobs()
	if err != nil {
		srv.Close()
		return err
	}
	log.Info("listening", "addr", ln.Addr().String(), "data", dataDir, "public_url", cfg.PublicURL)
	fmt.Fprintf(stdout, "API listening on %s (Ctrl-C to stop)\n", base)
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := stopJobs(shutdownCtx); err != nil {
		return fmt.Errorf("stop job workers: %w", err)
	}
	if err := requests.Close(shutdownCtx); err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	log.Info("stopped")
	return nil
}

// greet creates the demo account on the first start and tells the user how to call the API.
// The token is printed to stdout for the person at the terminal, never to the log.
func (a *app) greet(ctx context.Context, base string, stdout io.Writer) error {
	has, err := a.hasDemo(ctx)
	if err != nil {
		return err
	}
	if has {
		fmt.Fprintf(stdout, "Using the existing data in %s. Its bootstrap.json holds the demo token;\n"+
			"mint a new one with: go run ./functions/local admin bootstrap --data %s\n", a.dataDir, a.dataDir)
		return nil
	}
	res, err := a.bootstrap(ctx)
	if err != nil {
		return fmt.Errorf("create demo account: %w", err)
	}
	path, err := writeBootstrapFile(a.dataDir, res)
	if err != nil {
		return fmt.Errorf("write bootstrap file: %w", err)
	}
	fmt.Fprintf(stdout, `First start: created a demo account, its owner, a bot and a full-access token.
  account: %s
  user:    %s
  bot:     %s
  token:   %s  (scope *, expires %s)
Saved to %s (mode 0600). Try:
  curl -H "Authorization: Bearer %s" %s/api/bots/%s
The API reference is at %s/openapi.yaml
`, res.AccountID, res.UserID, res.BotID, res.Token, res.ExpiresAt.Format(time.DateOnly), path,
		res.Token, base, res.BotID, base)
	return nil
}
