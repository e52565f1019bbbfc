package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/smtp"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/botplatform/api/functions/emailcampaigns"
	"github.com/botplatform/api/shared/email"
	"github.com/botplatform/api/tests/apiclient"
	fakedns "github.com/botplatform/api/tests/fakes/dns"
	fakesmtp "github.com/botplatform/api/tests/fakes/smtp"
)

// emailDomain is the sending domain the benchmark verifies and sends from.
const emailDomain = "bench.acme-shop.com"

// emailRate is the local process's --email-rate: the highest the campaign service accepts
// (a higher one makes its routes answer 503). Its pacing gives each message a slot of
// 100 µs, which is never in the way: a message over a new SMTP connection takes longer.
const emailRate = "10000"

// emailBench measures an email campaign to n recipients on the local process, from the
// schedule request to the n-th message accepted by an SMTP server on this machine, and, in
// the same run, a bare net/smtp client sending the same n messages (the very bytes the
// platform sent) to a fresh SMTP server, twice. The baseline, which the goal is judged
// against, sends one message at a time over a new connection each (dial, EHLO, MAIL,
// RCPT, DATA, QUIT), as shared/email's SMTP sender did for every message. The second bare
// run sends the way the campaign now does: emailcampaigns.DefaultWorkers messages at a
// time, each worker keeping its connection for email.DefaultSMTPMaxMessages messages with
// an RSET before each message but the first (email.SMTPPool), so that the reader sees
// what the platform adds to the same way of sending. durability is the local process's
// --durability (full, its default, or normal).
func emailBench(n int, durability string) error {
	if n < 1 {
		return errors.New("-recipients must be at least 1")
	}
	dir, err := os.MkdirTemp("", "botapi-email-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	camp, err := campaignRun(dir, n, durability)
	if err != nil {
		return err
	}
	bare, err := bareSMTP(camp.msgs)
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	pooled, err := barePooled(camp.msgs, emailcampaigns.DefaultWorkers, email.DefaultSMTPMaxMessages)
	if err != nil {
		return fmt.Errorf("pooled baseline: %w", err)
	}

	size := 0
	for _, m := range camp.msgs {
		size += len(m.Data)
	}
	rate := func(d time.Duration) float64 { return float64(n) / d.Seconds() }
	fmt.Printf("\n%d cores (GOMAXPROCS %d), %s, %d recipients, %.1f KB a message (DKIM-signed, as the platform built it), --durability %s\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), n, float64(size)/float64(n)/1024, durability)
	fmt.Printf("The campaign sends %d messages at a time over kept connections (RSET between messages, a new connection every %d);\n",
		emailcampaigns.DefaultWorkers, email.DefaultSMTPMaxMessages)
	fmt.Println("the baseline sends one at a time over a new connection each (dial, EHLO, MAIL, RCPT, DATA, QUIT); the second")
	fmt.Println("bare row sends as the campaign does. \"vs bare\" is against the baseline, \"vs same\" against the second row.")
	fmt.Println()
	fmt.Println("| scenario | messages | seconds | messages/s | vs bare | vs same |")
	fmt.Println("|---|---:|---:|---:|---:|---:|")
	fmt.Printf("| bare net/smtp client, same bytes, sequential, a connection each (baseline) | %d | %.2f | %.0f | 1.00 | %.2f |\n",
		n, bare.Seconds(), rate(bare), rate(bare)/rate(pooled))
	fmt.Printf("| bare net/smtp client, same bytes, %d at a time, kept connections | %d | %.2f | %.0f | %.2f | 1.00 |\n",
		emailcampaigns.DefaultWorkers, n, pooled.Seconds(), rate(pooled), rate(pooled)/rate(bare))
	fmt.Printf("| email campaign, schedule → %d-th message at the SMTP server | %d | %.2f | %.0f | %.2f | %.2f |\n",
		n, n, camp.total.Seconds(), rate(camp.total), rate(camp.total)/rate(bare), rate(camp.total)/rate(pooled))
	if n > 1 {
		sendPhase := camp.last.Sub(camp.first)
		r := float64(n-1) / sendPhase.Seconds()
		fmt.Printf("| of which the send phase (first → last message) | %d | %.2f | %.0f | %.2f | %.2f |\n",
			n-1, sendPhase.Seconds(), r, r/rate(bare), r/rate(pooled))
	}
	fmt.Printf("\nThe first message left %.2f s after the schedule request (planning: %d recipient rows, each with its address claim).\n",
		camp.first.Sub(camp.start).Seconds(), n)
	if camp.cpu > 0 {
		fmt.Printf("The local process used %.1f s of CPU during the campaign's %.1f s (%.0f %% of one core).\n",
			camp.cpu.Seconds(), camp.total.Seconds(), 100*camp.cpu.Seconds()/camp.total.Seconds())
		fmt.Printf("That is %.2f ms of CPU a message, planning included.\n", 1000*camp.cpu.Seconds()/float64(n))
	}
	if camp.peer > 0 {
		fmt.Printf("The bench process (the SMTP server receiving the campaign) used %.1f s of CPU meanwhile, %.2f ms a message.\n",
			camp.peer.Seconds(), 1000*camp.peer.Seconds()/float64(n))
	}
	if camp.wait > 0 {
		fmt.Printf("Its threads waited %.1f s in all for a CPU, runnable but not running (other work on the machine had it).\n", camp.wait.Seconds())
	}
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Printf("Load average at the end (1, 5, 15 min): %s (other work on the machine takes its share).\n", strings.Join(strings.Fields(string(load))[:3], " "))
	}
	synced := "synced at commit"
	if durability != "full" {
		synced = "synced only at checkpoints"
	}
	fmt.Printf("Per message the campaign path adds: re-reading the subscriber, rendering subject and body (merge fields, tracked link, "+
		"open pixel), building the MIME message and signing it with DKIM (RSA-2048); per batch of up to 48 rows, a re-read of "+
		"the campaign, a query of planned rows and of suppressions, one SQLite transaction claiming the batch (planned → sending) "+
		"and one marking it sent with the message-id pointer items, %s (--durability %s).\n", synced, durability)
	return nil
}

// campaignResult is what the campaign run measured.
type campaignResult struct {
	start, first, last time.Time
	total              time.Duration
	// cpu is the CPU time (user and system) the local process used from the schedule
	// request to the n-th message; zero where /proc is not readable.
	cpu time.Duration
	// wait is how long the local process's threads waited for a CPU meanwhile (procWait).
	wait time.Duration
	// peer is the CPU time the bench process itself (the SMTP server that receives the
	// campaign, and the polling) used meanwhile: the share of the machine the peer took.
	peer time.Duration
	msgs []fakesmtp.Message
}

// campaignRun starts the local process against fake SMTP and DNS servers, sets up a verified
// domain, n consenting subscribers, a published email and a campaign, and times the
// campaign from its schedule request until the SMTP server has n messages.
func campaignRun(dir string, n int, durability string) (campaignResult, error) {
	var res campaignResult
	bin, err := buildLocal(dir)
	if err != nil {
		return res, err
	}
	mail, err := fakesmtp.Listen()
	if err != nil {
		return res, fmt.Errorf("fake smtp: %w", err)
	}
	defer mail.Close()
	dns, stopDNS, err := fakedns.Listen()
	if err != nil {
		return res, fmt.Errorf("fake dns: %w", err)
	}
	defer stopDNS()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	data := filepath.Join(dir, "data")
	api, base, err := startProc(exec.Command(bin, "serve", "--addr", "127.0.0.1:"+port, "--data", data, "--durability", durability,
		"--public-url", "http://127.0.0.1:"+port, "--smtp-addr", mail.Addr, "--smtp-tls", "none",
		"--dns-server", dns.Addr, "--email-rate", emailRate), `API listening on (http://\S+)`)
	if err != nil {
		return res, err
	}
	defer stopProc(api)
	var demo struct {
		Token string `json:"token"`
		BotID string `json:"bot_id"`
	}
	b, err := os.ReadFile(filepath.Join(data, "bootstrap.json"))
	if err != nil {
		return res, err
	}
	if err := json.Unmarshal(b, &demo); err != nil {
		return res, err
	}
	const conc = 8
	c := &apiclient.Client{HTTP: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc, MaxConnsPerHost: conc}, Timeout: 30 * time.Second},
		Base: base + "/api/bots/" + demo.BotID, Token: demo.Token}

	if err := verifyDomain(c, dns); err != nil {
		return res, err
	}
	for _, f := range []map[string]string{{"name": "email", "type": "string"}, {"name": "email_consent", "type": "boolean"}} {
		if err := c.Call("POST", "/fields", f, nil); err != nil {
			return res, err
		}
	}
	if err := createRecipients(c, n, conc); err != nil {
		return res, err
	}
	var doc struct {
		ID string `json:"id"`
	}
	if err := c.Call("POST", "/content", map[string]any{"type": "email", "name": "Bench", "draft": map[string]any{
		"subject": "Hi {{ subscriber.fields.email }}", "html": benchHTML(),
		"from": map[string]any{"address": "news@" + emailDomain}}}, &doc); err != nil {
		return res, err
	}
	if err := c.Call("POST", "/content/"+doc.ID+"/publish", map[string]any{"expected_revision": 1}, nil); err != nil {
		return res, err
	}
	var camp struct {
		ID string `json:"id"`
	}
	if err := c.Call("POST", "/email-campaigns", map[string]any{"name": "Bench", "content_id": doc.ID}, &camp); err != nil {
		return res, err
	}
	cpath := "/email-campaigns/" + camp.ID

	cpu0, wait0, peer0 := procCPU(api.Process.Pid), procWait(api.Process.Pid), procCPU(os.Getpid())
	res.start = time.Now()
	if err := c.Call("POST", cpath+"/schedule", map[string]any{"expected_revision": 1, "confirm": true}, nil); err != nil {
		return res, err
	}
	deadline := res.start.Add(10 * time.Minute)
	for len(mail.Messages()) < n {
		if time.Now().After(deadline) {
			return res, fmt.Errorf("the SMTP server received %d of %d messages in 10 minutes", len(mail.Messages()), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	res.total = time.Since(res.start)
	if cpu0 > 0 {
		res.cpu = procCPU(api.Process.Pid) - cpu0
	}
	if wait0 > 0 {
		res.wait = procWait(api.Process.Pid) - wait0
	}
	if peer0 > 0 {
		res.peer = procCPU(os.Getpid()) - peer0
	}
	res.msgs = mail.Messages()
	if len(res.msgs) != n {
		return res, fmt.Errorf("the SMTP server received %d messages for %d recipients", len(res.msgs), n)
	}
	res.first, res.last = res.msgs[0].At, res.msgs[n-1].At

	// The last row is marked sent just after its message is accepted: wait for the report.
	var report struct {
		Counts struct {
			Recipients, Sent, Failed, Skipped int
		} `json:"counts"`
	}
	for wait := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if err := c.Call("GET", cpath+"/report", nil, &report); err != nil {
			return res, err
		}
		if report.Counts.Sent == n {
			break
		}
		if time.Now().After(wait) {
			return res, fmt.Errorf("the campaign report says %d sent of %d: %+v", report.Counts.Sent, n, report.Counts)
		}
	}
	return res, nil
}

// procCPU is the user and system CPU time of process pid so far, from /proc (Linux); zero
// when it cannot be read.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses and may hold spaces:
	// utime and stime are the 14th and 15th fields of the line, in clock ticks (100 a second
	// on Linux).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	user, err1 := strconv.ParseInt(f[11], 10, 64)
	sys, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(user+sys) * (time.Second / 100)
}

// procWait is how long the threads of process pid have waited, runnable, for a CPU so far
// (the sum of their schedstat run delays, Linux); zero when it cannot be read. A process
// that waits long for a CPU is bound by what else runs on the machine, not by its work.
func procWait(pid int) time.Duration {
	dirs, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0
	}
	var sum time.Duration
	for _, d := range dirs {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, d.Name()))
		if err != nil {
			continue // the thread has exited
		}
		// Time on the CPU, time waiting on a run queue (both in ns), time slices run.
		if f := strings.Fields(string(b)); len(f) >= 2 {
			if ns, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				sum += time.Duration(ns)
			}
		}
	}
	return sum
}

// verifyDomain adds the sending domain, publishes its records on the fake DNS server and
// verifies it.
func verifyDomain(c *apiclient.Client, dns *fakedns.Server) error {
	var dom struct {
		ID      string `json:"id"`
		Status  string `json:"status"`
		Records []struct {
			Type     string `json:"type"`
			Name     string `json:"name"`
			Value    string `json:"value"`
			Priority *int   `json:"priority"`
		} `json:"records"`
	}
	if err := c.Call("POST", "/email/domains", map[string]string{"name": emailDomain}, &dom); err != nil {
		return err
	}
	for _, rec := range dom.Records {
		switch rec.Type {
		case "TXT":
			dns.TXT(rec.Name, rec.Value)
		case "MX":
			pref := 10
			if rec.Priority != nil {
				pref = *rec.Priority
			}
			dns.MX(rec.Name, rec.Value, uint16(pref))
		case "CNAME":
			dns.CNAME(rec.Name, rec.Value)
		}
	}
	for range 50 {
		if err := c.Call("POST", "/email/domains/"+dom.ID+"/verify", map[string]any{}, &dom); err != nil {
			return err
		}
		if dom.Status == "verified" {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the domain %s is %s, not verified", emailDomain, dom.Status)
}

// createRecipients creates n Telegram subscribers with an address and consent, conc at a time.
func createRecipients(c *apiclient.Client, n, conc int) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				err := c.Call("POST", "/subscribers", map[string]any{"channel": "telegram", "external_id": strconv.Itoa(i),
					"fields": map[string]any{"email": fmt.Sprintf("r%d@example.org", i), "email_consent": true}}, nil)
				if err != nil {
					once.Do(func() { first = err })
					next.Store(int64(n)) // stop the others
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// benchHTML is an email body of about 5 KB with one link.
func benchHTML() string {
	var b strings.Builder
	b.WriteString("<html><body>\n")
	const para = "<p>Our spring collection is here: light jackets, linen shirts and canvas shoes, " +
		"made to last and priced to move. Members get free delivery on every order this week.</p>\n"
	for b.Len() < 5000 {
		b.WriteString(para)
	}
	b.WriteString(`<p>See it all <a href="https://shop.example/x">x</a></p>` + "\n</body></html>\n")
	return b.String()
}

// bareSMTP sends msgs to a fresh fake SMTP server with net/smtp alone, one at a time and one
// connection each, as shared/email's SMTP sender does without a pool (and campaigns sent
// before they had workers and a pool), and checks that the server received the same bytes.
// This is the baseline the goal is judged against: keep its method.
func bareSMTP(msgs []fakesmtp.Message) (time.Duration, error) {
	srv, err := fakesmtp.Listen()
	if err != nil {
		return 0, err
	}
	defer srv.Close()
	start := time.Now()
	for _, m := range msgs {
		if err := sendOne(srv.Addr, m); err != nil {
			return 0, err
		}
	}
	elapsed := time.Since(start)
	got := srv.Messages()
	if len(got) != len(msgs) {
		return 0, fmt.Errorf("the server received %d of %d messages", len(got), len(msgs))
	}
	for i := range got {
		if !bytes.Equal(got[i].Data, msgs[i].Data) {
			return 0, fmt.Errorf("message %d arrived changed", i)
		}
	}
	return elapsed, nil
}

// sendOne delivers one message over its own connection: dial, EHLO localhost (the
// platform's default hello name), MAIL, RCPT, DATA, QUIT.
func sendOne(addr string, m fakesmtp.Message) error {
	c, err := smtp.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Hello("localhost"); err != nil {
		return err
	}
	if err := transaction(c, m); err != nil {
		return err
	}
	return c.Quit()
}

// transaction is MAIL, RCPT and DATA of one message.
func transaction(c *smtp.Client, m fakesmtp.Message) error {
	if err := c.Mail(m.From); err != nil {
		return err
	}
	for _, to := range m.To {
		if err := c.Rcpt(to); err != nil {
			return err
		}
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(m.Data); err != nil {
		return err
	}
	return w.Close()
}

// barePooled sends msgs to a fresh fake SMTP server with net/smtp alone, workers at a
// time, each worker keeping its connection for perConn messages and saying RSET before
// each message on a kept one (as email.SMTPPool does), and checks that every message
// arrived once and unchanged.
func barePooled(msgs []fakesmtp.Message, workers, perConn int) (time.Duration, error) {
	srv, err := fakesmtp.Listen()
	if err != nil {
		return 0, err
	}
	defer srv.Close()
	var next atomic.Int64
	errs := make([]error, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			var (
				c    *smtp.Client
				err  error
				sent int
			)
			defer func() {
				if c != nil {
					_ = c.Quit()
				}
			}()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(msgs) {
					return
				}
				if c != nil && sent >= perConn {
					_ = c.Quit()
					c = nil
				}
				if c == nil {
					if c, err = smtp.Dial(srv.Addr); err == nil {
						err = c.Hello("localhost")
					}
					sent = 0
				} else {
					err = c.Reset()
				}
				if err == nil {
					err = transaction(c, msgs[i])
				}
				if err != nil {
					errs[w] = err
					next.Store(int64(len(msgs))) // stop the others
					return
				}
				sent++
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	got := srv.Messages()
	if len(got) != len(msgs) {
		return 0, fmt.Errorf("the server received %d of %d messages", len(got), len(msgs))
	}
	want := map[string]int{}
	for _, m := range msgs {
		want[string(m.Data)]++
	}
	for _, m := range got {
		if want[string(m.Data)]--; want[string(m.Data)] < 0 {
			return 0, errors.New("a message arrived changed or twice")
		}
	}
	return elapsed, nil
}
