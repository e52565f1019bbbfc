package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/botplatform/api/functions/families"
	"github.com/botplatform/api/tests/lambdaruntime"
)

// lambdaBench reports, for every Lambda, the time from process start to its first answer
// (a cold-start proxy: Lambda's own sandbox setup is not ours to measure) against a minimal
// aws-lambda-go function built the same way in the same run, and each function's size as
// deployed (linux/arm64, stripped).
func lambdaBench(runs int) error {
	dir, err := os.MkdirTemp("", "botapi-lambda-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	kms := httptest.NewServer(http.HandlerFunc(fakeGenerateMac))
	defer kms.Close()
	env := []string{
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_EC2_METADATA_DISABLED=true",
		"AWS_ENDPOINT_URL_KMS=" + kms.URL,
		"TABLE_NAME=bench", "AUDIT_BUS_NAME=bench", "CURSOR_KEY_ID=alias/bench-cursors",
		"JOBS_QUEUE_URL=https://sqs.us-east-1.amazonaws.com/123456789012/bench-jobs",
	}
	names := []string{"hello (baseline)"}
	for _, f := range families.All() {
		names = append(names, f.Name)
	}
	names = append(names, families.Workers()...)
	event := []byte(`{"version":"2.0","routeKey":"GET /healthz","rawPath":"/healthz","headers":{},"requestContext":{"http":{"method":"GET","path":"/healthz"},"requestId":"bench"}}`)

	fmt.Printf("\nLambda cold start: process start to first answer, median of %d starts; size as deployed (linux/arm64, -s -w)\n\n", runs)
	fmt.Println("| function | cold start | vs baseline | size |")
	fmt.Println("|---|---:|---:|---:|")
	var base time.Duration
	for _, name := range names {
		src := "functions/" + name + "/lambda"
		if strings.HasPrefix(name, "hello") {
			src = "tests/bench/hellolambda"
		}
		bin, err := buildLambda(dir, name, src, "")
		if err != nil {
			return err
		}
		arm, err := buildLambda(dir, name+"-arm64", src, "arm64")
		if err != nil {
			return err
		}
		fi, err := os.Stat(arm)
		if err != nil {
			return err
		}
		payload := event
		switch name {
		case "authorizer":
			payload = []byte(`{"version":"2.0","type":"REQUEST","headers":{}}`)
		case "auditsink", "jobs":
			payload = nil // these need their services on the first event; time the start only
		}
		var times []time.Duration
		for i := 0; i < runs; i++ {
			d, err := coldStart(bin, payload, env)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			times = append(times, d)
		}
		slices.Sort(times)
		med := times[len(times)/2]
		if base == 0 {
			base = med
		}
		note := ""
		if payload == nil {
			note = " (start only)"
		}
		fmt.Printf("| %s | %s%s | %.2f | %.1f MiB |\n", name, med.Round(100*time.Microsecond), note, float64(med)/float64(base), float64(fi.Size())/(1<<20))
	}
	return nil
}

func buildLambda(dir, name, src, arch string) (string, error) {
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", out, "./"+src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if arch != "" {
		cmd.Env = append(cmd.Env, "GOOS=linux", "GOARCH="+arch)
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %v\n%s", src, err, b)
	}
	return out, nil
}

// coldStart starts bin against a fresh fake Runtime API and times its first answer; with no
// payload it times until the function asks for its first event (its init is done).
func coldStart(bin string, payload []byte, env []string) (time.Duration, error) {
	rt, err := lambdaruntime.Start()
	if err != nil {
		return 0, err
	}
	defer rt.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	p, err := rt.Launch(bin, env...)
	if err != nil {
		return 0, err
	}
	defer p.Stop()
	if payload == nil {
		if err := rt.AwaitPoll(ctx); err != nil {
			return 0, fmt.Errorf("%w\n%s", err, p.Logs())
		}
		return time.Since(start), nil
	}
	res, err := rt.Invoke(ctx, payload)
	if err != nil {
		return 0, fmt.Errorf("%w\n%s", err, p.Logs())
	}
	if res.Error {
		return 0, fmt.Errorf("function error: %s\n%s", res.Payload, p.Logs())
	}
	return time.Since(start), nil
}

// fakeGenerateMac answers kms:GenerateMac as KMS does (AWS JSON 1.1), with a fixed MAC.
func fakeGenerateMac(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	if r.Header.Get("X-Amz-Target") != "TrentService.GenerateMac" {
		http.Error(w, `{"__type":"UnknownOperationException"}`, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	mac := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32)))
	fmt.Fprintf(w, `{"KeyId":"arn:aws:kms:us-east-1:123456789012:key/bench","Mac":%q,"MacAlgorithm":"HMAC_SHA_256"}`, mac)
}
