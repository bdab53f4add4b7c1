package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/deputy-run/deputy/llm/fake"
	"github.com/deputy-run/deputy/serve"
)

// fakeLLMExamples are fakellm's help examples.
const fakeLLMExamples = `  deputy fakellm --scenario demo
  deputy fakellm --scenario claude-code.yaml --log requests.jsonl
  deputy fakellm --latency 300ms --per-token 4ms
  deputy fakellm --fault 1=overloaded --fault 3=cut_stream,after_bytes=200
  deputy fakellm --fault-rate 0.05 --random-fault rate_limit,retry_after=2s --seed 42
  curl -s 'http://127.0.0.1:7421/_deputy/requests?since=0'`

// fakeLLMLong is fakellm's help: every endpoint it serves and every knob.
const fakeLLMLong = `Serve a wire-faithful fake of the model APIs, driven by a scenario file
(docs/scenarios.md):

  POST /v1/messages, /v1/messages/count_tokens   Anthropic Messages
  POST /v1/chat/completions                      OpenAI Chat Completions
  POST /v1/responses; GET, DELETE /v1/responses/{id};
  GET /v1/responses/{id}/input_items             OpenAI Responses
  GET /v1/models, /v1/models/{id}                either wire's models, by its headers
  GET, DELETE /_deputy/requests                  the request log (below)

Point real clients at it with ANTHROPIC_BASE_URL=http://ADDR, or
OPENAI_BASE_URL=http://ADDR/v1 for both OpenAI wires. Without a scenario it
answers every request with a short text.

Every exchange is kept in a request log: GET /_deputy/requests answers it as
JSON (?since=N for the exchanges after the N-th, from its last_seq),
DELETE /_deputy/requests empties it; --log FILE also appends each exchange to
FILE as one JSON line when it ends (request, answer or stream events, status,
latency, fault; API keys redacted), so tail -f shows them live. The in-memory
log keeps the newest exchanges within --max-logged and --max-log-bytes.

The flags set for the whole server what a scenario sets: latency, faults by
request number (--fault N=KIND[,key=value...], repeatable) or at a seeded rate
(--fault-rate, --random-fault), and the seed. Fault kinds: rate_limit,
overloaded, server_error, slow_first_byte, cut_stream, error_event,
malformed_json; keys: retry_after, delay, after_bytes. A --fault wins over the
scenario's faults; the scenario's own latency wins over --latency.`

func newFakeLLMCmd() *cobra.Command {
	var addr, scenario, apiKey, logFile string
	var knobs fake.ServerFlags
	var maxLogBytes int64
	cmd := &cobra.Command{
		Use:     "fakellm [--addr 127.0.0.1:PORT] [--scenario FILE] [--log FILE] [fault and latency flags]",
		Short:   "Serve deputy's fake Anthropic Messages and OpenAI Chat Completions and Responses APIs",
		Long:    fakeLLMLong,
		Example: fakeLLMExamples,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts := fake.Options{APIKey: apiKey}
			if err := knobs.Apply(&opts); err != nil {
				return usageErr("%v", err)
			}
			opts.MaxLogBytes = maxLogBytes
			if scenario != "" {
				s, err := loadScenario(scenario)
				if err != nil {
					return usageErr("%v", err)
				}
				opts.Responder = s
			}
			if logFile != "" {
				// 0600: the log holds whatever clients sent.
				f, err := os.OpenFile(logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
				if err != nil {
					return usageErr("--log: %v", err)
				}
				defer f.Close()
				opts.Log = f // unbuffered: each line reaches the file as it is written
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return usageErr("listen: %v", err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			srv := fake.NewServer(opts)
			if err := serveFake(ctx, ln, srv, cmd); err != nil {
				return err
			}
			if err := srv.LogErr(); err != nil {
				return &exitError{code: exitFailed, err: fmt.Errorf("--log %s: %w", logFile, err)}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", "127.0.0.1:7421", "address to listen on (loopback by default)")
	f.StringVar(&scenario, "scenario", "", "scenario file (YAML) deciding the answers, or \"demo\" for the built-in demo")
	f.StringVar(&apiKey, "api-key", "", "require this API key (x-api-key or Authorization: Bearer), also for /_deputy/requests; default: accept any")
	f.StringVar(&logFile, "log", "", "append one JSON line per exchange to FILE as it ends")
	f.DurationVar(&knobs.Latency, "latency", 0, "delay before every answer's headers (first byte), e.g. 300ms")
	f.DurationVar(&knobs.PerToken, "per-token", 0, "delay per output token, spread over a stream's deltas, e.g. 4ms")
	f.StringArrayVar(&knobs.Faults, "fault", nil, "N=KIND[,key=value...]: request N fails so (3=overloaded, 2=rate_limit,retry_after=2s); repeatable")
	f.Float64Var(&knobs.FaultRate, "fault-rate", 0, "share of requests (0..1) failing with --random-fault, drawn from --seed")
	f.StringVar(&knobs.RandomFault, "random-fault", "", "KIND[,key=value...] the --fault-rate failures are (default server_error)")
	f.Uint64Var(&knobs.Seed, "seed", 0, "seed of ids, stream delta sizes and --fault-rate's draws: same seed, same run")
	f.IntVar(&knobs.MaxDelta, "max-delta", 0, "largest streamed delta, in runes of text or bytes of tool input (default 16)")
	f.IntVar(&knobs.MinCacheTokens, "min-cache-tokens", 0, "shortest prompt prefix the prompt-cache simulator caches (default 1024)")
	f.IntVar(&knobs.MaxLogged, "max-logged", 0, "exchanges the in-memory log keeps (default 10000; negative: none)")
	f.Int64Var(&maxLogBytes, "max-log-bytes", 0, "bytes the in-memory log keeps, an exchange weighing its answer and twice its body (default 256 MiB; negative: no bound)")
	return cmd
}

func serveFake(ctx context.Context, ln net.Listener, h http.Handler, cmd *cobra.Command) error {
	// deputy serve's limits (timeouts on headers and bodies, none on the
	// streamed answers; the header and connection caps), every request
	// counting as authenticated: the fake's API key is its own business.
	srv := &http.Server{Handler: h}
	hln := serve.Harden(srv, ln, serve.Limits{})
	fmt.Fprintf(cmd.OutOrStdout(), "deputy fakellm listening on http://%s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(hln) }()
	select {
	case err := <-errc:
		return &exitError{code: exitFailed, err: err}
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return &exitError{code: exitFailed, err: err}
	}
	return nil
}
